package overlay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// TestSmallFilesInMemory pins the metadata fast path of tar x: a small new
// file lives in memory until close (no private copy on disk), and the
// mtime, owner and mode set while it is open are journaled with its
// content. A file that outgrows the buffer moves to a private copy
// without losing a byte. Both survive a remount, and replay equals live.
func TestSmallFilesInMemory(t *testing.T) {
	s := newStore(t)
	small := bytes.Repeat([]byte("package main\n"), 200)
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	p := filepath.Join(s.mnt, "small.go")
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, small); err != nil {
		t.Fatal(err)
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fchmod(fd, 0o640); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode&0o7777, uint32(0o640); got != want {
		t.Fatalf("mode while open = %o, want %o", got, want)
	}
	if err := unix.Close(fd); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(filepath.Join(s.dir, "upper1")); err != nil || len(ents) != 0 {
		t.Fatalf("private copies after writing a small file: %v (%v), want none", ents, err)
	}

	// A file written past the buffer spills to a private copy.
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	f, err := os.Create(filepath.Join(s.mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(big); off += 4096 {
		if _, err := f.Write(big[off:min(off+4096, len(big))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, small) {
			t.Fatalf("%s: small.go = %d bytes (%v), want %d", when, len(got), err, len(small))
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fi.Mode().Perm(), os.FileMode(0o640); got != want {
			t.Fatalf("%s: small.go mode = %v, want %v", when, got, want)
		}
		if got := fi.ModTime(); !got.Equal(mtime) {
			t.Fatalf("%s: small.go mtime = %v, want %v", when, got, mtime)
		}
		if got, err := os.ReadFile(filepath.Join(s.mnt, "big")); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("%s: big = %d bytes (%v), want %d", when, len(got), err, len(big))
		}
	}
	check("mounted")
	s.remount()
	check("after remount")
	s.unmount()
	s.verify()
}

// TestListingCacheSeesChanges: directory listings are cached by the kernel
// (FOPEN_CACHE_DIR) and must still show every change made through the
// mount: create, mkdir, rename in and out, unlink, rmdir, hard link.
func TestListingCacheSeesChanges(t *testing.T) {
	s := newStore(t)
	a, b := filepath.Join(s.mnt, "a"), filepath.Join(s.mnt, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ls := func(dir string) string {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return fmt.Sprint(names)
	}
	steps := []struct {
		what string
		do   func() error
		a, b string
	}{
		{"start", func() error { return nil }, "[]", "[]"},
		{"create a/x", func() error { return os.WriteFile(filepath.Join(a, "x"), []byte("x"), 0o644) }, "[x]", "[]"},
		{"mkdir a/d", func() error { return os.Mkdir(filepath.Join(a, "d"), 0o755) }, "[d x]", "[]"},
		{"rename a/x b/y", func() error { return os.Rename(filepath.Join(a, "x"), filepath.Join(b, "y")) }, "[d]", "[y]"},
		{"link b/y a/z", func() error { return os.Link(filepath.Join(b, "y"), filepath.Join(a, "z")) }, "[d z]", "[y]"},
		{"unlink b/y", func() error { return os.Remove(filepath.Join(b, "y")) }, "[d z]", "[]"},
		{"rename a/d b/d", func() error { return os.Rename(filepath.Join(a, "d"), filepath.Join(b, "d")) }, "[z]", "[d]"},
		{"rmdir b/d", func() error { return os.Remove(filepath.Join(b, "d")) }, "[z]", "[]"},
		{"symlink b/l", func() error { return os.Symlink("z", filepath.Join(b, "l")) }, "[z]", "[l]"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if got := ls(a); got != st.a {
			t.Fatalf("after %s: a lists %s, want %s", st.what, got, st.a)
		}
		if got := ls(b); got != st.b {
			t.Fatalf("after %s: b lists %s, want %s", st.what, got, st.b)
		}
	}
}

// TestListingAfterForget: a listing caches the nodes it read, and a node
// the kernel forgot is rebuilt from it. Changes made since - content,
// mode, a second name, a rename - must show after the kernel forgets
// everything (drop_caches), not what the listing read before them.
func TestListingAfterForget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("drop_caches needs root")
	}
	s := newStore(t)
	d, e := filepath.Join(s.mnt, "d"), filepath.Join(s.mnt, "e")
	for _, dir := range []string{d, e} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"f", "g", "h"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("abc"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	forget := func() {
		t.Helper()
		unix.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Fatal(err)
		}
	}
	list := func() {
		t.Helper()
		for _, dir := range []string{d, e} {
			if _, err := os.ReadDir(dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Open directories stay in the kernel's cache, and their nodes with
	// their listings in art; their entries are forgotten.
	for _, dir := range []string{d, e} {
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	list()
	appendTo := func(p, s string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(path string, size int64, mode os.FileMode, nlink uint64) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(s.mnt, path), &st); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if st.Size != size || os.FileMode(st.Mode&0o777) != mode || st.Nlink != nlink {
			t.Errorf("%s after forget: size %d mode %o nlink %d, want %d %o %d", path, st.Size, st.Mode&0o777, st.Nlink, size, mode, nlink)
		}
	}
	// Files with one name: their parent's listing entry is voided.
	appendTo(filepath.Join(d, "f"), "def")
	if err := os.Chmod(filepath.Join(d, "g"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e, "f"), filepath.Join(d, "moved")); err != nil {
		t.Fatal(err)
	}
	forget()
	check("d/f", 6, 0o644, 1)
	check("d/g", 3, 0o600, 1)
	check("d/moved", 3, 0o644, 1)
	check("e/g", 3, 0o644, 1)
	// A file with two names: a change through one shows through the other.
	if err := os.Link(filepath.Join(d, "h"), filepath.Join(e, "h2")); err != nil {
		t.Fatal(err)
	}
	list()
	forget()
	appendTo(filepath.Join(d, "h"), "xyz")
	forget()
	check("e/h2", 6, 0o644, 2)
	check("d/h", 6, 0o644, 2)
	if _, err := os.Lstat(filepath.Join(e, "f")); !os.IsNotExist(err) {
		t.Errorf("e/f after its rename: %v, want ENOENT", err)
	}
}

// TestGatheredWrites covers small writes to a file past the in-memory
// limit, which the daemon gathers before writing its private copy
// (tail.go): a stat, a read through another descriptor, an fsync, an
// overwrite behind the gathered bytes, a write past the end (a hole) and
// a truncation each see or keep exactly what was written, the journal
// holds it at fsync and close, and so does the store after a remount.
func TestGatheredWrites(t *testing.T) {
	s := newStore(t)
	p := filepath.Join(s.mnt, "g")
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	var want []byte // what the file must hold
	seq := 0
	pwrite := func(off, n int) {
		t.Helper()
		b := make([]byte, n)
		for i := range b {
			seq++
			b[i] = byte(seq*131 + seq>>8)
		}
		if w, err := unix.Pwrite(fd, b, int64(off)); err != nil || w != n {
			t.Fatalf("pwrite %d at %d: %d, %v", n, off, w, err)
		}
		if end := off + n; end > len(want) {
			want = append(want, make([]byte, end-len(want))...)
		}
		copy(want[off:], b)
	}
	appendTo := func(size int) {
		t.Helper()
		for len(want) < size {
			pwrite(len(want), min(4096, size-len(want)))
		}
	}
	checkSize := func(when string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != int64(len(want)) {
			t.Fatalf("%s: size %d, want %d", when, st.Size, len(want))
		}
	}
	// O_DIRECT: the kernel asks the daemon rather than its page cache.
	readBack := func(when string, off, n int) {
		t.Helper()
		rfd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(rfd)
		buf := make([]byte, n+8192)
		a := buf[4096-int(uintptr(unsafe.Pointer(&buf[0]))%4096):][:n] // aligned
		r, err := unix.Pread(rfd, a, int64(off))
		if err != nil {
			t.Fatalf("%s: read at %d: %v", when, off, err)
		}
		if !bytes.Equal(a[:r], want[off:min(off+n, len(want))]) {
			t.Fatalf("%s: read %d bytes at %d differ from what was written", when, r, off)
		}
	}
	journaled := func(when string) {
		t.Helper()
		ctx := context.Background()
		st, err := s.db.Head(ctx, journal.DefaultBranch)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := s.db.Objects().GetTree(ctx, st.Root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tree.Entries {
			if string(e.Name) != "g" {
				continue
			}
			var b bytes.Buffer
			if _, err := s.db.Objects().ReadFile(ctx, e.Target, &b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Fatalf("%s: journal holds %d bytes, want the %d written", when, b.Len(), len(want))
			}
			return
		}
		t.Fatalf("%s: g not in the journal", when)
	}

	appendTo(600 << 10) // in memory, then a private copy and a tail
	checkSize("after 600 KiB")
	readBack("after 600 KiB", 600<<10-8192, 8192)
	appendTo(1500 << 10)  // past a full tail
	pwrite(200<<10, 4096) // behind the tail: written through
	appendTo(1600 << 10)
	pwrite(len(want)+10000, 4096) // a hole, then more at its end
	appendTo(1700 << 10)
	checkSize("after a hole")
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	journaled("fsync")
	appendTo(1800 << 10)
	if err := unix.Ftruncate(fd, int64(len(want)-5000)); err != nil { // cuts gathered bytes
		t.Fatal(err)
	}
	want = want[:len(want)-5000]
	checkSize("after truncate")
	appendTo(1900 << 10)
	readBack("after truncate", len(want)-20000, 20000)
	appendTo(2000 << 10)
	checkSize("before close")
	if err := unix.Close(fd); err != nil {
		t.Fatal(err)
	}
	fd = -1
	journaled("close")
	s.remount()
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after remount: %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	s.unmount()
	s.verify()
}

// TestSmallDirListedAtFirstLookup: in a new mount, the first name looked
// up in a small directory lists it, so stats of its other files need no
// query; a big directory answers its first lookup by a query and is
// listed at the second (a path walked through it lists nothing).
func TestSmallDirListedAtFirstLookup(t *testing.T) {
	s := newStore(t)
	for dir, n := range map[string]int{"small": 3, "big": 100} {
		if err := os.Mkdir(filepath.Join(s.mnt, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(s.mnt, dir, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.unmount()
	s.mount() // the kernel and the daemon know nothing of either directory
	queries := func(paths ...string) int64 {
		t.Helper()
		before := s.fs.Stats().LookupQueries
		for _, p := range paths {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(s.mnt, p), &st); err != nil {
				t.Fatal(err)
			}
		}
		return s.fs.Stats().LookupQueries - before
	}
	queries("small", "big") // the directories themselves: the root's business
	if got := queries("small/f0", "small/f1", "small/f2"); got != 0 {
		t.Errorf("stats of a 3-file directory's files took %d lookup queries, want 0 (listed at the first)", got)
	}
	if got := queries("big/f0"); got != 1 {
		t.Errorf("the first stat in a 100-file directory took %d lookup queries, want 1 (not listed)", got)
	}
	if got := queries("big/f1", "big/f2"); got != 0 {
		t.Errorf("the next stats in a 100-file directory took %d lookup queries, want 0 (listed at the second)", got)
	}
}

// TestMkdirOfExistingDirNoQuery: the kernel looks a directory's name up
// again at every mkdir of it (npm's mkdir -p before each file it writes);
// a live directory answers from memory, with no query, and a directory
// renamed away and made again under the old name is the new one.
func TestMkdirOfExistingDirNoQuery(t *testing.T) {
	s := newStore(t)
	if err := os.MkdirAll(filepath.Join(s.mnt, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := s.fs.Stats().LookupQueries
	for range 3 {
		for _, p := range []string{"a", "a/b", "a/b/c"} {
			if err := os.Mkdir(filepath.Join(s.mnt, p), 0o755); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("mkdir %s again: %v, want EEXIST", p, err)
			}
		}
	}
	if got := s.fs.Stats().LookupQueries - before; got != 0 {
		t.Errorf("mkdir of 3 existing directories 3 times took %d lookup queries, want 0", got)
	}
	ino := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(s.mnt, p), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	old := ino("a/b")
	if err := os.Rename(filepath.Join(s.mnt, "a/b"), filepath.Join(s.mnt, "a/moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.mnt, "a/b"), 0o700); err != nil {
		t.Fatalf("mkdir a/b after moving it away: %v", err)
	}
	if err := os.Mkdir(filepath.Join(s.mnt, "a/b"), 0o755); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("mkdir a/b again: %v, want EEXIST", err)
	}
	if got := ino("a/b"); got == old {
		t.Errorf("a/b has the moved directory's inode %d", old)
	}
	if got := ino("a/moved"); got != old {
		t.Errorf("a/moved has inode %d, want the moved directory's %d", got, old)
	}
	if _, err := os.Stat(filepath.Join(s.mnt, "a/moved/c")); err != nil {
		t.Errorf("the moved directory lost its child: %v", err)
	}
	s.unmount()
	s.verify()
}
