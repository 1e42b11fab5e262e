package overlay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// makeFiles creates n empty files f0000... in dir and returns their names.
func makeFiles(t *testing.T, dir string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%04d", i)
		if err := os.WriteFile(filepath.Join(dir, names[i]), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// getdents reads one small batch of names from the open directory fd (no
// "." or ".."), and reports false at the end of the directory.
func getdents(t *testing.T, fd int) ([]string, bool) {
	t.Helper()
	buf := make([]byte, 512) // a few entries per call: many READDIRs
	n, err := unix.Getdents(fd, buf)
	if err != nil {
		t.Fatalf("getdents: %v", err)
	}
	if n == 0 {
		return nil, false
	}
	_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
	return slices.DeleteFunc(names, func(s string) bool { return s == "." || s == ".." }), true
}

// A program that unlinks what it has read before reading on (rm's
// pattern) sees every entry exactly once: offsets name positions in the
// listing as served, not in the shrinking directory.
func TestReaddirWhileUnlinking(t *testing.T) {
	_, mnt, _ := mount(t)
	dir := mustMkdir(t, filepath.Join(mnt, "d"))
	want := makeFiles(t, dir, 400)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var seen []string
	for {
		names, more := getdents(t, fd)
		if !more {
			break
		}
		for _, name := range names {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatalf("unlink %s (entry read twice?): %v", name, err)
			}
		}
		seen = append(seen, names...)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Fatalf("read %d entries while unlinking, want each of %d once", len(seen), len(want))
	}
	if err := os.Remove(dir); err != nil {
		t.Fatalf("rmdir after unlinking every entry read: %v", err)
	}
}

// telldir/seekdir: returning to a position yields the same entries again;
// rewinding to 0 sees what was created since.
func TestReaddirSeek(t *testing.T) {
	_, mnt, _ := mount(t)
	dir := mustMkdir(t, filepath.Join(mnt, "d"))
	makeFiles(t, dir, 300)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	first, _ := getdents(t, fd)
	pos, err := unix.Seek(fd, 0, 1) // telldir
	if err != nil {
		t.Fatal(err)
	}
	readRest := func() []string {
		var rest []string
		for {
			names, more := getdents(t, fd)
			if !more {
				return rest
			}
			rest = append(rest, names...)
		}
	}
	rest := readRest()
	if got := len(first) + len(rest); got != 300 {
		t.Fatalf("listed %d entries, want 300", got)
	}
	if _, err := unix.Seek(fd, pos, 0); err != nil {
		t.Fatal(err)
	}
	if again := readRest(); !slices.Equal(again, rest) {
		t.Fatalf("after seekdir back: %d entries, want the same %d as before", len(again), len(rest))
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	if all := readRest(); !slices.Contains(all, "new") || len(all) != 301 {
		t.Fatalf("after rewinddir: %d entries (new listed: %v), want 301 with it", len(all), slices.Contains(all, "new"))
	}
}

// An unchanged directory is listed from the kernel's cache: a second
// listing costs no READDIR; a change through the mount voids the cache.
func TestReaddirCached(t *testing.T) {
	_, mnt, fsys := mount(t)
	dir := mustMkdir(t, filepath.Join(mnt, "d"))
	makeFiles(t, dir, 50)
	list := func() []os.DirEntry {
		t.Helper()
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return des
	}
	if n := len(list()); n != 50 {
		t.Fatalf("listed %d, want 50", n)
	}
	before := fsys.Stats().Readdirs
	if before == 0 {
		t.Fatal("the first listing sent no READDIR")
	}
	if n := len(list()); n != 50 {
		t.Fatalf("listed %d again, want 50", n)
	}
	if got := fsys.Stats().Readdirs; got != before {
		t.Errorf("a second listing of an unchanged directory sent %d READDIRs, want 0 (kernel cache)", got-before)
	}
	if err := os.Remove(filepath.Join(dir, "f0007")); err != nil {
		t.Fatal(err)
	}
	des := list()
	if len(des) != 49 || slices.ContainsFunc(des, func(d os.DirEntry) bool { return d.Name() == "f0007" }) {
		t.Fatalf("after unlink: %d entries, want 49 without f0007", len(des))
	}
	if fsys.Stats().Readdirs == before {
		t.Error("the listing after an unlink came from a stale cache")
	}
}
