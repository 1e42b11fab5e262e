package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/migrations"
	_ "github.com/mattn/go-sqlite3" // the store is one SQLite file
)

// DefaultBranch is the branch a new store starts with.
const DefaultBranch = "main"

// Durability selects SQLite's synchronous mode.
type Durability string

const (
	// DurabilityNormal (synchronous=NORMAL) keeps every committed
	// transaction across a process crash; a power loss may drop the last
	// transactions but never corrupts the store (WAL).
	DurabilityNormal Durability = "normal"
	// DurabilityFull (synchronous=FULL) also survives power loss, at the
	// cost of an fsync per commit.
	DurabilityFull Durability = "full"
)

// Options configure Open.
type Options struct {
	// Create makes a new store when path does not exist. Without it a
	// missing store is an error wrapping fs.ErrNotExist.
	Create     bool
	Durability Durability       // default DurabilityNormal
	Clock      func() time.Time // default time.Now; tests inject one
	// BusyTimeout bounds how long a writer waits for another process's
	// write transaction. Default 30s.
	BusyTimeout time.Duration
	// ReadOnly opens an existing store for reading only (the source of a
	// pull): SQLite's read-only mode, no migration, nothing written. Its
	// schema must be that of a version this binary knows. Head of a
	// branch whose live tree has changes not yet encoded fails, as
	// encoding them is a write.
	ReadOnly bool
}

// DB is an open store. It holds one writer connection (every write is a
// BEGIN IMMEDIATE transaction, so concurrent processes queue on SQLite's
// lock instead of failing with SQLITE_BUSY half-way) and a pool of readers.
// A DB is safe for concurrent use.
type DB struct {
	path string
	w    *sql.DB
	r    *sql.DB
	objs *cas.Store // reads through the reader pool
	// packs is the store's pack directory (cas.PacksDir): every commit
	// syncs it first (see commit).
	packs *cas.Packs
	clock func() time.Time
	// readOnly: w is r (see openReadOnly).
	readOnly bool
	// schema is the store's schema version (migrations): the latest
	// unless opened ReadOnly, which migrates nothing.
	schema int
}

// Schema returns the version of the store's schema (see migrations): the
// latest this binary knows, unless the store was opened ReadOnly, which
// reads older versions as they are.
func (db *DB) Schema() int { return db.schema }

// Open opens (or with opts.Create, creates) the store at path and brings its
// schema up to date. A store written by a newer art is refused with
// migrations.ErrTooNew.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Durability == "" {
		opts.Durability = DurabilityNormal
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 30 * time.Second
	}
	sync := "NORMAL"
	switch opts.Durability {
	case DurabilityNormal:
	case DurabilityFull:
		sync = "FULL"
	default:
		return nil, fmt.Errorf("durability %q: want normal or full", opts.Durability)
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && (!opts.Create || opts.ReadOnly):
		return nil, fmt.Errorf("open store %s: %w", path, fs.ErrNotExist)
	case errors.Is(err, fs.ErrNotExist):
		// Create it ourselves so the file is private from the start: it
		// holds every byte the agent wrote.
		if lst, err := os.Lstat(path); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
			// A dangling link: SQLite would create the file at its
			// target, and the store's other files could not be found.
			return nil, fmt.Errorf("create store %s: a symbolic link to a missing file", path)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create store %s: %w", path, err)
		}
		if f != nil {
			f.Close()
		}
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	case st.IsDir():
		return nil, fmt.Errorf("open store %s: is a directory", path)
	case !st.Mode().IsRegular():
		// A FIFO or device would block or feed SQLite endless bytes.
		return nil, fmt.Errorf("open store %s: not a regular file", path)
	}
	// SQLite follows a symbolic link to the database (and keeps its WAL
	// beside the target); the pack directory and the files a sandbox must
	// not see are derived from db.path, so it names the target too: a
	// store opened through a link and through its target is one store.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, path, opts)
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", sync)
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "0")
	q.Set("_txlock", "immediate")
	// Statements are re-prepared on every call through database/sql; the
	// driver-side cache turns that into a lookup (measured 1.4x on
	// re-ingest, 1.6x on reads).
	q.Set("_stmt_cache_size", "64")
	q.Set("_cache_size", "-32768") // 32 MiB of page cache per connection
	w, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "1")
	r, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	packs := cas.OpenPacks(cas.PacksDir(path), false)
	db := &DB{path: path, w: w, r: r, objs: cas.NewPackedStore(r, packs), packs: packs, clock: opts.Clock}
	if err := w.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// Before anything else reads it: the schema must be art's.
	if _, err := checkSchema(ctx, w); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if _, db.schema, err = migrations.Apply(ctx, w, opts.Clock); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := db.ensureDefaultBranch(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.markGeneration(ctx)
	return db, nil
}

// openReadOnly opens an existing store for Options.ReadOnly: one pool of
// read-only connections serves as both reader and "writer" (whose
// transactions are then deferred and fail at their first write).
func openReadOnly(ctx context.Context, path string, opts Options) (*DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "0")
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "1")
	q.Set("_stmt_cache_size", "64")
	q.Set("_cache_size", "-32768")
	r, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	// Read-only: the pack directory is only read, never created.
	packs := cas.OpenPacks(cas.PacksDir(path), true)
	db := &DB{path: path, w: r, r: r, objs: cas.NewPackedStore(r, packs), packs: packs, clock: opts.Clock, readOnly: true}
	v, err := checkSchema(ctx, r)
	if err == nil && v == 0 {
		err = fmt.Errorf("%w: not an art store (no schema)", ErrCorrupt)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.schema = v
	return db, nil
}

// Path is the store file's path.
func (db *DB) Path() string { return db.path }

// Objects returns a read-only view of the object store.
func (db *DB) Objects() *cas.Store { return db.objs }

// PacksDir is the store's pack directory: copying a store means copying
// its file and this directory (which may not exist).
func (db *DB) PacksDir() string { return db.packs.Dir() }

// Close closes both connection pools, then the packs (releasing the pack
// this process wrote, which gc may then compact). It is safe to call
// twice.
func (db *DB) Close() error {
	if !db.readOnly {
		// Bytes of transactions that rolled back (a failed or interrupted
		// push) go back to the file system now rather than at the next
		// gc. Best effort: gc reclaims them otherwise.
		db.TrimPacks(context.Background())
	}
	err1 := db.r.Close()
	var err2 error
	if !db.readOnly {
		err2 = db.w.Close()
	}
	return errors.Join(err1, err2, db.packs.Close())
}

// ensureDefaultBranch gives a new store its main branch, whose chain starts
// with a branch event at the empty tree.
func (db *DB) ensureDefaultBranch(ctx context.Context) error {
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM branches`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		// Re-check under the write lock: another process may have won.
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM branches`).Scan(&n); err != nil || n > 0 {
			return err
		}
		empty, _, err := db.objs.With(tx).PutTree(ctx, &cas.Tree{})
		if err != nil {
			return err
		}
		_, err = db.createBranchTx(ctx, tx, DefaultBranch, State{Root: empty}, "init")
		return err
	})
}

// TrimPacks gives back the bytes at the end of the pack this handle
// appends to that no committed row names (cas.Packs.Trim): what a failed
// or interrupted transaction appended. It returns how many bytes it
// freed. The caller guarantees that nothing else in this process is
// writing through db and every transaction of it is committed or rolled
// back: a CLI verb after its work failed (before it records the failure,
// which needs the space on a full disk), and Close.
//
// It reads and truncates holding the process's one writer connection, so
// no commit of this process can land between the read and the truncate
// even if a caller broke that rule (other processes never name this
// pack); it gives up after trimWait if the connection stays busy.
func (db *DB) TrimPacks(ctx context.Context) (int64, error) {
	if db.readOnly || db.packs.Writing() == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, trimWait)
	defer cancel()
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("trim packs: %w", err)
	}
	defer conn.Close()
	return db.packs.Trim(func(num int64) (int64, error) {
		var end sql.NullInt64
		err := conn.QueryRowContext(ctx, `SELECT max(pack_off + pack_len) FROM objects WHERE pack = ? AND pack != 0`, num).Scan(&end)
		return end.Int64, err
	})
}

// trimWait bounds how long TrimPacks waits for the writer connection.
const trimWait = 5 * time.Second

// writeTx runs fn in one BEGIN IMMEDIATE transaction on the writer.
func (db *DB) writeTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := db.packs.Sync(); err != nil {
		tx.Rollback()
		return fmt.Errorf("commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (db *DB) now() int64 { return db.clock().UnixNano() }
