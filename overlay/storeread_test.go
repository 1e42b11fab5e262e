package overlay_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// childRange reads n bytes of p at off in a child process (dd).
func childRange(t *testing.T, p string, off, n int) []byte {
	t.Helper()
	out, err := exec.Command("dd", "if="+p, "bs=4096", "skip="+strconv.Itoa(off/4096), "count="+strconv.Itoa(n/4096), "status=none").Output()
	if err != nil {
		t.Fatalf("dd %s at %d: %v", p, off, err)
	}
	return out
}

// TestStoreReadPartial: a big file held only in the store serves a read
// of a part of it straight from the store - no private copy, nothing else
// of it decoded - and a write after such reads is what every later read
// sees (the kernel's cached pages of the store's bytes never outlive it).
func TestStoreReadPartial(t *testing.T) {
	s := newStore(t)
	p := filepath.Join(s.mnt, "f")
	data := seeded(3<<20+5, 7)
	writeChild(t, p, data)
	s.remount() // the content is in the store only
	if got := childRange(t, p, 0, 4096); string(got) != string(data[:4096]) {
		t.Fatalf("first page: %d bytes, not the ones written", len(got))
	}
	if got := childRange(t, p, 300*4096, 2*4096); string(got) != string(data[300*4096:302*4096]) {
		t.Fatalf("pages 300-301: %d bytes, not the ones written", len(got))
	}
	st := s.fs.Stats()
	if st.Copies != 0 || st.StoreReads == 0 || len(s.uppers()) != 0 {
		t.Fatalf("partial reads: %+v, %d private copies; want reads from the store and no copy", st, len(s.uppers()))
	}
	mustReadChild(t, p, data)
	// An open for writing makes a private copy; reads see the write.
	overwriteChild(t, p, "XYZ")
	mod := append([]byte("XYZ"), data[3:]...)
	mustReadChild(t, p, mod)
	if got := childRange(t, p, 0, 4096); string(got) != string(mod[:4096]) {
		t.Fatal("first page after the write: the old bytes")
	}
	s.remount()
	mustReadChild(t, p, mod)
}

// TestStoreReadThenCopy: a file read past storeReadMax from the store is
// copied out at that point and the rest of the read comes from the copy;
// a small file written in the session and read after a remount is served
// from the store, and a write to it after that read is seen.
func TestStoreReadThenCopy(t *testing.T) {
	s := newStore(t)
	big, small := filepath.Join(s.mnt, "big"), filepath.Join(s.mnt, "small")
	data := seeded(12<<20+77, 9)
	writeChild(t, big, data)
	writeChild(t, small, []byte("small file\n"))
	s.remount()
	mustReadChild(t, big, data)
	if st := s.fs.Stats(); st.Copies != 1 || st.StoreReads == 0 {
		t.Fatalf("a full read of %d bytes: %+v; want reads from the store, then one copy", len(data), st)
	}
	mustReadChild(t, big, data)
	mustReadChild(t, small, []byte("small file\n"))
	if err := exec.Command("sh", "-c", `printf 'SMALL' 1<>"$1"`, "sh", small).Run(); err != nil {
		t.Fatal(err)
	}
	mustReadChild(t, small, []byte("SMALL file\n"))
	s.remount()
	mustReadChild(t, small, []byte("SMALL file\n"))
	mustReadChild(t, big, data)
}
