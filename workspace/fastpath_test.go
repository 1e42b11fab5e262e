package workspace_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/workspace"
)

// TestUnchangedAt: the push's read-only fast path says "nothing changed"
// for a workspace pushed past the racy window without writing a byte of
// the store file, and declines (false, no error: the full import decides)
// where it cannot tell: no store path, no store file, not a regular file,
// not a store.
func TestUnchangedAt(t *testing.T) {
	ctx := context.Background()
	workspace.SetRacyWindow(t, 100*time.Millisecond)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	write(t, filepath.Join(ws, "a/f.txt"), []byte("f"), 0o644)
	opts := workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}

	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", filepath.Join(dir, "missing.db"), dir, junk} {
		if st, ok, err := workspace.UnchangedAt(ctx, path, opts); ok || err != nil || st.Files != 0 {
			t.Errorf("UnchangedAt(%q) = %+v, %v, %v; want false, no error", path, st, ok, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Errorf("UnchangedAt created the missing store: %v", err)
	}

	db, path := openDB(t)
	push(t, db, ws)
	time.Sleep(150 * time.Millisecond) // past the racy window
	push(t, db, ws)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := workspace.UnchangedAt(ctx, path, opts)
	if err != nil || !ok || !st.NothingChanged || st.Files != 1 {
		t.Fatalf("UnchangedAt after a settled push = %+v, %v, %v; want nothing changed, 1 file", st, ok, err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("UnchangedAt wrote to the store file")
	}

	write(t, filepath.Join(ws, "a/new.txt"), []byte("n"), 0o644)
	if _, ok, err := workspace.UnchangedAt(ctx, path, opts); ok || err != nil {
		t.Fatalf("UnchangedAt with a new file = %v, %v; want false, no error", ok, err)
	}
}
