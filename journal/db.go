package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/walvfs"
	"github.com/artrt/art/migrations"
	"github.com/mattn/go-sqlite3" // the store is one SQLite file
	"golang.org/x/sys/unix"
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
	// Read opens an existing store for a read verb (log, status, cat,
	// ls, diff, blame, du, verify): nothing of the file is created,
	// migrated or converted. A file that is empty or not an SQLite
	// database is ErrNotStore. A store this process cannot write (its
	// file or directory not writable, a read-only file system), in
	// rollback-journal mode, or at an older schema is opened ReadOnly;
	// one it can write is opened as usual - minus the migration, the
	// default branch and the gc mark - so that reading a live branch's
	// head can still encode its changed directories into tree objects.
	Read bool
	// LockDir is where branch locks live (default LockDir()).
	LockDir string
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
	// full: opened read-only because the disk is full (openReadOnly);
	// writes fail with ENOSPC.
	full bool
	// warmed is closed once the reader pool's first connection, opened
	// in the background by Open (warmReader), is in the pool; nil when
	// none was.
	warmed chan struct{}
	// syncEach: DurabilityFull, every commit (and redo record) reaches
	// the disk before it is acknowledged.
	syncEach bool
	// recovered is what Open replayed from redo logs (redo.go).
	recovered RedoRecovery
	// redoHeld counts this process's redo logs that hold records not yet
	// committed (or were left for recovery): TrimPacks keeps its bytes.
	redoHeld atomic.Int32
	// redoStuck is set when a Batch of this process lost its transaction
	// and could not apply its redo log again (Batch.loseLocked): the
	// branch takes no more events from this process (openTx), so that the
	// next open can still apply the log.
	redoStuck atomic.Pointer[redoStuck]
	// redoLeft maps the branches of redo logs this process's recovery
	// could not apply (the store busy or full) to the log's name: no
	// event of this process goes to them before a recovery does (BeginOp
	// tries again).
	redoLeft   sync.Map
	recovering atomic.Bool // recoverRedo runs: writeTx does not retry it
	// syncFault, set by tests, runs before every pack sync of a commit;
	// its error fails that commit as a failed fdatasync would.
	syncFault func() error

	// Branch locks (lock.go): their directory, and the ones this DB
	// holds, by branch.
	lockDir string
	lockMu  sync.Mutex
	held    map[string]*BranchLock
}

// Schema returns the version of the store's schema (see migrations): the
// latest this binary knows, unless the store was opened ReadOnly, which
// reads older versions as they are.
func (db *DB) Schema() int { return db.schema }

// Open opens (or with opts.Create, creates) the store at path and brings its
// schema up to date. A store written by a newer art is refused with
// migrations.ErrTooNew.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	sync, err := opts.fill()
	if err != nil {
		return nil, err
	}
	if err := storeFile(path, opts); err != nil {
		return nil, err
	}
	// SQLite follows a symbolic link to the database (and keeps its WAL
	// beside the target); the pack directory and the files a sandbox must
	// not see are derived from db.path, so it names the target too: a
	// store opened through a link and through its target is one store.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if opts.Read || opts.ReadOnly {
		// Before SQLite sees it: SQLite would take an empty file for a
		// new database, and a rollback-journal one would be switched to
		// WAL by a writable open.
		wal, err := sniffStore(path)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		if opts.ReadOnly || !wal || !canWrite(path) {
			db, err := openReadOnly(ctx, path, opts, false)
			if err == nil && opts.Read && db.schema < migrations.Latest() {
				db.Close()
				return nil, fmt.Errorf("open store %s: %w", path, oldSchema(db.schema))
			}
			return db, err
		}
	} else if !canWrite(path) {
		return nil, fmt.Errorf("open store %s: %w", path, ErrReadOnly)
	}
	db, err := openPools(path, opts, sync)
	if err != nil {
		return nil, err
	}
	w := db.w
	// A store already in WAL mode (any store art has written) can have
	// its first reader connection opened while the writer's opens:
	// SQLite's open of a connection (the file, the -shm index, the
	// pragmas, the schema parsed at its first statement) is about a
	// millisecond of every run's start that would otherwise come after
	// the writer's, at the first read. A file not yet in WAL mode waits
	// for the writer to convert it (two connections converting a new
	// file at once can deadlock on the lock upgrade).
	if wal, _ := sniffStore(path); wal {
		db.warmReader(ctx)
	}
	err = w.PingContext(ctx)
	if err == nil && db.warmed == nil {
		db.warmReader(ctx)
	}
	var v int
	if err == nil {
		// Before anything else reads it: the schema must be art's.
		v, err = checkSchema(ctx, w)
	}
	if err != nil {
		db.Close()
		if diskFull(err) {
			// SQLite could not grow the -shm file it needs to open the
			// store for writing: on a full disk the store can still be
			// read, and a write says why it cannot be done.
			return openReadOnly(ctx, path, opts, true)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if opts.Read {
		if v < migrations.Latest() {
			// A read never migrates, and this binary's reads need the
			// latest schema (packed objects, forgotten ranges).
			db.Close()
			return nil, fmt.Errorf("open store %s: %w", path, oldSchema(v))
		}
		db.schema = v
		db.recoverAtOpen(ctx)
		return db, nil
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
	db.recoverAtOpen(ctx)
	return db, nil
}

// recoverAtOpen applies the redo logs of crashed writers (redo.go). Its
// failures do not fail the open: a log it could not apply is set aside
// and named in Recovered, the rest is left for the next open.
func (db *DB) recoverAtOpen(ctx context.Context) {
	if err := db.recoverRedo(ctx); err != nil {
		db.recovered.Failed = append(db.recovered.Failed, err.Error())
	}
}

// warmReader opens the reader pool's first connection on another
// goroutine and leaves it idle in the pool, where the first read finds
// it. The pool's limits are left alone: a read that comes before the
// warm-up is over opens a connection of its own, which costs what the
// warm-up saves, no more (holding the pool to one connection meanwhile
// deadlocked a read transaction that read through the pool inside it
// while the warm-up waited behind it). Nothing is read through it before
// the writer has checked the schema (Open): the warm-up runs only
// SQLite's open and the pragmas, as the writer's own connection does
// before checkSchema. Close waits for it.
func (db *DB) warmReader(ctx context.Context) {
	done := make(chan struct{})
	db.warmed = done
	go func() {
		defer close(done)
		if c, err := db.r.Conn(context.WithoutCancel(ctx)); err == nil {
			c.Close() // to the pool, idle
		}
		// An error is left to the read that meets it again.
	}()
}

// fill sets opts' defaults and returns its durability as SQLite's
// synchronous mode.
func (opts *Options) fill() (string, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Durability == "" {
		opts.Durability = DurabilityNormal
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 30 * time.Second
	}
	if opts.LockDir == "" {
		opts.LockDir = LockDir()
	}
	switch opts.Durability {
	case DurabilityNormal:
		return "NORMAL", nil
	case DurabilityFull:
		return "FULL", nil
	}
	return "", fmt.Errorf("durability %q: want normal or full", opts.Durability)
}

// storeFile checks what is at path before SQLite sees it: a regular file,
// or nothing, which it creates private (with opts.Create, not ReadOnly).
func storeFile(path string, opts Options) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && (!opts.Create || opts.ReadOnly):
		return fmt.Errorf("open store %s: %w", path, fs.ErrNotExist)
	case errors.Is(err, fs.ErrNotExist):
		// Create it ourselves so the file is private from the start: it
		// holds every byte the agent wrote.
		if lst, err := os.Lstat(path); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
			// A dangling link: SQLite would create the file at its
			// target, and the store's other files could not be found.
			return fmt.Errorf("create store %s: a symbolic link to a missing file", path)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create store %s: %w", path, err)
		}
		if f != nil {
			f.Close()
		}
	case err != nil:
		return fmt.Errorf("open store %s: %w", path, err)
	case st.IsDir():
		return fmt.Errorf("open store %s: is a directory", path)
	case !st.Mode().IsRegular():
		// A FIFO or device would block or feed SQLite endless bytes.
		return fmt.Errorf("open store %s: not a regular file", path)
	}
	return nil
}

// openPools opens the writer connection and the reader pool of the store
// at path (a real path, not a link) in SQLite's synchronous mode synchronous.
func openPools(path string, opts Options, synchronous string) (*DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", synchronous)
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "0")
	q.Set("_txlock", "immediate")
	// Statements are re-prepared on every call through database/sql; the
	// driver-side cache turns that into a lookup (measured 1.4x on
	// re-ingest, 1.6x on reads).
	q.Set("_stmt_cache_size", "64")
	q.Set("_cache_size", "-32768") // 32 MiB of page cache per connection
	// The writer writes a commit's WAL frames in one write(2), not a
	// header and a page apart (internal/walvfs: a close's commit is ~13
	// frames, 26 writes without it); the readers write no frames and
	// keep SQLite's own VFS.
	if err := walvfs.Register(); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	q.Set("vfs", walvfs.Name)
	w, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	q.Del("vfs")
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "1")
	r, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r.SetMaxOpenConns(readerConns)
	packs := cas.OpenPacks(cas.PacksDir(path), false)
	db := &DB{path: path, w: w, r: r, objs: cas.NewPackedStore(r, packs), packs: packs, clock: opts.Clock,
		lockDir: opts.LockDir, held: map[string]*BranchLock{}, syncEach: synchronous == "FULL"}
	return db, nil
}

// readerConns and readerIdle bound the reader pool's open and idle
// connections (readerIdle is database/sql's default).
const (
	readerConns = 4
	readerIdle  = 2
)

// openReadOnly opens an existing store for Options.ReadOnly: one pool of
// read-only connections serves as both reader and "writer" (whose
// transactions are then deferred and fail at their first write).
//
// SQLite reads a WAL store read-only (mode=ro) when its -wal and -shm files
// exist (a read-only -shm included), or when it may create them. A store
// whose last connection closed cleanly has neither, and in a directory
// this process cannot write (or on a read-only file system) mode=ro cannot
// start: then, and only when there is no -wal file - so no connection has
// the store open and nothing is waiting in a WAL - it is opened immutable
// (SQLite reads the file with no locks and no WAL). A writer that starts
// meanwhile can make such a read fail; it never changes the store.
//
// full: the disk is full (the caller found so, or the first try does):
// the connections then open the -shm file read-only (SQLite's
// readonly_shm), which never grows it - SQLite reads the WAL into memory
// itself when no writer has the -shm open. Writes fail with ENOSPC
// (DB.full).
func openReadOnly(ctx context.Context, path string, opts Options, full bool) (*DB, error) {
	if full {
		if err := ensureShm(path); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	db, err := openReadOnlyMode(ctx, path, opts, roMode{full: full})
	if err != nil && !full && diskFull(err) {
		return openReadOnly(ctx, path, opts, true)
	}
	if err != nil && cannotStartReadOnly(err) {
		if _, werr := os.Lstat(path + "-wal"); errors.Is(werr, fs.ErrNotExist) {
			db, err = openReadOnlyMode(ctx, path, opts, roMode{immutable: true, full: full})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return db, nil
}

// roMode is how openReadOnlyMode opens: immutable (no locks, no WAL) and
// full (a read-only -shm).
type roMode struct{ immutable, full bool }

func openReadOnlyMode(ctx context.Context, path string, opts Options, m roMode) (*DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	if m.immutable {
		q.Set("immutable", "1")
	}
	if m.full {
		q.Set("readonly_shm", "1")
	}
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "0")
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "1")
	q.Set("_stmt_cache_size", "64")
	q.Set("_cache_size", "-32768")
	r, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(4)
	// Read-only: the pack directory is only read, never created.
	packs := cas.OpenPacks(cas.PacksDir(path), true)
	db := &DB{path: path, w: r, r: r, objs: cas.NewPackedStore(r, packs), packs: packs, clock: opts.Clock, readOnly: true, full: m.full,
		lockDir: opts.LockDir, held: map[string]*BranchLock{}}
	v, err := checkSchema(ctx, r)
	if err == nil && v == 0 {
		err = fmt.Errorf("%w: not an art store (no schema)", ErrCorrupt)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	db.schema = v
	return db, nil
}

// cannotStartReadOnly reports SQLite unable to begin reading a WAL store
// read-only: it could not create the -shm (SQLITE_READONLY_CANTINIT and
// kin, SQLITE_CANTOPEN).
func cannotStartReadOnly(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrReadonly || se.Code == sqlite3.ErrCantOpen)
}

// oldSchema is the error of a read verb on a store an older art wrote.
func oldSchema(v int) error {
	return fmt.Errorf("%w (schema version %d, this art reads %d): run a write verb on it once to upgrade it (art snapshot -d FILE)",
		ErrOldSchema, v, migrations.Latest())
}

// notSQLite is a store file that is not an SQLite database at all: not an
// art store, and - as SQLite would call it (SQLITE_NOTADB) - damaged.
type notSQLite struct{}

func (notSQLite) Error() string        { return ErrNotStore.Error() + ": not an SQLite database" }
func (notSQLite) Is(target error) bool { return target == ErrNotStore || target == ErrCorrupt }

// ErrorClass is ErrCorrupt's, the stronger of the two it matches.
func (notSQLite) ErrorClass() errclass.Class { return errclass.Corrupt }

// canWrite reports whether this process may write the store at path: the
// file, and its directory (SQLite creates the -wal and -shm there), on a
// file system mounted read-write.
func canWrite(path string) bool {
	w := func(p string) bool { return unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS) == nil }
	return w(path) && w(filepath.Dir(path))
}

// sniffStore checks that path holds an SQLite database before SQLite opens
// it, and says whether it is in WAL mode (as art's stores are).
func sniffStore(path string) (wal bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var h [100]byte
	n, err := io.ReadFull(f, h[:])
	switch {
	case n == 0:
		return false, fmt.Errorf("%w: the file is empty", ErrNotStore)
	case err != nil || string(h[:16]) != "SQLite format 3\x00":
		return false, notSQLite{}
	}
	// Bytes 18 and 19: the file format write and read versions, 2 for WAL.
	return h[18] == 2 && h[19] == 2, nil
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
	if db.warmed != nil {
		<-db.warmed
	}
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
	// On the writer, whose connection Open has just opened: the reader's
	// is still opening (warmReader).
	if err := db.w.QueryRowContext(ctx, `SELECT count(*) FROM branches`).Scan(&n); err != nil {
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
	if db.redoHeld.Load() > 0 {
		// A redo log of this process holds records no commit holds: they
		// may name bytes past the last committed range, which recovery
		// will need. gc reclaims them otherwise.
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
	db.retryLeft(ctx)
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		if db.full && readOnlyRefused(err) {
			return db.FullErr() // a write it needed (one that writes nothing succeeds)
		}
		return err
	}
	if err := db.syncPacks(); err != nil {
		tx.Rollback()
		return fmt.Errorf("commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (db *DB) now() int64 { return db.clock().UnixNano() }

// syncPacks makes the packed bytes durable before a commit that may name
// them (cas.Packs.Sync); tests inject a failure first (syncFault).
func (db *DB) syncPacks() error {
	if db.syncFault != nil {
		if err := db.syncFault(); err != nil {
			return err
		}
	}
	return db.packs.Sync()
}
