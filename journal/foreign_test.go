package journal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/migrations"
)

// A store file is anyone's: a schema that differs from the one art's
// migrations make in any way is refused before anything is read from it.
func TestOpenRefusesForeignSchema(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
	}{
		{"objects is a view", `DROP TABLE objects; CREATE VIEW objects AS
			WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r)
			SELECT zeroblob(1000000) AS id, 1 AS kind, 0 AS codec, 0 AS size, x'' AS data FROM r`},
		{"branches is a view", `DROP TABLE branches; CREATE VIEW branches AS SELECT 1 AS id`},
		{"trigger", `CREATE TRIGGER t AFTER INSERT ON objects BEGIN DELETE FROM branches; END`},
		{"extra index", `CREATE INDEX objects_by_size ON objects(size)`},
		{"extra table", `CREATE TABLE evil (x)`},
		{"stat table", `ANALYZE`},
		{"altered column", `ALTER TABLE remotes ADD COLUMN x`},
		{"missing index", `DROP INDEX events_by_op`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "store.art")
			db, err := journal.Open(ctx, path, journal.Options{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			raw := rawSQL(t, path)
			if _, err := raw.Exec(tc.sql); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			for _, ro := range []bool{false, true} {
				start := time.Now()
				db, err := journal.Open(ctx, path, journal.Options{ReadOnly: ro})
				if err == nil {
					db.Close()
					t.Fatalf("read-only %v: opened a store with a foreign schema", ro)
				}
				if !errors.Is(err, journal.ErrCorrupt) {
					t.Fatalf("read-only %v: %v, want ErrCorrupt", ro, err)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("refusing took %v", d)
				}
			}
		})
	}
}

// A newer art's store is still told apart from a hostile one.
func TestOpenTooNewSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw := rawSQL(t, path)
	if _, err := raw.Exec(`CREATE TABLE future (x); INSERT INTO schema_migrations VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err = journal.Open(ctx, path, journal.Options{})
	if !errors.Is(err, migrations.ErrTooNew) {
		t.Fatalf("got %v, want ErrTooNew", err)
	}
}

// No value larger than the largest object crosses into Go, whatever table
// holds it.
func TestOpenBoundsValues(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw := rawSQL(t, path)
	if _, err := raw.Exec(`UPDATE branches SET head_hash = zeroblob(?)`, cas.MaxObjectSize+8<<20); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for _, ro := range []bool{false, true} {
		db, err := journal.Open(ctx, path, journal.Options{ReadOnly: ro})
		if err == nil {
			_, err = db.Branch(ctx, journal.DefaultBranch)
			db.Close()
		}
		if err == nil || !journal.Damaged(err) {
			t.Fatalf("read-only %v: reading a %d-byte head hash: %v, want a damaged store", ro, cas.MaxObjectSize+8<<20, err)
		}
	}
}

// A read-only open writes nothing, not even the WAL switch or a default
// branch, and refuses writes.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	want := headRoot(t, db, journal.DefaultBranch)
	db.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := journal.Open(ctx, path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := headRoot(t, ro, journal.DefaultBranch); got != want {
		t.Fatalf("head %s, want %s", got.Short(), want.Short())
	}
	if _, err := ro.CreateBranch(ctx, "x", journal.State{Root: want}); err == nil {
		t.Fatal("a read-only store took a write")
	}
	// A live tree not yet encoded is refused, not encoded into the file.
	rw, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, rw, journal.DefaultBranch, func(tx *journal.Tx) error { return writeFile(tx, "f", "x", 1) })
	rw.Close()
	before, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Head(ctx, journal.DefaultBranch); err == nil || !strings.Contains(err.Error(), "not yet snapshotted") {
		t.Fatalf("head of a dirty branch, read-only: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("a read-only open changed the store file")
	}
	if _, err := journal.Open(ctx, filepath.Join(t.TempDir(), "none"), journal.Options{ReadOnly: true, Create: true}); err == nil {
		t.Fatal("a read-only open created a store")
	}
}

// A projection whose dentries lead back to an ancestor (as a hostile store
// can hold) is corrupt, not a stack overflow.
func TestProjectionCycleIsCorrupt(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	mustDo(t, db, journal.DefaultBranch, func(tx *journal.Tx) error { return mkdirAll(tx, "a/b/c") })
	headRoot(t, db, journal.DefaultBranch)
	mustDo(t, db, journal.DefaultBranch, func(tx *journal.Tx) error { return writeFile(tx, "a/b/c/f", "x", 1) })
	raw := rawSQL(t, db.Path())
	// c's child "loop" is a: a -> b -> c -> a.
	var a, c int64
	if err := raw.QueryRow(`SELECT ino FROM dentries WHERE name = CAST('a' AS BLOB)`).Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT ino FROM dentries WHERE name = CAST('c' AS BLOB)`).Scan(&c); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO dentries (branch, parent, name, ino) SELECT branch, ?, CAST('loop' AS BLOB), ? FROM dentries WHERE ino = ?`, c, a, c); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE nodes SET parent = ? WHERE ino = ?`, c, a); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err := db.Head(ctx, journal.DefaultBranch)
	if !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") {
		t.Fatalf("head of a cyclic projection: %v, want ErrCorrupt naming the cycle", err)
	}
}
