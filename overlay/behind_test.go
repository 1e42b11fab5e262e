package overlay_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Unlinks answered before the journal has them (behind.go) must land in
// it, in order with everything else: a name unlinked and made again holds
// the new file, a file unlinked while open keeps its content until closed,
// and after a remount the store holds exactly the survivors.
func TestUnlinkBehind(t *testing.T) {
	s := newStore(t)
	dir := filepath.Join(s.mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 300
	path := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%03d", i)) }
	for i := range n {
		if err := os.WriteFile(path(i), []byte(fmt.Sprint("old ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path(i), 0o600); err != nil { // voids the listing's cached node: the live one decides
			t.Fatal(err)
		}
	}
	open, err := os.Open(path(0))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	before := s.fs.Stats().UnlinksBehind
	for i := range n {
		if i%3 == 2 {
			continue // survivors
		}
		if err := os.Remove(path(i)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 { // the name again, at once: the journal must have the unlink first
			if err := os.WriteFile(path(i), []byte(fmt.Sprint("new ", i)), 0o644); err != nil {
				t.Fatalf("re-create %s: %v", path(i), err)
			}
		}
	}
	if got := s.fs.Stats().UnlinksBehind - before; got < n/2 {
		t.Fatalf("%d of %d unlinks were written behind; the test exercises the synchronous path only", got, 2*n/3)
	}
	if got, err := os.ReadFile("/proc/self/fd/" + fmt.Sprint(open.Fd())); err != nil || string(got) != "old 0" {
		t.Fatalf("the unlinked open file reads %q, %v; want its content", got, err)
	}
	open.Close()
	s.remount()
	for i := range n {
		got, err := os.ReadFile(path(i))
		var want []byte
		switch i % 3 {
		case 0:
			if !os.IsNotExist(err) {
				t.Fatalf("%s after remount: %q, %v; want it gone", path(i), got, err)
			}
			continue
		case 1:
			want = []byte(fmt.Sprint("new ", i))
		case 2:
			want = []byte(fmt.Sprint("old ", i))
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after remount: %q, %v; want %q", path(i), got, err, want)
		}
	}
	s.unmount()
	s.verify()
}
