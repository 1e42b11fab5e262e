package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// unchanged runs workspace.Unchanged on ws. When it says nothing changed,
// a full push must agree: it is run after it, and must find every entry
// unchanged and leave the branch's tree as it was.
func unchanged(t *testing.T, db *journal.DB, ws string) bool {
	t.Helper()
	ctx := context.Background()
	var warn bytes.Buffer
	st, ok, err := workspace.Unchanged(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		if st.Files != 0 || st.NothingChanged || warn.Len() != 0 {
			t.Fatalf("Unchanged said changed, but returned %+v and warned %q", st, warn.String())
		}
		return false
	}
	if !st.NothingChanged {
		t.Fatalf("Unchanged: %+v without NothingChanged", st)
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot.ID != head.Snapshot || st.Snapshot.Root != head.Root {
		t.Fatalf("Unchanged reported snapshot %s (root %s), the head is %s (root %s)",
			st.Snapshot.ID.Short(), st.Snapshot.Root.Short(), head.Snapshot.Short(), head.Root.Short())
	}
	var fullWarn bytes.Buffer
	full, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Warn: &fullWarn})
	if err != nil {
		t.Fatal(err)
	}
	if full.Snapshot.Root != head.Root {
		t.Fatalf("Unchanged said nothing changed, a full push changed the tree (%+v)", full)
	}
	full.Snapshot, st.Snapshot, st.NothingChanged = journal.Snapshot{}, journal.Snapshot{}, false
	if full.New+full.Changed+full.Deleted != 0 || full.BytesRead != 0 || full.Conflicts != 0 {
		t.Fatalf("Unchanged said nothing changed, a full push found %+v", full)
	}
	if st.Files != full.Files || st.Dirs != full.Dirs || st.Symlinks != full.Symlinks ||
		st.Unchanged != full.Unchanged || st.Skipped != full.Skipped {
		t.Fatalf("Unchanged counted %+v, a full push %+v", st, full)
	}
	if warn.String() != fullWarn.String() {
		t.Fatalf("Unchanged warned %q, a full push %q", warn.String(), fullWarn.String())
	}
	return true
}

// TestUnchangedSeesEveryChange: the read-only check behind a no-op push
// -m says "nothing changed" only where a full push changes nothing (the
// helper above checks that with a full push each time it says so). Each
// case is a change on one side that it must see, before the push that
// brings it in; after that push (and a wait past the racy window) the
// workspace is unchanged again. The racy window is shrunk to 100 ms so
// that files are old enough after a short wait.
func TestUnchangedSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	workspace.SetRacyWindow(t, 100*time.Millisecond)
	settle := func() { time.Sleep(150 * time.Millisecond) } // past the window: not a timing test
	setup := func(t *testing.T) (*journal.DB, string) {
		db, _ := openDB(t)
		ws := filepath.Join(t.TempDir(), "ws")
		write(t, filepath.Join(ws, "top.txt"), []byte("top"), 0o644)
		write(t, filepath.Join(ws, "a/f.txt"), []byte("f"), 0o644)
		write(t, filepath.Join(ws, "a/b/g.txt"), []byte("g"), 0o644)
		if err := os.Link(filepath.Join(ws, "a/f.txt"), filepath.Join(ws, "a/b/f-link.txt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("top.txt", filepath.Join(ws, "ln")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		if unchanged(t, db, ws) {
			t.Fatal("a workspace never pushed: unchanged")
		}
		// Just pushed: the files' records are within the racy window of
		// that push, and its mark proves nothing of them. The window is
		// wide for this push, so that a loaded machine that takes long to
		// get here cannot carry the files out of it; narrow for the rest.
		workspace.SetRacyWindow(t, time.Minute)
		push(t, db, ws)
		if unchanged(t, db, ws) {
			t.Fatal("right after the first push: unchanged, with files changed within the racy window")
		}
		workspace.SetRacyWindow(t, 100*time.Millisecond)
		settle()
		push(t, db, ws)
		if !unchanged(t, db, ws) {
			t.Fatal("nothing changed since a push, past the racy window: Unchanged said changed")
		}
		return db, ws
	}
	hostXattr := func(p string) func(t *testing.T, db *journal.DB, ws string) {
		return func(t *testing.T, db *journal.DB, ws string) {
			if err := unix.Setxattr(filepath.Join(ws, p), "user.k", []byte("host"), 0); err != nil {
				if errors.Is(err, unix.ENOTSUP) {
					t.Skip("no user xattrs on this file system")
				}
				t.Fatal(err)
			}
		}
	}
	writeKeepTimes := func(p, data string) func(t *testing.T, db *journal.DB, ws string) {
		return func(t *testing.T, db *journal.DB, ws string) {
			fi, err := os.Stat(filepath.Join(ws, p))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(ws, p), []byte(data), fi.Mode().Perm())
			if err := os.Chtimes(filepath.Join(ws, p), fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T, db *journal.DB, ws string)
	}{
		{"host edits a file, same size and mtime", writeKeepTimes("a/b/g.txt", "G")},
		{"host appends to a file", func(t *testing.T, db *journal.DB, ws string) {
			write(t, filepath.Join(ws, "a/b/g.txt"), []byte("g+"), 0o644)
		}},
		{"host replaces a file by another inode, same size and mtime", func(t *testing.T, db *journal.DB, ws string) {
			fi, err := os.Stat(filepath.Join(ws, "top.txt"))
			if err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(ws, "a/tmp")
			write(t, tmp, []byte("TOP"), 0o644)
			if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(ws, "top.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"host sets a file's mtime", func(t *testing.T, db *journal.DB, ws string) {
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(ws, "a/f.txt"), old, old); err != nil {
				t.Fatal(err)
			}
		}},
		{"host chmods a file", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Chmod(filepath.Join(ws, "a/b/g.txt"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"host chmods a directory", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Chmod(filepath.Join(ws, "a/b"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"host chmods the workspace directory", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Chmod(ws, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"host sets a file's xattr", hostXattr("a/f.txt")},
		{"host sets a directory's xattr", hostXattr("a/b")},
		{"host sets the workspace directory's xattr", hostXattr(".")},
		{"host adds a file", func(t *testing.T, db *journal.DB, ws string) {
			write(t, filepath.Join(ws, "a/b/new.txt"), []byte("new"), 0o644)
		}},
		{"host adds an empty directory", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Mkdir(filepath.Join(ws, "empty/sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"host adds a fifo (skipped with a warning)", func(t *testing.T, db *journal.DB, ws string) {
			if err := syscall.Mkfifo(filepath.Join(ws, "a/fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"host removes a file", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Remove(filepath.Join(ws, "a/b/g.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"host removes a hard link", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Remove(filepath.Join(ws, "a/b/f-link.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"host removes an empty directory", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Remove(filepath.Join(ws, "empty")); err != nil {
				t.Fatal(err)
			}
		}},
		{"host renames a file", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Rename(filepath.Join(ws, "a/b/g.txt"), filepath.Join(ws, "a/b/h.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"host points a symlink elsewhere", func(t *testing.T, db *journal.DB, ws string) {
			if err := os.Remove(filepath.Join(ws, "ln")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a/f.txt", filepath.Join(ws, "ln")); err != nil {
				t.Fatal(err)
			}
		}},
		{"branch edits a file and snapshots", func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				if err := setContent(ctx, tx, "ws/a/b/g.txt", "branch"); err != nil {
					return err
				}
				_, err := tx.Snapshot("agent")
				return err
			})
		}},
		{"branch edits a file, no snapshot", func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/top.txt", "branch") })
		}},
		{"branch chmods the workspace directory and snapshots", func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				n, err := tx.Resolve([]byte("ws"))
				if err != nil {
					return err
				}
				if _, err := tx.SetAttr(n.Ino, journal.SetMode, journal.Attr{Mode: 0o700}); err != nil {
					return err
				}
				_, err = tx.Snapshot("agent")
				return err
			})
		}},
		{"branch sets the workspace directory's xattr and snapshots", func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				n, err := tx.Resolve([]byte("ws"))
				if err != nil {
					return err
				}
				if _, err := tx.SetAttr(n.Ino, journal.SetXattrs, journal.Attr{Xattrs: []cas.Xattr{{Name: "user.k", Value: []byte("branch")}}}); err != nil {
					return err
				}
				_, err = tx.Snapshot("agent")
				return err
			})
		}},
		{"branch adds a file outside the workspace, no snapshot", func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				_, err := tx.Create(journal.RootIno, []byte("elsewhere"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
				return err
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, ws := setup(t)
			c.change(t, db, ws)
			if unchanged(t, db, ws) {
				t.Fatal("the change was not seen")
			}
			settle()
			push(t, db, ws)
			if !unchanged(t, db, ws) {
				t.Fatal("nothing changed since the push that took the change: Unchanged said changed")
			}
		})
	}
	t.Run("store inside the workspace", func(t *testing.T) {
		ws := filepath.Join(t.TempDir(), "ws")
		write(t, filepath.Join(ws, "f.txt"), []byte("f"), 0o644)
		db, err := journal.Open(ctx, filepath.Join(ws, "art.db"), journal.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		settle()
		push(t, db, ws)
		settle()
		push(t, db, ws)
		// The store's files (just written: their ctimes are recent) are
		// not the workspace's: they do not make it changed.
		if !unchanged(t, db, ws) {
			t.Fatal("nothing changed but the store's own files: Unchanged said changed")
		}
		write(t, filepath.Join(ws, "f.txt"), []byte("F"), 0o644)
		if unchanged(t, db, ws) {
			t.Fatal("the edit was not seen")
		}
	})
	t.Run("options that need the full import", func(t *testing.T) {
		db, ws := setup(t)
		for _, o := range []workspace.ImportOptions{
			{Branch: "main", Dir: ws, Message: "m"}, {Branch: "main", Dir: ws, Entries: &strings.Builder{}},
		} {
			if _, ok, err := workspace.Unchanged(ctx, db, o); err != nil || ok {
				t.Errorf("Unchanged(%+v) = %v, %v; want false", o, ok, err)
			}
		}
	})
}

// TestUnchangedRacyByContent: a capture moments after the host's edits
// leaves racy records, which a stat cannot prove unchanged; with
// RacyByContent (the warm daemon's reuse check) Unchanged reads such a
// file and takes it as unchanged only if its content is the recorded one,
// and a record of other content, or a stat that moved, is still a change.
func TestUnchangedRacyByContent(t *testing.T) {
	ctx := context.Background()
	workspace.SetRacyWindow(t, time.Hour) // every record of this test is racy
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "a.txt"), []byte("alpha"), 0o644)
	write(t, filepath.Join(ws, "d/b.txt"), bytes.Repeat([]byte("b"), 100<<10), 0o644)
	if err := os.Symlink("a.txt", filepath.Join(ws, "ln")); err != nil {
		t.Fatal(err)
	}
	capture := func() {
		t.Helper()
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, SkipUnchanged: true}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(byContent bool) bool {
		t.Helper()
		_, ok, err := workspace.Unchanged(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, SkipUnchanged: true, RacyByContent: byContent})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	capture()
	if check(false) {
		t.Fatal("racy records, without RacyByContent: unchanged")
	}
	if !check(true) {
		t.Fatal("racy records of unchanged files, with RacyByContent: changed")
	}
	// As a capture decides: it changes nothing in the branch's tree.
	before, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	capture()
	if after, err := db.Resolve(ctx, "main", "main"); err != nil || after.Root != before.Root {
		t.Fatalf("Unchanged with RacyByContent said unchanged, a capture changed the tree (%v)", err)
	}
	// The record's content is what is compared: a record naming other
	// content (same stat) is a change; the same record rewritten is not.
	name, err := workspace.Name(ws)
	if err != nil {
		t.Fatal(err)
	}
	setManifest := func(p string, other bool) {
		t.Helper()
		if _, err := db.Do(ctx, "main", "test", "record", func(tx *journal.Tx) error {
			c, ok, err := tx.ImportRecord("/" + name + p)
			if err != nil || !ok || !c.Racy {
				return fmt.Errorf("record of %s: %+v %v %v", p, c, ok, err)
			}
			if other {
				c.Manifest = cas.Sum([]byte("not the content"))
			}
			return tx.SetStatCache("/"+name+p, c)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/d/b.txt", "/ln"} {
		setManifest(p, false)
		if !check(true) {
			t.Fatalf("%s's record rewritten as it was: changed", p)
		}
		setManifest(p, true)
		if check(true) {
			t.Fatalf("%s's record names other content: unchanged", p)
		}
		capture() // brings the record back to the host's content
		if !check(true) {
			t.Fatalf("after a capture of %s: changed", p)
		}
	}
	// An edit of the same size moves the ctime: changed, without a read.
	write(t, filepath.Join(ws, "a.txt"), []byte("alphb"), 0o644)
	if check(true) {
		t.Fatal("a.txt edited: unchanged")
	}
	capture()
	if !check(true) {
		t.Fatal("after the capture of the edit: changed")
	}
	// Past the bound on what one check reads, racy records are a change
	// (the caller captures).
	for i := range 300 {
		write(t, filepath.Join(ws, "many", fmt.Sprintf("f%d", i)), []byte("x"), 0o644)
	}
	capture()
	if check(true) {
		t.Fatal("300 racy files (more than one check reads): unchanged")
	}
}
