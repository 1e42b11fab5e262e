package workspace_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// TestCaptureLoopKeepsBothSides is issue 13's loop, the way a script runs
// sessions back to back: every round the user edits keep.txt on the host
// right before the capture (inside the racy window), and the agent then
// deletes a file, renames a file and renames a directory in the branch.
// Over 20 rounds no agent delete or rename may be undone and no host edit
// dropped.
func TestCaptureLoopKeepsBothSides(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "keep.txt"), []byte("host 0"), 0o644)
	for i := 0; i < 20; i++ {
		write(t, filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte("f"), 0o644)
		write(t, filepath.Join(ws, fmt.Sprintf("d%d", i), "a.go"), []byte("a"), 0o644)
	}
	// push -m first, as art push would, then the rounds: capture, agent.
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 20; round++ {
		host := fmt.Sprintf("host %d", round+1)
		write(t, filepath.Join(ws, "keep.txt"), []byte(host), 0o644)
		var warn bytes.Buffer
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, Warn: &warn}); err != nil {
			t.Fatal(err)
		}
		if got := readStore(t, db, "main", "ws/keep.txt"); got != host {
			t.Fatalf("round %d: ws/keep.txt = %q after the capture, want the host's %q (warnings: %q)", round, got, host, warn.String())
		}
		for j := 0; j < round; j++ {
			for _, p := range []string{fmt.Sprintf("ws/f%d.txt", j), fmt.Sprintf("ws/d%d/a.go", j)} {
				if got := readStore(t, db, "main", p); got != "<none>" {
					t.Fatalf("round %d: %s the agent renamed in round %d is back: %q (warnings: %q)", round, p, j, got, warn.String())
				}
			}
			for p, want := range map[string]string{fmt.Sprintf("ws/g%d.txt", j): "f", fmt.Sprintf("ws/e%d/a.go", j): "a"} {
				if got := readStore(t, db, "main", p); got != want {
					t.Fatalf("round %d: %s = %q, want %q (the agent's rename in round %d)", round, p, got, want, j)
				}
			}
		}
		agent(t, db, "main", func(tx *journal.Tx) error {
			d, err := tx.Resolve([]byte("ws"))
			if err != nil {
				return err
			}
			if err := tx.Rename(d.Ino, []byte(fmt.Sprintf("f%d.txt", round)), d.Ino, []byte(fmt.Sprintf("g%d.txt", round)), 0); err != nil {
				return err
			}
			return tx.Rename(d.Ino, []byte(fmt.Sprintf("d%d", round)), d.Ino, []byte(fmt.Sprintf("e%d", round)), 0)
		})
	}
}
