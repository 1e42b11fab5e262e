package workspace_test

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

// readStore returns the content of store path p on branch, or "<none>".
func readStore(t *testing.T, db *journal.DB, branch, p string) string {
	t.Helper()
	ctx := context.Background()
	var out string
	_, err := db.Do(ctx, branch, "test", "read", func(tx *journal.Tx) error {
		n, err := tx.Resolve([]byte(p))
		if err != nil {
			out = "<none>"
			return nil
		}
		var b bytes.Buffer
		if _, err := tx.Objects().ReadFile(ctx, n.Content, &b); err != nil {
			return err
		}
		out = b.String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// agent changes the branch the way a sandboxed session would.
func agent(t *testing.T, db *journal.DB, branch string, fn func(tx *journal.Tx) error) {
	t.Helper()
	if _, err := db.Do(context.Background(), branch, "test", "agent", fn); err != nil {
		t.Fatal(err)
	}
}

// pullInto writes branch's head into host directory dir and records it,
// as art pull -m does.
func pullInto(t *testing.T, db *journal.DB, branch, dir string) {
	t.Helper()
	ctx := context.Background()
	st, err := db.Resolve(ctx, branch, branch)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]journal.StatCache{}
	began := time.Now()
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dir, State: st,
		Written: func(p string, sc journal.StatCache) { written[p] = sc }}); err != nil {
		t.Fatal(err)
	}
	agent(t, db, branch, func(tx *journal.Tx) error { return workspace.RecordPulled(tx, dir, written, began) })
}

func setContent(ctx context.Context, tx *journal.Tx, p, data string) error {
	n, err := tx.Resolve([]byte(p))
	if err != nil {
		return err
	}
	m, _, err := tx.Objects().PutFile(ctx, strings.NewReader(data))
	if err != nil {
		return err
	}
	_, err = tx.Write(n.Ino, m, int64(len(data)), time.Now().UnixNano(), nil)
	return err
}

// TestCaptureKeepsAgentWork pins the bug where every art run's capture of
// the host workspace undid the previous session's changes: capture mode
// brings in only host changes since the last import.
func TestCaptureKeepsAgentWork(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	old := time.Now().Add(-time.Hour) // older than the racy-clean window: cached
	for _, f := range []string{"edited-by-agent", "deleted-by-agent", "edited-by-host", "deleted-by-host", "edited-by-both", "untouched"} {
		write(t, filepath.Join(ws, f), []byte("v1 "+f), 0o644)
		os.Chtimes(filepath.Join(ws, f), old, old)
	}
	write(t, filepath.Join(ws, "dir-deleted-by-agent", "x"), []byte("x"), 0o644)
	os.Chtimes(filepath.Join(ws, "dir-deleted-by-agent", "x"), old, old)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	agent(t, db, "main", func(tx *journal.Tx) error {
		for _, f := range []string{"edited-by-agent", "edited-by-both"} {
			if err := setContent(ctx, tx, "ws/"+f, "agent "+f); err != nil {
				return err
			}
		}
		d, _ := tx.Resolve([]byte("ws"))
		if err := tx.Unlink(d.Ino, []byte("deleted-by-agent")); err != nil {
			return err
		}
		sub, _ := tx.Resolve([]byte("ws/dir-deleted-by-agent"))
		if err := tx.Unlink(sub.Ino, []byte("x")); err != nil {
			return err
		}
		if err := tx.Rmdir(d.Ino, []byte("dir-deleted-by-agent")); err != nil {
			return err
		}
		m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("agent new"))
		if err != nil {
			return err
		}
		_, err = tx.Create(d.Ino, []byte("created-by-agent"), journal.Attr{Kind: 1, Mode: 0o644, Content: m, Size: 9})
		return err
	})
	write(t, filepath.Join(ws, "edited-by-host"), []byte("host edit"), 0o644)
	write(t, filepath.Join(ws, "edited-by-both"), []byte("host edit both"), 0o644)
	write(t, filepath.Join(ws, "created-by-host"), []byte("host new"), 0o644)
	os.Remove(filepath.Join(ws, "deleted-by-host"))

	var warn bytes.Buffer
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"ws/edited-by-agent":        "agent edited-by-agent",
		"ws/deleted-by-agent":       "<none>",
		"ws/created-by-agent":       "agent new",
		"ws/dir-deleted-by-agent/x": "<none>",
		"ws/edited-by-host":         "host edit",
		"ws/deleted-by-host":        "<none>",
		"ws/created-by-host":        "host new",
		"ws/edited-by-both":         "host edit both",
		"ws/untouched":              "v1 untouched",
	} {
		if got := readStore(t, db, "main", p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if !strings.Contains(warn.String(), "edited-by-both") {
		t.Errorf("no warning about the file both sides changed: %q", warn.String())
	}

	// A plain push still makes the store equal to the host.
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
	if got := readStore(t, db, "main", "ws/created-by-agent"); got != "<none>" {
		t.Errorf("push -m kept a file the host does not have: %q", got)
	}
}
