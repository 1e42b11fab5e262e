package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// TestPullThenCaptureKeepsBranch pins the bug where pulling an older
// state to the host and then starting a session made the capture take the
// pulled files as host edits and write them over the branch's newer work.
func TestPullThenCaptureKeepsBranch(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"a.txt", "b.txt"} {
		writeFile(t, filepath.Join(ws, f), "v1 "+f+"\n")
		os.Chtimes(filepath.Join(ws, f), old, old)
	}
	if _, errs, code := artStdin(t, "", "push", "-m", ws, "-d", db, "-q"); code != 0 {
		t.Fatalf("push: %s", errs)
	}
	// The agent's session: a.txt edited, b.txt deleted.
	store, err := journal.Open(ctx, db, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Do(ctx, "main", "test", "agent", func(tx *journal.Tx) error {
		n, err := tx.Resolve([]byte("ws/a.txt"))
		if err != nil {
			return err
		}
		m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("agent\n"))
		if err != nil {
			return err
		}
		if _, err := tx.Write(n.Ino, m, 6, time.Now().UnixNano(), nil); err != nil {
			return err
		}
		d, err := tx.Resolve([]byte("ws"))
		if err != nil {
			return err
		}
		return tx.Unlink(d.Ino, []byte("b.txt"))
	})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, code := artStdin(t, "", "snapshot", "-d", db); code != 0 {
		t.Fatalf("snapshot: %s", errs)
	}
	// The session's result on the host, as a user would look at it...
	if _, errs, code := artStdin(t, "", "pull", "-m", ws, "-d", db, "-q"); code != 0 {
		t.Fatalf("pull: %s", errs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "agent\n" {
		t.Fatalf("pulled a.txt = %q", b)
	}
	// ...then the state before it...
	if _, errs, code := artStdin(t, "", "pull", "-m", ws, "-d", db, "--at", "main~1", "-q"); code != 0 {
		t.Fatalf("pull: %s", errs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "v1 a.txt\n" {
		t.Fatalf("pulled a.txt = %q", b)
	}
	// ...then start the next session: its capture must keep the branch.
	store, err = journal.Open(ctx, db, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var warn bytes.Buffer
	if _, err := workspace.Import(ctx, store, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	out, errs, code := artStdin(t, "", "cat", "-d", db, "main:ws/a.txt")
	if code != 0 || out != "agent\n" {
		t.Errorf("after pull and capture, main:ws/a.txt = %q (%s), want the agent's %q", out, errs, "agent\n")
	}
	if _, _, code := artStdin(t, "", "cat", "-d", db, "main:ws/b.txt"); code == 0 {
		t.Errorf("after pull and capture, the agent's deletion of b.txt was undone")
	}
	if warn.Len() > 0 {
		t.Errorf("capture after a pull warned: %s", warn.String())
	}
}

// TestPullThenRacyHostEditIsCaptured: a file the user edits right after a
// pull, keeping its size and mtime, is a host edit to the next capture
// (the pull's record of it is racy, so it is compared by content; its
// ctime differs too where the filesystem's timestamps are fine enough).
func TestPullThenRacyHostEditIsCaptured(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	writeFile(t, filepath.Join(ws, "a.txt"), "v1\n")
	if _, errs, code := artStdin(t, "", "push", "-m", ws, "-d", db, "-q"); code != 0 {
		t.Fatalf("push: %s", errs)
	}
	// The pull goes to a new directory of the name. The old one is moved
	// aside, not removed: a new directory could get its freed inode
	// number, which the pull would take for the captured directory, whose
	// a.txt the host then deleted - a refusal (1 run in 8 at load).
	if err := os.Rename(ws, ws+".old"); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := artStdin(t, "", "pull", "-m", ws, "-d", db, "-q"); code != 0 {
		t.Fatalf("pull: %s", errs)
	}
	p := filepath.Join(ws, "a.txt")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	store, err := journal.Open(ctx, db, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := workspace.Import(ctx, store, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := artStdin(t, "", "cat", "-d", db, "main:ws/a.txt"); code != 0 || out != "v2\n" {
		t.Errorf("main:ws/a.txt = %q (%s), want the host's edit", out, errs)
	}
}
