package overlay_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLookupOfListedNameAfterRenames: a lookup of a listed name whose
// node is live answers from the live node of the number the listing
// holds (node.go Lookup), so every edit of a listing must leave the number
// of what the name holds now. The kernel sends a LOOKUP for a name it
// knows at every mkdir of it (O_EXCL revalidation): a wrong number shows
// as that name's inode after the failed mkdir. Each case keeps the node
// that the name held before live (open, or a directory the kernel knows),
// so a stale number would find a live node.
func TestLookupOfListedNameAfterRenames(t *testing.T) {
	s := newStore(t)
	p := func(name string) string { return filepath.Join(s.mnt, name) }
	ino := func(name string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p(name), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	mkdir := func(name string) {
		t.Helper()
		if err := os.Mkdir(p(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// exists is a mkdir of name that must fail with EEXIST: the kernel
	// looks name up again first.
	exists := func(name string) {
		t.Helper()
		if err := os.Mkdir(p(name), 0o755); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("mkdir %s: %v, want EEXIST", name, err)
		}
	}
	write := func(name, content string) {
		t.Helper()
		writeChild(t, p(name), []byte(content))
	}
	mkdir("d")
	if _, err := os.ReadDir(p("d")); err != nil { // d's listing, read
		t.Fatal(err)
	}

	// Exchanged directories: each name holds the other's node.
	mkdir("d/x")
	mkdir("d/y")
	ix, iy := ino("d/x"), ino("d/y")
	if err := unix.Renameat2(unix.AT_FDCWD, p("d/x"), unix.AT_FDCWD, p("d/y"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	exists("d/x")
	exists("d/y")
	if got := ino("d/x"); got != iy {
		t.Errorf("d/x after the exchange: inode %d, want %d (d/y's)", got, iy)
	}
	if got := ino("d/y"); got != ix {
		t.Errorf("d/y after the exchange: inode %d, want %d (d/x's)", got, ix)
	}

	// Exchanged files, and a file renamed over another that is still
	// open: one link each, so no edit voids every listing (FS.gen) and
	// the lookups answer from d's listing.
	write("d/p", "p\n")
	write("d/q", "q\n")
	ip, iq := ino("d/p"), ino("d/q")
	if err := unix.Renameat2(unix.AT_FDCWD, p("d/p"), unix.AT_FDCWD, p("d/q"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	exists("d/p")
	exists("d/q")
	if got := ino("d/p"); got != iq {
		t.Errorf("d/p after the exchange: inode %d, want %d (d/q's)", got, iq)
	}
	if got := ino("d/q"); got != ip {
		t.Errorf("d/q after the exchange: inode %d, want %d (d/p's)", got, ip)
	}
	write("d/r", "r\n")
	open, err := os.Open(p("d/q"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	ir := ino("d/r")
	if err := os.Rename(p("d/r"), p("d/q")); err != nil {
		t.Fatal(err)
	}
	exists("d/q")
	if got := ino("d/q"); got != ir {
		t.Errorf("d/q after d/r moved over it: inode %d, want %d (not the open file's %d)", got, ir, ip)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, p("d/p"), unix.AT_FDCWD, p("d/q"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	exists("d/p")
	if got := ino("d/p"); got != ir {
		t.Errorf("d/p after the second exchange: inode %d, want %d", got, ir)
	}
	open.Close()

	// A directory renamed over an empty one, and its old name made again.
	mkdir("d/a")
	mkdir("d/b")
	ia, ib := ino("d/a"), ino("d/b")
	// unix.Rename: os.Rename refuses an existing directory as target.
	if err := unix.Rename(p("d/a"), p("d/b")); err != nil {
		t.Fatal(err)
	}
	exists("d/b")
	if got := ino("d/b"); got != ia {
		t.Errorf("d/b after d/a moved over it: inode %d, want %d", got, ia)
	}
	mkdir("d/a")
	exists("d/a")
	if got := ino("d/a"); got == ia || got == ib {
		t.Errorf("d/a made again has an old inode %d (a %d, b %d)", got, ia, ib)
	}

	// Hard links: a file renamed over one of two names of a file still
	// open; then the other name removed and made a directory.
	write("d/f", "f\n")
	if err := os.Link(p("d/f"), p("d/g")); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(p("d/f"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	iF := ino("d/f")
	write("d/h", "h\n")
	ih := ino("d/h")
	if err := os.Rename(p("d/h"), p("d/g")); err != nil {
		t.Fatal(err)
	}
	exists("d/g")
	if got := ino("d/g"); got != ih {
		t.Errorf("d/g after d/h moved over it: inode %d, want %d (not the open file's %d)", got, ih, iF)
	}
	exists("d/f")
	if got := ino("d/f"); got != iF {
		t.Errorf("d/f: inode %d, want %d", got, iF)
	}
	if err := os.Remove(p("d/f")); err != nil {
		t.Fatal(err)
	}
	mkdir("d/f")
	exists("d/f")
	if got := ino("d/f"); got == iF {
		t.Errorf("d/f made a directory has the removed open file's inode %d", got)
	}
	held.Close()

	// Across directories: a directory moved away, and one made in its
	// place; the moved one answers under its new name.
	mkdir("e")
	mkdir("d/m")
	im := ino("d/m")
	if err := os.Rename(p("d/m"), p("e/m")); err != nil {
		t.Fatal(err)
	}
	mkdir("d/m")
	exists("d/m")
	exists("e/m")
	if got := ino("e/m"); got != im {
		t.Errorf("e/m: inode %d, want %d", got, im)
	}
	if got := ino("d/m"); got == im {
		t.Errorf("d/m made again has the moved directory's inode %d", got)
	}
	s.unmount()
	s.verify()
}
