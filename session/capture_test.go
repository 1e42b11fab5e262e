package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/journal"
)

// A capture of a workspace unchanged since the last one writes nothing to
// the store (it is proved read-only before any op is begun), and one
// after a change still takes it.
func TestCaptureUnchangedWritesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // out of the racy window
	for i := range 5 {
		p := filepath.Join(ws, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(ws, old, old); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "ws.db")
	db, err := journal.Open(ctx, store, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first, err := Capture(ctx, db, ws, "main", "capture workspace", nil, nil)
	if err != nil || !first.First || first.NothingChanged {
		t.Fatalf("first capture: %+v, %v", first, err)
	}
	wal := func() os.FileInfo {
		fi, err := os.Stat(store + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	before := wal()
	again, err := Capture(ctx, db, ws, "main", "capture workspace", nil, nil)
	if err != nil || !again.NothingChanged || again.Snapshot.ID != first.Snapshot.ID {
		t.Fatalf("second capture: %+v, %v (first's snapshot %s)", again, err, first.Snapshot.ID)
	}
	if after := wal(); after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("an unchanged capture wrote to the store: WAL %d bytes at %v, then %d at %v",
			before.Size(), before.ModTime(), after.Size(), after.ModTime())
	}

	p := filepath.Join(ws, "f1")
	if err := os.WriteFile(p, []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	changed, err := Capture(ctx, db, ws, "main", "capture workspace", nil, nil)
	if err != nil || changed.NothingChanged || changed.Snapshot.ID == first.Snapshot.ID {
		t.Fatalf("capture after a change: %+v, %v", changed, err)
	}
}
