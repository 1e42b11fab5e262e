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

// TestPrimeRefresh: reads of a writable FUSE mount's files and listings
// of its directories drop their attributes from the kernel's cache, so
// the agent's next stat of each asks again; a primed mount stats them
// again once the agent leaves it quiet, and that next stat then costs no
// GETATTR or LOOKUP.
func TestPrimeRefresh(t *testing.T) {
	ws := map[string]string{}
	var files, dirs []string
	for i := range 6 {
		d := fmt.Sprintf("d%d/sub", i)
		dirs = append(dirs, filepath.Dir(d), d)
		for j := range 20 {
			p := fmt.Sprintf("%s/f%02d", d, j)
			ws[p] = "content of " + p
			files = append(files, p)
		}
	}
	s := newLower(t, ws) // the host's files, as a captured repository's
	at := func(p string) string { return filepath.Join(s.mnt, "ws", p) }
	// use reads every file and lists every directory, as git grep and
	// find do (read(2) into the test's memory: no page of the mount is
	// mapped in the daemon's process).
	// The listings come first: one the kernel has not cached is a
	// READDIRPLUS, whose answer holds the entries' attributes again.
	use := func() {
		t.Helper()
		for _, d := range dirs {
			if _, err := os.ReadDir(at(d)); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range files {
			if got := s.read(p); got != ws[p] {
				t.Fatalf("%s = %q", p, got)
			}
		}
	}
	// asks stats every name and reports the round trips it cost.
	asks := func() int64 {
		t.Helper()
		before := s.fsys.Stats()
		for _, p := range append(files, dirs...) {
			var st unix.Stat_t
			if err := unix.Lstat(at(p), &st); err != nil {
				t.Fatal(err)
			}
		}
		after := s.fsys.Stats()
		return after.Lookups - before.Lookups + after.GetAttrs - before.GetAttrs
	}

	asks() // without priming: every name in the kernel's caches
	use()
	if n := asks(); n < int64(len(files)+len(dirs)) {
		t.Fatalf("%d GETATTRs and LOOKUPs for %d names after reads and listings: they no longer drop attributes, the test proves nothing", n, len(files)+len(dirs))
	}
	s.unmount()
	s.prime = true
	s.mount(false)
	overlay.PrimeWait(s.fsys)
	for round := range 2 {
		use()
		overlay.RefreshWait(t, s.fsys)
		if n := asks(); n != 0 {
			rounds, stated := overlay.Refreshed(s.fsys)
			t.Fatalf("use %d: %d GETATTRs and LOOKUPs for %d names read and listed before the mount was quiet, want 0 (%d refresh rounds made %d stats)", round, n, len(files)+len(dirs), rounds, stated)
		}
	}
	if rounds, _ := overlay.Refreshed(s.fsys); rounds < 2 {
		t.Fatalf("%d refresh rounds, want one after each use at least", rounds)
	}
	// An unmount stops a round wherever it is (its open directory would
	// fail the unmount) and waits for it: while it waits for a quiet
	// mount, while it stats, while it rests.
	for i := range 6 {
		use()
		time.Sleep(time.Duration(i) * 40 * time.Millisecond)
		s.remount()
		overlay.PrimeWait(s.fsys)
	}
}
