package overlay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artrt/art/overlay"
)

// TestPrimeFillsKernelCaches: a mount that primes the kernel's caches
// lists the branch's tree once, and the agent's lstat of every name then
// costs no LOOKUP or GETATTR, where a mount that does not prime sends one
// per name.
// Links are listed, not followed.
func TestPrimeFillsKernelCaches(t *testing.T) {
	s := newStore(t)
	outside := t.TempDir()
	for i := range 40 {
		if err := os.WriteFile(filepath.Join(outside, fmt.Sprintf("x%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for i := range 8 {
		d := filepath.Join(s.mnt, fmt.Sprintf("d%d", i), "sub")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Dir(d), d)
		for j := range 25 {
			p := filepath.Join(d, fmt.Sprintf("f%02d", j))
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	for name, target := range map[string]string{"out": outside, "d0/loop": "."} {
		if err := os.Symlink(target, filepath.Join(s.mnt, name)); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Join(s.mnt, name))
	}
	// lstatAll stats every name and reports the round trips it cost.
	lstatAll := func() int64 {
		t.Helper()
		before := s.fs.Stats()
		for _, p := range paths {
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
		}
		after := s.fs.Stats()
		return after.Lookups - before.Lookups + after.GetAttrs - before.GetAttrs
	}

	s.remount() // without priming: the kernel knows nothing
	if n := lstatAll(); n < int64(len(paths)) {
		t.Fatalf("%d LOOKUPs and GETATTRs for %d names on a cold mount: the count does not count", n, len(paths))
	}
	s.unmount()
	s.opts.Prime = true
	s.mount()
	entries, dirs := overlay.PrimeWait(s.fs)
	if want := len(paths); entries != want || dirs != 1+16 {
		t.Fatalf("primed %d entries in %d directories, want %d in %d", entries, dirs, want, 1+16)
	}
	if n := lstatAll(); n != 0 {
		t.Fatalf("%d LOOKUPs and GETATTRs for %d names after priming, want 0 (a listing drops a directory's atime: the walk asks for it again)", n, len(paths))
	}
	// An unmount stops the walk wherever it is (its open directory
	// would fail the unmount) and waits for it: before it began (it waits
	// primeQuiet first), while it lists, after it ended.
	for i := range 6 {
		time.Sleep(time.Duration(i) * 6 * time.Millisecond)
		s.remount()
	}
}
