package overlay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaddirplusSubdirsNoQuery: a listing keeps its subdirectories'
// rows, so READDIRPLUS hands the kernel a directory's subdirectories
// without a lookup query each (find, du and rm -r list every directory of
// a tree in a new session: one query per directory before), and the
// attributes it hands out are what a lookup of each says.
func TestReaddirplusSubdirsNoQuery(t *testing.T) {
	s := newStore(t)
	d := filepath.Join(s.mnt, "d")
	for i := range 4 {
		if err := os.MkdirAll(filepath.Join(d, fmt.Sprintf("s%d", i), "x"), 0o750); err != nil {
			t.Fatal(err)
		}
		writeChild(t, filepath.Join(d, fmt.Sprintf("f%d", i)), []byte("f"))
	}
	if err := os.Chmod(filepath.Join(d, "s1"), 0o700); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(1_600_000_000, 123)
	if err := os.Chtimes(filepath.Join(d, "s2"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	stat := func(p string) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(s.mnt, p), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// What lookups say, in a mount that knows nothing of d.
	s.remount()
	want := map[string]unix.Stat_t{}
	for i := range 4 {
		p := fmt.Sprintf("d/s%d", i)
		want[p] = stat(p)
	}
	s.remount()
	stat("d")
	before := s.fs.Stats().LookupQueries
	if _, err := os.ReadDir(d); err != nil { // READDIRPLUS: every entry looked up by the bridge
		t.Fatal(err)
	}
	for p, w := range want {
		got := stat(p)
		if got.Ino != w.Ino || got.Mode != w.Mode || got.Nlink != w.Nlink || got.Mtim != w.Mtim || got.Ctim != w.Ctim || got.Uid != w.Uid || got.Gid != w.Gid {
			t.Errorf("%s from the listing: ino %d mode %o nlink %d mtime %v ctime %v, lookup says ino %d mode %o nlink %d mtime %v ctime %v",
				p, got.Ino, got.Mode, got.Nlink, got.Mtim, got.Ctim, w.Ino, w.Mode, w.Nlink, w.Mtim, w.Ctim)
		}
	}
	if got := s.fs.Stats().LookupQueries - before; got != 0 {
		t.Errorf("listing d (4 files, 4 directories) and stating its directories took %d lookup queries, want 0", got)
	}
}

// TestListedSubdirAfterForget: a directory's row in its parent's listing
// is its state when the listing was read. A directory changed while the
// kernel held it (a subdirectory made in it: its link count and mtime),
// then forgotten, must be looked up as it is now, not as the listing read
// it.
func TestListedSubdirAfterForget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("drop_caches needs root")
	}
	s := newStore(t)
	d := filepath.Join(s.mnt, "d")
	if err := os.MkdirAll(filepath.Join(d, "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.remount()
	// d stays open, so its node and listing stay in the daemon while the
	// kernel forgets its entries.
	f, err := os.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadDir(-1); err != nil { // d listed, s's row with it
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(d, "s"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d, "s", "new"), 0o755); err != nil { // s: nlink 3, mtime now
		t.Fatal(err)
	}
	var live unix.Stat_t
	if err := unix.Lstat(filepath.Join(d, "s"), &live); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	for range 3 { // the kernel may need more than one pass to let s go
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(d, "s"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 3 || st.Mtim != live.Mtim || st.Ino != live.Ino {
		t.Errorf("d/s after the kernel forgot it: nlink %d mtime %v ino %d, want nlink 3 mtime %v ino %d (as before the forget)",
			st.Nlink, st.Mtim, st.Ino, live.Mtim, live.Ino)
	}
}

// TestRmdirKeepsListings: removing a directory (link count 2) does not
// void every listing as a file with several names does, so rm -r reads
// the directories it has listed once from memory again.
func TestRmdirKeepsListings(t *testing.T) {
	s := newStore(t)
	a, b := filepath.Join(s.mnt, "a"), filepath.Join(s.mnt, "b")
	if err := os.MkdirAll(filepath.Join(b, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	writeChild(t, filepath.Join(a, "f"), []byte("f"))
	s.remount()
	ls := func() []string {
		t.Helper()
		ents, err := os.ReadDir(a)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	ls()
	if _, err := os.ReadDir(b); err != nil { // b listed too: its rmdir reads nothing
		t.Fatal(err)
	}
	before := s.fs.Stats().ListQueries
	if err := os.Remove(filepath.Join(b, "x")); err != nil {
		t.Fatal(err)
	}
	// A create in a (the kernel looks g up first) drops the kernel's
	// cached listing of it, so the next read asks the daemon again.
	writeChild(t, filepath.Join(a, "g"), []byte("g"))
	if got := fmt.Sprint(ls()); got != "[f g]" {
		t.Fatalf("a lists %s, want [f g]", got)
	}
	if got := s.fs.Stats().ListQueries - before; got != 0 {
		t.Errorf("creating in a and listing it again after an rmdir in b took %d listing queries, want 0 (its listing in memory)", got)
	}
}

// TestSubdirsListedAhead: READDIRPLUS of a directory lists its
// subdirectories in one query as it hands them to the kernel, so reading
// each of them next (find, du, rm -r) costs no query; what they list,
// and what their entries' attributes say, is what listing each on its own
// and looking each up say, also after a change made between the two
// reads.
func TestSubdirsListedAhead(t *testing.T) {
	s := newStore(t)
	d := filepath.Join(s.mnt, "d")
	for i := range 4 {
		sub := filepath.Join(d, fmt.Sprintf("s%d", i))
		if err := os.MkdirAll(filepath.Join(sub, "deeper"), 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range i + 1 {
			writeChild(t, filepath.Join(sub, fmt.Sprintf("f%d", j)), []byte("f"))
		}
	}
	if err := os.Mkdir(filepath.Join(d, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	names := func(dir string) string {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return fmt.Sprint(out)
	}
	stat := func(p string) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	subs := []string{"s0", "s1", "s2", "s3", "empty"}
	// Each on its own: a mount per read, so nothing is read ahead.
	want, wantSt := map[string]string{}, map[string]unix.Stat_t{}
	for _, sub := range subs {
		s.remount()
		want[sub] = names(filepath.Join(d, sub))
		if sub != "empty" {
			wantSt[sub+"/f0"] = stat(filepath.Join(d, sub, "f0"))
		}
	}
	s.remount()
	names(d)
	before := s.fs.Stats()
	writeChild(t, filepath.Join(d, "s1", "new"), []byte("n")) // s1's listing, read ahead, edited
	want["s1"] = "[deeper f0 f1 new]"
	for _, sub := range subs {
		if got := names(filepath.Join(d, sub)); got != want[sub] {
			t.Errorf("%s lists %s, want %s", sub, got, want[sub])
		}
	}
	after := s.fs.Stats()
	// Each read of s0-s3 reads its own subdirectory ahead in turn.
	if got := (after.ListQueries - after.AheadQueries) - (before.ListQueries - before.AheadQueries); got != 0 {
		t.Errorf("reading d's 5 subdirectories after d took %d listing queries of their own, want 0 (read ahead)", got)
	}
	if got := after.LookupQueries - before.LookupQueries; got != 0 {
		t.Errorf("reading d's 5 subdirectories after d took %d lookup queries, want 0", got)
	}
	for p, w := range wantSt {
		got := stat(filepath.Join(d, p))
		if got.Ino != w.Ino || got.Mode != w.Mode || got.Nlink != w.Nlink || got.Mtim != w.Mtim || got.Ctim != w.Ctim || got.Size != w.Size {
			t.Errorf("%s read ahead: ino %d mode %o nlink %d mtime %v ctime %v size %d, a lookup says %d %o %d %v %v %d",
				p, got.Ino, got.Mode, got.Nlink, got.Mtim, got.Ctim, got.Size, w.Ino, w.Mode, w.Nlink, w.Mtim, w.Ctim, w.Size)
		}
	}
}

// TestNoRecordsBelowNoQuery: below a directory under which the import
// cache records nothing (a tree an earlier session wrote), subdirectories
// ask for no import records of their own.
func TestNoRecordsBelowNoQuery(t *testing.T) {
	s := newStore(t)
	if err := os.MkdirAll(filepath.Join(s.mnt, "a/b/c/d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeChild(t, filepath.Join(s.mnt, "a/b/c/d/f"), []byte("f"))
	s.remount()
	before := s.fs.Stats().RecordQueries
	if _, err := os.Stat(filepath.Join(s.mnt, "a/b/c/d/f")); err != nil {
		t.Fatal(err)
	}
	if got := s.fs.Stats().RecordQueries - before; got != 1 {
		t.Errorf("a path 5 deep in a store without import records took %d records queries, want 1 (the root's)", got)
	}
}
