package overlay_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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

// Creates and mkdirs answered before the journal has them (behind.go)
// must land in it in order with everything else, each under the inode
// number the kernel was given: a tree made in new directories (tar x)
// reads back the same after a remount, every node has its own number,
// and the journal's projection is what its events replay to.
func TestCreateBehind(t *testing.T) {
	s := newStore(t)
	before := s.fs.Stats().CreatesBehind
	const dirs, files = 12, 40
	inos := map[uint64]string{}
	want := map[string]string{}
	for d := range dirs {
		dir := filepath.Join(s.mnt, fmt.Sprintf("d%02d", d), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
			data := fmt.Sprintf("file %d/%d\n", d, i)
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			want[p] = data
			if i%5 == 0 { // the name again at once: the unlink and the new create follow the first create
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				data = "again " + data
				if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				want[p] = data
			}
		}
	}
	got := s.fs.Stats().CreatesBehind - before
	if got < dirs*files {
		t.Fatalf("%d creates were answered before their update; the test exercises the synchronous path only", got)
	}
	check := func(when string) {
		t.Helper()
		clear(inos)
		for p, data := range want {
			b, err := os.ReadFile(p)
			if err != nil || string(b) != data {
				t.Fatalf("%s %s: %q, %v; want %q", when, p, b, err, data)
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			if other, ok := inos[st.Ino]; ok {
				t.Fatalf("%s: %s and %s are both inode %d", when, p, other, st.Ino)
			}
			inos[st.Ino] = p
		}
	}
	check("before remount")
	s.remount()
	check("after remount")
	s.unmount()
	s.verify()
}
