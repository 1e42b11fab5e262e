package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// TestPullLeavesUnchangedFilesAlone: a pull of a branch into the host
// workspace it was captured from touches only what the branch changed;
// every other file keeps its inode, ctime and mtime, so the host's git
// index stays valid for it (docs/architecture.md, "Stat fidelity").
func TestPullLeavesUnchangedFilesAlone(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	for i := 0; i < 12; i++ {
		write(t, filepath.Join(ws, fmt.Sprintf("d%d", i%3), fmt.Sprintf("f%d", i)), []byte(strings.Repeat("x", i+1)), 0o644)
	}
	if err := os.Symlink("d0/f0", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UnixNano() // outside the racy-clean window
	filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error {
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{unix.NsecToTimespec(old), unix.NsecToTimespec(old)}, unix.AT_SYMLINK_NOFOLLOW)
	})
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
	stats := func() map[string]unix.Stat_t {
		out := map[string]unix.Stat_t{}
		filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error {
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			out[p[len(ws):]] = st
			return nil
		})
		return out
	}
	before := stats()
	// The agent's work: one file changed.
	if _, err := db.Do(ctx, "main", "test", "agent edits", func(tx *journal.Tx) error {
		n, err := tx.Resolve([]byte("ws/d1/f4"))
		if err != nil {
			return err
		}
		m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("edited"))
		if err != nil {
			return err
		}
		_, err = tx.Write(n.Ino, m, 6, time.Now().UnixNano(), nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	st, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: ws, State: head})
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != 1 {
		t.Errorf("pull: %+v, want 1 file written", st)
	}
	after := stats()
	for p, b := range before {
		a, ok := after[p]
		if !ok {
			t.Errorf("%s: gone after the pull", p)
			continue
		}
		same := a.Ino == b.Ino && a.Ctim == b.Ctim && a.Mtim == b.Mtim && a.Size == b.Size
		switch {
		case p == "/d1/f4" && same:
			t.Errorf("%s: the changed file is as it was", p)
		case p == "/d1/f4":
		case b.Mode&unix.S_IFMT == unix.S_IFDIR:
			// Git indexes files and symlinks only. A directory keeps its
			// inode; its mtime moves where the pull placed or staged a
			// file (by rename).
			if a.Ino != b.Ino {
				t.Errorf("%s: directory replaced", p)
			}
		case !same:
			t.Errorf("%s: ino %d ctime %v mtime %v, after the pull ino %d ctime %v mtime %v", p, b.Ino, b.Ctim, b.Mtim, a.Ino, a.Ctim, a.Mtim)
		}
	}
}
