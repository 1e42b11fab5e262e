package journal_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestCollapsedDirNlink: a directory not loaded yet (after a checkout)
// reports 2 + its subdirectories, as a loaded one does.
func TestCollapsedDirNlink(t *testing.T) {
	ctx := context.Background()
	db, err := journal.Open(ctx, filepath.Join(t.TempDir(), "n.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := journal.Attr{Kind: cas.EntryDir, Mode: 0o755}
	var loaded int
	_, err = db.Do(ctx, "main", "test", "tree", func(tx *journal.Tx) error {
		d, err := tx.Create(journal.RootIno, []byte("d"), dir)
		if err != nil {
			return err
		}
		for _, name := range []string{"a", "b", "c"} {
			if _, err := tx.Create(d.Ino, []byte(name), dir); err != nil {
				return err
			}
		}
		n, err := tx.Lookup(journal.RootIno, []byte("d"))
		loaded = n.Nlink
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if loaded != 5 {
		t.Fatalf("loaded d: nlink %d, want 5", loaded)
	}
	s, err := db.TakeSnapshot(ctx, "main", "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Checkout(ctx, "main", journal.State{BranchID: s.BranchID, Branch: "main", Seq: s.Seq, Root: s.Root, Snapshot: s.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Do(ctx, "main", "test", "look", func(tx *journal.Tx) error {
		n, err := tx.Lookup(journal.RootIno, []byte("d"))
		if err != nil {
			return err
		}
		if n.Nlink != 5 {
			t.Errorf("collapsed d after checkout: nlink %d, want 5", n.Nlink)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
