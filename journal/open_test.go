package journal_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/migrations"
)

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	path := db.Path()
	db.Close()
	raw := rawSQL(t, path)
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name, applied_ns) VALUES (?, 'future', 0)`, migrations.Latest()+1); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := journal.Open(ctx, path, journal.Options{}); !errors.Is(err, migrations.ErrTooNew) {
		t.Fatalf("Open of a newer store: %v, want migrations.ErrTooNew", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.art")
	if _, err := journal.Open(ctx, path, journal.Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open without Create of a missing store: %v, want fs.ErrNotExist", err)
	}
	if _, err := journal.Open(ctx, dir, journal.Options{Create: true}); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
	if _, err := journal.Open(ctx, path, journal.Options{Create: true, Durability: "sometimes"}); err == nil {
		t.Fatal("Open with a bad durability succeeded")
	}
	db, err := journal.Open(ctx, path, journal.Options{Create: true, Durability: journal.DurabilityFull})
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "a", 1) })
	root := headRoot(t, db, "main")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Reopening keeps the history and creates no second main.
	db, err = journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := headRoot(t, db, "main"); got != root {
		t.Fatalf("head after reopen = %s, want %s", got.Short(), root.Short())
	}
	bs, err := db.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Name != "main" || bs[0].EventCount != 2 {
		t.Fatalf("branches = %+v, want main with 2 events", bs)
	}
}
