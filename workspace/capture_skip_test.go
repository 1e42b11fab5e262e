package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// settledWorkspace makes a workspace whose files all have mtimes an hour
// old (so that their import records are trusted, not racy) and pushes it.
func settledWorkspace(t *testing.T) (*journal.DB, string) {
	t.Helper()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	for p, data := range map[string]string{
		"top.txt": "top", "a/b/other.txt": "other", "a/b/c/deep.txt": "deep1", "d/x.txt": "old1",
	} {
		write(t, filepath.Join(ws, p), []byte(data), 0o644)
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(ws, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := workspace.Import(context.Background(), db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
	return db, ws
}

func capture(t *testing.T, db *journal.DB, ws string) {
	t.Helper()
	if _, err := workspace.Import(context.Background(), db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureSkipsListingOnlyWhenNothingChanged: a capture does not read
// the branch's listing of a directory whose host entries its records all
// prove unchanged (and looks up the branch's directories below only when
// something there changed). Each case is a host change that such a skip
// must not miss, in a directory whose parents are skipped.
func TestCaptureSkipsListingOnlyWhenNothingChanged(t *testing.T) {
	ctx := context.Background()
	t.Run("deleted file, nothing else changed", func(t *testing.T) {
		db, ws := settledWorkspace(t)
		if err := os.Remove(filepath.Join(ws, "a/b/other.txt")); err != nil {
			t.Fatal(err)
		}
		capture(t, db, ws)
		if got := readStore(t, db, "main", "ws/a/b/other.txt"); got != "<none>" {
			t.Errorf("ws/a/b/other.txt = %q after the host deleted it", got)
		}
	})
	t.Run("edit below skipped directories", func(t *testing.T) {
		db, ws := settledWorkspace(t)
		write(t, filepath.Join(ws, "a/b/c/deep.txt"), []byte("deep2 longer"), 0o644)
		capture(t, db, ws)
		if got := readStore(t, db, "main", "ws/a/b/c/deep.txt"); got != "deep2 longer" {
			t.Errorf("ws/a/b/c/deep.txt = %q, want the host's edit", got)
		}
	})
	t.Run("replaced by a rename with the same size and mtime", func(t *testing.T) {
		db, ws := settledWorkspace(t)
		p := filepath.Join(ws, "a/b/c/deep.txt")
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(ws, "a/b/c/.tmp")
		write(t, tmp, []byte("deep2"), 0o644)
		if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		capture(t, db, ws)
		if got := readStore(t, db, "main", "ws/a/b/c/deep.txt"); got != "deep2" {
			t.Errorf("ws/a/b/c/deep.txt = %q, want the renamed file's deep2", got)
		}
	})
	t.Run("xattr set", func(t *testing.T) {
		db, ws := settledWorkspace(t)
		if err := unix.Setxattr(filepath.Join(ws, "d/x.txt"), "user.test", []byte("v"), 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) {
				t.Skip("no user xattrs on this file system")
			}
			t.Fatal(err)
		}
		capture(t, db, ws)
		if got := storeXattrs(t, db, "ws/d/x.txt"); got != "user.test=v" {
			t.Errorf("ws/d/x.txt xattrs = %q after the host set user.test", got)
		}
	})
	// A stat taken within the timestamp granularity of a write proves
	// nothing: a same-size write in the same tick leaves it equal. The
	// record of such a stat is racy and the file is compared by content.
	// The case is made by recording the host's present stat with another
	// content (what the host had when the stat was taken); the control
	// without the racy flag shows that the stat alone would have hidden
	// the change.
	for _, racy := range []bool{true, false} {
		t.Run("equal stat, racy="+map[bool]string{true: "yes", false: "no (control)"}[racy], func(t *testing.T) {
			db, ws := settledWorkspace(t)
			hp := filepath.Join(ws, "d/x.txt")
			write(t, hp, []byte("new1"), 0o644)
			var st unix.Stat_t
			if err := unix.Lstat(hp, &st); err != nil {
				t.Fatal(err)
			}
			agent(t, db, "main", func(tx *journal.Tx) error {
				if err := setContent(ctx, tx, "ws/d/x.txt", "old1"); err != nil {
					return err
				}
				m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("old1"))
				if err != nil {
					return err
				}
				return tx.SetStatCache("/ws/d/x.txt", journal.StatCache{Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(),
					Ino: st.Ino, Manifest: m, Kind: cas.EntryFile, Mode: 0o644, Racy: racy})
			})
			capture(t, db, ws)
			want := "new1"
			if !racy {
				want = "old1"
			}
			if got := readStore(t, db, "main", "ws/d/x.txt"); got != want {
				t.Errorf("ws/d/x.txt = %q, want %q", got, want)
			}
		})
	}
}

// storeXattrs returns a branch node's xattrs as "name=value" lines.
func storeXattrs(t *testing.T, db *journal.DB, p string) string {
	t.Helper()
	var out []string
	_, err := db.Do(context.Background(), "main", "test", "read", func(tx *journal.Tx) error {
		n, err := tx.Resolve([]byte(p))
		if err != nil {
			return err
		}
		for _, x := range n.Xattrs {
			out = append(out, x.Name+"="+string(x.Value))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestPushSkipsOnlyWhatTheMarkProves: a push -m after a push -m that left
// the branch equal to the host (and a branch untouched since) skips the
// branch's listing and the host's xattrs of entries whose ctime is from
// before that push. Each case is a change on one side that the skip must
// not miss. The racy window is shrunk to 100 ms, so that the files are
// old enough after a short wait.
func TestPushSkipsOnlyWhatTheMarkProves(t *testing.T) {
	ctx := context.Background()
	workspace.SetRacyWindow(t, 100*time.Millisecond)
	settle := func() { time.Sleep(150 * time.Millisecond) } // past the window: not a timing test
	setup := func(t *testing.T) (*journal.DB, string) {
		db, _ := openDB(t)
		ws := filepath.Join(t.TempDir(), "ws")
		write(t, filepath.Join(ws, "top.txt"), []byte("top"), 0o644)
		write(t, filepath.Join(ws, "a/f.txt"), []byte("f"), 0o644)
		write(t, filepath.Join(ws, "a/b/g.txt"), []byte("g"), 0o644)
		for range 2 { // the second push finds the first's mark, and skips
			settle()
			push(t, db, ws)
		}
		return db, ws
	}
	xattrCase := func(name, p string, set func(t *testing.T, db *journal.DB, ws string), want string) {
		t.Run(name, func(t *testing.T) {
			db, ws := setup(t)
			set(t, db, ws)
			push(t, db, ws)
			if got := storeXattrs(t, db, p); got != want {
				t.Errorf("%s xattrs = %q, want %q", p, got, want)
			}
		})
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
	xattrCase("host sets a file's xattr", "ws/a/f.txt", hostXattr("a/f.txt"), "user.k=host")
	// A directory's record holds no stat: its ctime alone tells.
	xattrCase("host sets a directory's xattr", "ws/a/b", hostXattr("a/b"), "user.k=host")
	xattrCase("branch sets a file's xattr", "ws/a/b/g.txt", func(t *testing.T, db *journal.DB, ws string) {
		agent(t, db, "main", func(tx *journal.Tx) error {
			n, err := tx.Resolve([]byte("ws/a/b/g.txt"))
			if err != nil {
				return err
			}
			if _, err = tx.SetAttr(n.Ino, journal.SetXattrs, journal.Attr{Xattrs: []cas.Xattr{{Name: "user.k", Value: []byte("branch")}}}); err != nil {
				return err
			}
			// A snapshot, as at the end of a session: the branch's tree is
			// current again, and another than the mark's.
			_, err = tx.Snapshot("agent")
			return err
		})
	}, "")
	t.Run("host sets a directory's mtime", func(t *testing.T) {
		db, ws := setup(t)
		old := time.Now().Add(-time.Hour).Truncate(time.Second)
		if err := os.Chtimes(filepath.Join(ws, "a/b"), old, old); err != nil {
			t.Fatal(err)
		}
		push(t, db, ws)
		if got := storeNode(t, db, "ws/a/b").MTime; got != old.UnixNano() {
			t.Errorf("ws/a/b mtime = %d, want the host's %d", got, old.UnixNano())
		}
	})
	t.Run("branch edits and adds files", func(t *testing.T) {
		db, ws := setup(t)
		agent(t, db, "main", func(tx *journal.Tx) error {
			if err := setContent(ctx, tx, "ws/a/b/g.txt", "branch"); err != nil {
				return err
			}
			dir, err := tx.Resolve([]byte("ws/a"))
			if err != nil {
				return err
			}
			m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("new"))
			if err != nil {
				return err
			}
			_, err = tx.Create(dir.Ino, []byte("new.txt"), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: m, Size: 3})
			return err
		})
		push(t, db, ws)
		if got := readStore(t, db, "main", "ws/a/b/g.txt"); got != "g" {
			t.Errorf("ws/a/b/g.txt = %q, want the host's g", got)
		}
		if got := readStore(t, db, "main", "ws/a/new.txt"); got != "<none>" {
			t.Errorf("ws/a/new.txt = %q, want it gone (the host has none)", got)
		}
	})
	t.Run("pull in between", func(t *testing.T) {
		// After a pull the host holds what the pull wrote: the mark of
		// the push before it proves nothing.
		db, ws := setup(t)
		agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/a/b/g.txt", "pulled") })
		pullInto(t, db, "main", ws)
		if got := readStore(t, db, "main", "ws/a/b/g.txt"); got != "pulled" {
			t.Fatalf("ws/a/b/g.txt = %q before the edit", got)
		}
		write(t, filepath.Join(ws, "a/b/g.txt"), []byte("edit"), 0o644)
		push(t, db, ws)
		if got := readStore(t, db, "main", "ws/a/b/g.txt"); got != "edit" {
			t.Errorf("ws/a/b/g.txt = %q, want the host's edit", got)
		}
	})
}

func push(t *testing.T, db *journal.DB, ws string) {
	t.Helper()
	if _, err := workspace.Import(context.Background(), db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
}

func storeNode(t *testing.T, db *journal.DB, p string) journal.Node {
	t.Helper()
	var n journal.Node
	_, err := db.Do(context.Background(), "main", "test", "read", func(tx *journal.Tx) (err error) {
		n, err = tx.Resolve([]byte(p))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
