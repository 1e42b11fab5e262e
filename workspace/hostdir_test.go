package workspace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/artrt/art/cas"
	"golang.org/x/sys/unix"
)

// TestReadHostDir: a listing holds every name but "." and ".." exactly
// once, in byte order, each with its own lstat (a symlink's, not its
// target's) - also for a directory whose entries take several getdents
// calls (more than the 32 KiB buffer) and names of any bytes.
func TestReadHostDir(t *testing.T) {
	dir := t.TempDir()
	want := []string{"\xff\xfe", "a b", "Z", "-", "..x", ".hidden"}
	for i := range 1500 {
		want = append(want, fmt.Sprintf("file-with-a-long-name-to-fill-the-buffer-%04d", i))
	}
	for i, n := range want {
		if err := os.WriteFile(filepath.Join(dir, n), bytes.Repeat([]byte("x"), i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "sub", "link")
	slices.Sort(want)
	got, err := readHostDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i, e := range got {
		if string(e.name) != want[i] {
			t.Fatalf("entry %d is %q, want %q", i, e.name, want[i])
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, want[i]), &st); err != nil {
			t.Fatal(err)
		}
		if e.st.Ino != st.Ino || e.st.Size != st.Size || e.st.Mode != st.Mode || e.kind != kindOf(st.Mode) {
			t.Errorf("%q: stat ino %d size %d mode %o kind %d, lstat says ino %d size %d mode %o",
				want[i], e.st.Ino, e.st.Size, e.st.Mode, e.kind, st.Ino, st.Size, st.Mode)
		}
	}
	if got[slices.IndexFunc(got, func(e hostEntry) bool { return string(e.name) == "link" })].kind != cas.EntrySymlink {
		t.Error("the symlink was followed")
	}
	if _, err := readHostDir(filepath.Join(dir, "link")); err == nil {
		t.Error("a symlink to a directory was listed")
	}
}
