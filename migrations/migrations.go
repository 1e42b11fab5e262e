// Package migrations holds art's store schema as embedded, numbered SQL files
// and applies them.
//
// Files are named NNNN_description.sql and are append-only: a released file is
// never edited, a change is a new file. Each file is applied in its own
// BEGIN IMMEDIATE transaction together with the row that records it in
// schema_migrations, so a crash leaves the store at a whole version. A store
// whose recorded version is newer than the highest embedded file was written
// by a newer art and is refused (ErrTooNew) rather than misread.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/artrt/art/internal/errclass"
)

//go:embed *.sql
var files embed.FS

// ErrTooNew reports a store written by a newer version of art.
var ErrTooNew = errclass.New(errclass.Unavailable, "store schema is newer than this art binary")

// Migration is one embedded schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations in version order. It panics on a
// malformed file name: that is a build defect, caught by the package tests.
func All() []Migration { return slices.Clone(all()) }

// all reads the embedded files once: every store open asks for Latest
// and Apply's list, and reading them (~70 KB copied out of the binary)
// cost each art process about as much as the queries around it.
var all = sync.OnceValue(func() []Migration {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(rest, ".sql") {
			panic(fmt.Sprintf("migrations: bad file name %q (want NNNN_name.sql)", name))
		}
		b, err := files.ReadFile(name)
		if err != nil {
			panic(err)
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms
})

// Latest is the highest version this binary knows.
func Latest() int {
	ms := all()
	return ms[len(ms)-1].Version
}

// Version reports the store's recorded schema version (0 for an empty file).
func Version(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_migrations'`).Scan(&n)
	if err != nil || n == 0 {
		return 0, err
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// Apply brings db up to Latest. db must begin transactions with BEGIN
// IMMEDIATE (go-sqlite3's _txlock=immediate), so two processes opening a new
// store at once serialize; each re-checks the version inside its transaction.
// It returns the versions before and after.
//
// Two connections turning a brand-new file to WAL at once can deadlock on
// the lock upgrade, and SQLite then answers SQLITE_BUSY at once instead of
// waiting (its busy handler is skipped when waiting could not help): Apply
// retries that, briefly.
func Apply(ctx context.Context, db *sql.DB, now func() time.Time) (from, to int, err error) {
	return ApplyTo(ctx, db, Latest(), now)
}

// ApplyTo is Apply up to version target rather than Latest: how a reader
// of foreign stores learns the exact schema each version has (by applying
// the steps to a scratch database) instead of keeping a second copy of it.
func ApplyTo(ctx context.Context, db *sql.DB, target int, now func() time.Time) (from, to int, err error) {
	for wait := 5 * time.Millisecond; ; wait *= 2 {
		from, to, err = apply(ctx, db, target, now)
		if err == nil || !isBusy(err) || wait > time.Second {
			return from, to, err
		}
		select {
		case <-ctx.Done():
			return from, to, err
		case <-time.After(wait):
		}
	}
}

// isBusy reports SQLITE_BUSY, by its fixed message (sqlite3_errstr(5)):
// this package does not import the driver.
func isBusy(err error) bool { return strings.Contains(err.Error(), "database is locked") }

func apply(ctx context.Context, db *sql.DB, target int, now func() time.Time) (from, to int, err error) {
	from, err = Version(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	latest := Latest()
	if from > latest {
		return from, from, fmt.Errorf("%w: store is at version %d, this binary knows up to %d; upgrade art", ErrTooNew, from, latest)
	}
	if from == target {
		return from, from, nil // the usual open: nothing to apply, no second read
	}
	for _, m := range all() {
		if m.Version <= from || m.Version > target {
			continue
		}
		if err := applyOne(ctx, db, m, now); err != nil {
			return from, 0, err
		}
	}
	to, err = Version(ctx, db)
	return from, to, err
}

func applyOne(ctx context.Context, db *sql.DB, m Migration, now func() time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %04d: begin: %w", m.Version, err)
	}
	defer tx.Rollback()
	// This text, like every file's, ends up in each store's sqlite_schema,
	// which journal compares verbatim with what these steps make: never
	// edit it, even its whitespace, or every existing store is refused.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ns INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migration %04d: %w", m.Version, err)
	}
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&done); err != nil {
		return fmt.Errorf("migration %04d: %w", m.Version, err)
	}
	if done > 0 { // another process applied it while we waited for the lock
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_ns) VALUES (?, ?, ?)`,
		m.Version, m.Name, now().UnixNano()); err != nil {
		return fmt.Errorf("migration %04d: record: %w", m.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %04d: commit: %w", m.Version, err)
	}
	return nil
}
