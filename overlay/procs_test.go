package overlay_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/artrt/art/internal/procs"
	"github.com/artrt/art/overlay"
)

// A mount adds Ps for go-fuse's readers blocked in read(2) on /dev/fuse
// and for its io_uring threads (fuseuring.Prepare) while it is served,
// and gives them back at unmount; the workers of CPU-bound work
// (procs.Workers) stay as many as before.
func TestMountReservesPsForReaders(t *testing.T) {
	before, workers := runtime.GOMAXPROCS(0), procs.Workers()
	readers := min(max(before, 2), 16) + 1 // go-fuse 2.12.1's maxReaders, plus one
	_, _, fsys := mount(t)
	rings := overlay.RingThreads(fsys)
	if got := runtime.GOMAXPROCS(0); got != before+readers+rings {
		t.Errorf("mounted: GOMAXPROCS %d, want %d (%d before, %d readers, %d ring threads)", got, before+readers+rings, before, readers, rings)
	}
	if got := procs.Workers(); got != workers {
		t.Errorf("mounted: procs.Workers() = %d, want %d", got, workers)
	}
	if err := fsys.Unmount(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("unmounted: GOMAXPROCS %d, want %d", got, before)
	}
}
