package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// TestCaptureOfAnotherDirectoryKeepsAgentWork pins the loss of an agent's
// work when the branch was pulled into a second host directory of the
// same name (a second checkout) and the first one was captured again:
// the records then described the second directory, so everything the
// first lacked - the agent's new file among it - was taken for a host
// deletion and silently removed from the branch.
func TestCaptureOfAnotherDirectoryKeepsAgentWork(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	root := t.TempDir()
	a, b := filepath.Join(root, "a", "ws"), filepath.Join(root, "b", "ws")
	old := time.Now().Add(-time.Hour) // older than the racy window: cached
	for _, f := range []string{"f", "host-deleted", "agent-edited"} {
		write(t, filepath.Join(a, f), []byte("v1 "+f), 0o644)
		os.Chtimes(filepath.Join(a, f), old, old)
	}
	capture(t, db, a)
	agent(t, db, "main", func(tx *journal.Tx) error {
		d, err := tx.Resolve([]byte("ws"))
		if err != nil {
			return err
		}
		if err := setContent(ctx, tx, "ws/agent-edited", "agent edit"); err != nil {
			return err
		}
		m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("agent"))
		if err != nil {
			return err
		}
		_, err = tx.Create(d.Ino, []byte("agent-new"), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: m, Size: 5})
		return err
	})
	// Pull the branch into b, a new directory named ws, as art pull does.
	pullInto(t, db, "main", b)

	// a has neither the agent's file nor (now) host-deleted: only the
	// records of b say what a had, so neither is a deletion on a's host.
	if err := os.Remove(filepath.Join(a, "host-deleted")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(a, "host-new"), []byte("host"), 0o644)
	stats, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: a, Capture: true})
	if err != nil {
		t.Fatal(err)
	}
	// Without records of a, a path whose content differs on the two
	// sides is one both changed: the host's version, named (the agent's
	// stays in history), as for any capture.
	if stats.Conflicts != 1 || len(stats.ConflictList) != 1 || stats.ConflictList[0].Path != "/ws/agent-edited" ||
		!strings.Contains(stats.ConflictList[0].Why, "another directory") {
		t.Errorf("conflicts %d %+v, want /ws/agent-edited named", stats.Conflicts, stats.ConflictList)
	}
	if !stats.OtherDir || !stats.First {
		t.Errorf("stats OtherDir=%v First=%v, want both (the records were b's)", stats.OtherDir, stats.First)
	}
	for p, want := range map[string]string{
		"ws/agent-new":    "agent",
		"ws/agent-edited": "v1 agent-edited",
		"ws/f":            "v1 f",
		"ws/host-new":     "host",
		"ws/host-deleted": "v1 host-deleted",
	} {
		if got := readStore(t, db, "main", p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}

	// The records now describe a: its next deletion is one.
	if err := os.Remove(filepath.Join(a, "host-new")); err != nil {
		t.Fatal(err)
	}
	stats, err = workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: a, Capture: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.OtherDir || stats.First {
		t.Errorf("second capture of a: OtherDir=%v First=%v, want neither", stats.OtherDir, stats.First)
	}
	if got := readStore(t, db, "main", "ws/host-new"); got != "<none>" {
		t.Errorf("ws/host-new = %q after a removed it, want it gone", got)
	}
	if got := readStore(t, db, "main", "ws/agent-new"); got != "agent" {
		t.Errorf("ws/agent-new = %q, want the agent's file kept", got)
	}
}
