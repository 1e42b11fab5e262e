package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/migrations"
	_ "github.com/mattn/go-sqlite3"
)

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_txlock=immediate&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func clock() time.Time { return time.Unix(1700000000, 0) }

func TestAllFileNames(t *testing.T) {
	ms := migrations.All()
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
	name := regexp.MustCompile(`^[a-z0-9_]+$`)
	for i, m := range ms {
		if got, want := m.Version, i+1; got != want {
			t.Errorf("migration %d has version %d: versions must run 1, 2, 3... without gaps", i, got)
		}
		if !name.MatchString(m.Name) {
			t.Errorf("migration %04d name %q: want lower-case letters, digits and _", m.Version, m.Name)
		}
		if strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %04d_%s is empty", m.Version, m.Name)
		}
	}
	if got, want := migrations.Latest(), ms[len(ms)-1].Version; got != want {
		t.Fatalf("Latest() = %d, want %d", got, want)
	}
}

func TestApplyFresh(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	if v, err := migrations.Version(ctx, db); err != nil || v != 0 {
		t.Fatalf("version of an empty file = %d, %v; want 0", v, err)
	}
	from, to, err := migrations.Apply(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	if from != 0 || to != migrations.Latest() {
		t.Fatalf("Apply = %d -> %d, want 0 -> %d", from, to, migrations.Latest())
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if got, want := n, len(migrations.All()); got != want {
		t.Fatalf("schema_migrations has %d rows, want %d", got, want)
	}
	var applied int64
	if err := db.QueryRow(`SELECT applied_ns FROM schema_migrations WHERE version = 1`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if got, want := applied, clock().UnixNano(); got != want {
		t.Fatalf("applied_ns = %d, want the injected clock's %d", got, want)
	}
	for _, table := range []string{"objects", "branches", "ops", "events", "snapshots", "nodes", "dentries", "link_groups"} {
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s missing after Apply (%v)", table, err)
		}
	}
}

func TestApplyTwiceIsNoop(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	if _, _, err := migrations.Apply(ctx, db, clock); err != nil {
		t.Fatal(err)
	}
	schema := func() string {
		rows, err := db.Query(`SELECT coalesce(sql, '') FROM sqlite_master ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			b.WriteString(s + "\n")
		}
		return b.String()
	}
	before := schema()
	from, to, err := migrations.Apply(ctx, db, func() time.Time { return time.Unix(1800000000, 0) })
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if from != migrations.Latest() || to != migrations.Latest() {
		t.Fatalf("second Apply = %d -> %d, want %d -> %d", from, to, migrations.Latest(), migrations.Latest())
	}
	if schema() != before {
		t.Fatal("second Apply changed the schema")
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM schema_migrations WHERE applied_ns != ?`, clock().UnixNano()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("second Apply recorded %d new rows (%v)", n, err)
	}
}

func TestApplyRefusesNewerStore(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	if _, _, err := migrations.Apply(ctx, db, clock); err != nil {
		t.Fatal(err)
	}
	next := migrations.Latest() + 1
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_ns) VALUES (?, 'from_the_future', 0)`, next); err != nil {
		t.Fatal(err)
	}
	from, _, err := migrations.Apply(ctx, db, clock)
	if !errors.Is(err, migrations.ErrTooNew) {
		t.Fatalf("Apply on a version %d store: %v, want ErrTooNew", next, err)
	}
	if from != next {
		t.Fatalf("Apply reported version %d, want %d", from, next)
	}
}

// Two connections applying at once (as two processes opening a new store
// would) both succeed and the schema is applied once.
func TestApplyConcurrent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_txlock=immediate&_busy_timeout=10000")
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			_, _, err = migrations.Apply(ctx, db, clock)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Apply: %v", err)
		}
	}
	check, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var n int
	if err := check.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if got, want := n, len(migrations.All()); got != want {
		t.Fatalf("schema_migrations has %d rows, want %d", got, want)
	}
}
