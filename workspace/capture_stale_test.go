package workspace_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// TestCaptureStaleStatCacheKeepsAgentEdit pins what the remount stress
// test (issue 20) found: an import that reads a file inside the racy
// window records no stat cache for it but leaves the one an earlier
// import recorded for an older version. The next capture then sees a
// host stat that differs from that stale record, takes the unchanged
// host file for a host edit, and replaces the agent's edit with it
// ("changed on the host and in the branch since the last capture").
func TestCaptureStaleStatCacheKeepsAgentEdit(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	f := filepath.Join(ws, "f")
	write(t, f, []byte("v1"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(f, old, old)
	for _, capture := range []bool{false, true} {
		// v1 is cached; the host then writes v2, racy, and it is imported
		// (push -m, or a capture) without a cache entry of its own.
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
			t.Fatal(err)
		}
		write(t, f, []byte("v2"), 0o644)
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: capture}); err != nil {
			t.Fatal(err)
		}
		if got := readStore(t, db, "main", "ws/f"); got != "v2" {
			t.Fatalf("capture=%v: ws/f = %q after the host's edit, want v2", capture, got)
		}
		// The agent edits it; the host leaves it alone.
		agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/f", "agent") })
		var warn bytes.Buffer
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, Warn: &warn}); err != nil {
			t.Fatal(err)
		}
		if got := readStore(t, db, "main", "ws/f"); got != "agent" {
			t.Errorf("capture=%v: the capture after the agent's edit made ws/f %q, want the agent's (warnings: %q)", capture, got, warn.String())
		}
		write(t, f, []byte("v1"), 0o644)
		os.Chtimes(f, old, old)
	}
}

// TestCaptureKeepsAgentDeletionOfRacyFiles pins the other capture case
// the remount stress test (issue 20) found, in the issue's own steps: a
// workspace made seconds before its push (every file inside the racy
// window, so no stat cache), the agent deletes a directory and a file,
// and the capture before the next session brings both back from the
// host, which never changed them: with no cache entry under it, a host
// directory the branch lacks looks new.
func TestCaptureKeepsAgentDeletionOfRacyFiles(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "src", "a.txt"), []byte("a"), 0o644)
	write(t, filepath.Join(ws, "gone.txt"), []byte("g"), 0o644)
	write(t, filepath.Join(ws, "kept.txt"), []byte("k"), 0o644)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
	agent(t, db, "main", func(tx *journal.Tx) error {
		d, err := tx.Resolve([]byte("ws"))
		if err != nil {
			return err
		}
		src, err := tx.Resolve([]byte("ws/src"))
		if err != nil {
			return err
		}
		if err := tx.Unlink(src.Ino, []byte("a.txt")); err != nil {
			return err
		}
		if err := tx.Rmdir(d.Ino, []byte("src")); err != nil {
			return err
		}
		return tx.Unlink(d.Ino, []byte("gone.txt"))
	})
	var warn bytes.Buffer
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"ws/src/a.txt": "<none>", "ws/gone.txt": "<none>", "ws/kept.txt": "k"} {
		if got := readStore(t, db, "main", p); got != want {
			t.Errorf("%s = %q after the capture, want %q (warnings: %q)", p, got, want, warn.String())
		}
	}
	if _, err := db.Do(ctx, "main", "test", "read", func(tx *journal.Tx) error {
		if _, err := tx.Resolve([]byte("ws/src")); err == nil {
			t.Errorf("ws/src is back after the capture")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureOnNewBranchInheritsRecords: a --branch session's branch is
// made from main's head with main's import records (racy ones, and
// directories, included), so its first capture keeps main's deletions
// and the new branch's own, and takes the host's edits.
func TestCaptureOnNewBranchInheritsRecords(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "src", "a.txt"), []byte("a"), 0o644)
	write(t, filepath.Join(ws, "gone.txt"), []byte("g"), 0o644)
	write(t, filepath.Join(ws, "host.txt"), []byte("h1"), 0o644)
	write(t, filepath.Join(ws, "mine.txt"), []byte("m"), 0o644)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	// On main, the agent deletes src/ and gone.txt.
	agent(t, db, "main", func(tx *journal.Tx) error {
		d, err := tx.Resolve([]byte("ws"))
		if err != nil {
			return err
		}
		if err := tx.RemoveAll(d.Ino, []byte("src")); err != nil {
			return err
		}
		return tx.Unlink(d.Ino, []byte("gone.txt"))
	})
	head, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateBranch(ctx, "b", head); err != nil {
		t.Fatal(err)
	}
	if err := db.InheritImportCache(ctx, "b", "main"); err != nil {
		t.Fatal(err)
	}
	// On b, the agent deletes mine.txt; the host edits host.txt.
	agent(t, db, "b", func(tx *journal.Tx) error {
		d, err := tx.Resolve([]byte("ws"))
		if err != nil {
			return err
		}
		return tx.Unlink(d.Ino, []byte("mine.txt"))
	})
	write(t, filepath.Join(ws, "host.txt"), []byte("h2"), 0o644)
	var warn bytes.Buffer
	st, err := workspace.Import(ctx, db, workspace.ImportOptions{Dir: ws, Branch: "b", Capture: true, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"ws/src/a.txt": "<none>", "ws/src": "<none>", "ws/gone.txt": "<none>",
		"ws/mine.txt": "<none>", "ws/host.txt": "h2"} {
		if got := readStore(t, db, "b", p); got != want {
			t.Errorf("b:%s = %q after the capture, want %q (warnings: %q)", p, got, want, warn.String())
		}
	}
	if st.Conflicts != 0 {
		t.Errorf("conflicts %v, want none", st.ConflictList)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{"/ws/a b.go": "/ws/a b.go", "/ws/é": "/ws/é", "/ws/\x1b[2J": `"/ws/\033[2J"`, "/ws/a\nb": `"/ws/a\nb"`} {
		if got := workspace.Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}
