package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// readVerbs are the verbs that only read a store, each with what its
// output must hold for the store sharedStore makes.
var readVerbs = []struct {
	args []string
	want string
}{
	{[]string{"log"}, "push"},
	{[]string{"status"}, "branch main"},
	{[]string{"branch"}, "main"},
	{[]string{"ls", "main:ws"}, "ws/main.py"},
	{[]string{"cat", "main:ws/main.py"}, "print('hello')"},
	{[]string{"diff", "main~1", "main"}, "ws/second.txt"},
	{[]string{"blame", "ws/main.py"}, "create"},
	{[]string{"du"}, "main"},
	{[]string{"verify"}, "ok"},
}

// sharedStore makes a store with two snapshots in a fresh directory that
// everyone can traverse, owned by root: the store 0644 in a 0755
// directory, as a team's shared store is.
func sharedStore(t *testing.T) (dir, db string) {
	t.Helper()
	base := t.TempDir()
	ws := populate(t, base)
	dir = filepath.Join(base, "shared")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(dir, "team.db")
	mustRun(t, "push", "-q", "-m", ws, "-d", db)
	writeFile(t, filepath.Join(ws, "second.txt"), "two\n")
	mustRun(t, "push", "-q", "-m", ws, "-d", db)
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, db
}

// listDir names the entries of dir with their sizes, to show nothing was
// created or changed there.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d %s", e.Name(), fi.Size(), fi.ModTime()))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestReadVerbsOnStoreUserCannotWrite (issue 28, case 6): as a user who
// can read a root-owned store but not write it or its directory, every
// read verb works - on a store closed cleanly (no -wal/-shm: read
// immutable) and on one a writer has open (-wal/-shm there, the -shm not
// writable) - and writes nothing; a write verb says in one line that the
// store is read-only; a pull from it into the user's own store works.
func TestReadVerbsOnStoreUserCannotWrite(t *testing.T) {
	bin, home := nobodyArt(t)
	dir, db := sharedStore(t)
	nobody := func(args ...string) runOut {
		cmd := asNobody(exec.Command(bin, args...))
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+filepath.Join(home, "run"))
		return exe(t, cmd)
	}
	for _, open := range []string{"closed", "open by a writer"} {
		if open == "open by a writer" {
			w, err := journal.Open(context.Background(), db, journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.AddRemote(context.Background(), "writer", "/nowhere.db"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(db + "-shm"); err != nil {
				t.Fatalf("the writer has no -shm: %v", err)
			}
		} else if _, err := os.Stat(db + "-wal"); err == nil {
			t.Fatal("a -wal after the pushes closed")
		}
		before := listDir(t, dir)
		for _, v := range readVerbs {
			r := nobody(append(v.args, "-d", db)...)
			if r.code != 0 || !strings.Contains(r.stdout, v.want) {
				t.Errorf("%s, store %s: art %s: exit %d\nstdout: %s\nstderr: %s", open, open, strings.Join(v.args, " "), r.code, r.stdout, r.stderr)
			}
		}
		r := nobody("snapshot", "-d", db)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "store is read-only") {
			t.Errorf("%s: art snapshot: exit %d, stderr %q; want 1 and one line saying the store is read-only", open, r.code, r.stderr)
		}
		mine := filepath.Join(home, open+".db")
		if r := nobody("pull", "-d", mine, db); r.code != 0 {
			t.Errorf("%s: art pull -d MINE %s: exit %d\n%s", open, db, r.code, r.stderr)
		} else if r := nobody("cat", "-d", mine, "main:ws/second.txt"); r.stdout != "two\n" {
			t.Errorf("%s: the pulled store: %q %s", open, r.stdout, r.stderr)
		}
		if after := listDir(t, dir); after != before {
			t.Errorf("%s: the store's directory changed:\n%s\nwant\n%s", open, after, before)
		}
	}
}

// TestReadVerbsOnReadOnlyFileSystem: a store on a file system mounted
// read-only is read by every read verb; a write verb says the store is
// read-only.
func TestReadVerbsOnReadOnlyFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a file system")
	}
	_, db := sharedStore(t)
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(mnt, "team.db")
	if err := os.WriteFile(ro, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	for _, v := range readVerbs {
		r := artRun(t, append(v.args, "-d", ro)...)
		if r.code != 0 || !strings.Contains(r.stdout, v.want) {
			t.Errorf("art %s on a read-only file system: exit %d\nstdout: %s\nstderr: %s", strings.Join(v.args, " "), r.code, r.stdout, r.stderr)
		}
	}
	r := artRun(t, "checkout", "-d", ro, "main~1")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "store is read-only") {
		t.Errorf("art checkout on a read-only file system: exit %d, stderr %q", r.code, r.stderr)
	}
	if got, err := os.ReadFile(ro); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the store changed (%v)", err)
	}
}

// TestReadVerbNeverCreatesStore: a read verb on a missing, empty or
// non-SQLite file, or on a store an older art wrote, fails in one line and
// leaves the file as it was (issue 28, case 6: art log -d empty-file made
// it a store).
func TestReadVerbNeverCreatesStore(t *testing.T) {
	dir := t.TempDir()
	old, err := os.ReadFile(filepath.Join("..", "..", "journal", "testdata", "store-v5.art"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		content []byte // nil: no file
		code    int
		want    string
	}{
		{"missing", nil, 3, "does not exist"},
		{"empty", []byte{}, 3, "not an art store: the file is empty"},
		{"text", []byte("not a store\n"), 4, "not an art store: not an SQLite database"},
		{"old schema", old, 1, "run a write verb on it once to upgrade it"},
	} {
		path := filepath.Join(dir, tc.name+".db")
		if tc.content != nil {
			if err := os.WriteFile(path, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range readVerbs {
			r := artRun(t, append(v.args, "-d", path)...)
			if r.code != tc.code || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s: art %s: exit %d, stderr %q; want %d and %q", tc.name, strings.Join(v.args, " "), r.code, r.stderr, tc.code, tc.want)
			}
		}
		got, err := os.ReadFile(path)
		if tc.content == nil {
			if err == nil {
				t.Errorf("%s: a read verb created the store", tc.name)
			}
		} else if err != nil || !bytes.Equal(got, tc.content) {
			t.Errorf("%s: the file changed: %d bytes (%v), want %d", tc.name, len(got), err, len(tc.content))
		}
		for _, sfx := range []string{"-wal", "-shm", ".packs"} {
			if _, err := os.Lstat(path + sfx); err == nil {
				t.Errorf("%s: a read verb left %s", tc.name, filepath.Base(path+sfx))
			}
		}
	}
}
