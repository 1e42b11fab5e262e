package journal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// Batch shares one write transaction among many small updates of an op's
// branch (group commit). Each Update's writes run inside a SAVEPOINT
// (opened by its first write), so an update that fails leaves no trace
// while the others stand; the transaction commits when Commit is called,
// MaxOps updates have accumulated, or MaxDelay after the first
// uncommitted update.
//
// A Batch holds the store's write lock while it has uncommitted updates,
// and its process's writer connection: every write of this process must go
// through it (or follow Commit). Other processes wait at most MaxDelay plus
// one update, and must not change the op's branch while the Batch is in
// use (it caches directory paths across its transactions). Use from any
// goroutine; updates are serialized.
//
// A commit that fails loses the transaction, and with it updates that
// returned nil: from then on the Batch refuses to keep anything (see
// Failed), so nothing is acknowledged after the loss, and Lost names
// what was lost.
type Batch struct {
	op       *Op
	maxDelay time.Duration
	maxOps   int
	// unguarded: updates run without savepoints (see Unguarded).
	unguarded bool

	mu sync.Mutex
	// conn is the writer connection while a transaction is open. The
	// Batch runs BEGIN and COMMIT on it itself rather than through a
	// sql.Tx: database/sql starts a goroutine to watch a Tx's context for
	// every query in it (measured: half the CPU of an unlink).
	conn    *sql.Conn
	uc      *updateConn // conn as updates see it
	t       *Tx
	pending int
	timer   *time.Timer

	// Commits shared by concurrent callers (see Commit): waiting counts
	// the Update and Commit calls waiting for mu; a Commit that finds one
	// waits (ended, on mu) until a transaction ends after it, as the
	// last of them leaves (unlock) or the timer fires. ends counts the
	// transactions ended (committed, rolled back, or nothing left open).
	waiting atomic.Int32
	sharers int
	ends    uint64
	ended   sync.Cond

	// failed holds the Batch's failure once it lost a transaction (see
	// Failed); lost names what that transaction held. Set under mu, read
	// without it.
	failed atomic.Pointer[error]
	lost   lostPaths

	// rollbacks counts transactions rolled back with their updates (a
	// failed commit, an abort): see Rollbacks.
	rollbacks atomic.Int64
	commits   atomic.Int64

	// logCloses: Persist appends to a redo log instead of committing
	// (LogCloses); redo is the log once created, logged counts the
	// records written.
	logCloses bool
	redo      *redoLog
	logged    atomic.Int64
	// recorded is how many of the open Tx's changed paths the log's
	// records cover (a lost transaction's salvage keeps those).
	recorded int

	// paths caches paths across the batch's transactions
	// (each close commits one). The projection clears it whenever a
	// directory moves (and forgets one that goes), and a rollback clears
	// it too; the branch has
	// no other writer while it is batched (see Batch).
	paths *pathCache
}

// NewBatch returns a Batch for op's branch.
func (op *Op) NewBatch(maxDelay time.Duration, maxOps int) *Batch {
	if maxOps <= 0 {
		maxOps = 1000
	}
	b := &Batch{op: op, maxDelay: maxDelay, maxOps: maxOps, paths: newPathCache()}
	b.ended.L = &b.mu
	return b
}

// lock takes mu for an Update or Commit, counted as waiting meanwhile.
func (b *Batch) lock() {
	b.waiting.Add(1)
	b.mu.Lock()
	b.waiting.Add(-1)
}

// unlock lets go of mu after an Update or Commit. The last of a queue of
// callers commits for the Commit calls that waited on it (sharers).
func (b *Batch) unlock() {
	if b.sharers > 0 && b.waiting.Load() == 0 {
		if b.conn != nil && b.Failed() == nil {
			b.commitLocked() // wakes them; a failure stays for them to see
		} else {
			b.endLocked()
		}
	}
	b.mu.Unlock()
}

// endLocked notes that the open transaction, if any, has ended and wakes
// the Commit calls waiting for that. The caller holds mu.
func (b *Batch) endLocked() {
	b.ends++
	b.ended.Broadcast()
}

// armLocked starts the timer that commits after d, unless it runs.
func (b *Batch) armLocked(d time.Duration) {
	if b.timer != nil || d <= 0 {
		return
	}
	b.timer = time.AfterFunc(d, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.timer = nil
		if b.conn == nil {
			b.endLocked() // a sharer may be waiting for this (see Commit)
			return
		}
		b.commitLocked() // a failure stays: every later call returns it
	})
}

// Failed returns the Batch's failure, or nil while it has none. A Batch
// fails when it loses a transaction - its commit failed (a full disk, a
// failed fdatasync of a pack), SQLite failed under an update, an update
// met a broken store (an I/O error, a pack whose write failed) - or when
// Fail is called. The transaction is rolled back, and with it every
// update in it that had returned nil (Lost names their paths). From then
// on every Update that appends an event, every Record, Commit and SetOp
// returns the failure: nothing more is acknowledged that the store will
// not keep. An Update that appends nothing (a read) still runs, in a
// transaction of its own that is rolled back, so what the store holds
// stays readable. The error wraps ErrBatchFailed and the cause (a
// syscall.Errno in it stays findable with errors.As) and reads as the
// cause. Safe from any goroutine, and never waits for an update.
func (b *Batch) Failed() error {
	if p := b.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Lost returns the paths of the events the Batch's failure rolled back
// (the first 100, in order) and how many more paths there were.
func (b *Batch) Lost() (paths []string, more int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost.list()
}

// Fail makes the Batch fail with err (see Failed), rolling back what is
// uncommitted: for a caller that met a failure the Batch cannot see (the
// store's fsync failed, a change already answered could not be
// journaled), so that nothing after it is acknowledged. No-op once the
// Batch has failed.
func (b *Batch) Fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rollbackLocked()
	b.failLocked(err)
}

// failedError is a Batch's failure: it reads as its cause.
type failedError struct{ err error }

func (e *failedError) Error() string   { return e.err.Error() }
func (e *failedError) Unwrap() []error { return []error{ErrBatchFailed, e.err} }

// failLocked makes err the Batch's failure (the first one stays) and
// returns it. The caller holds mu and has rolled back the transaction.
func (b *Batch) failLocked(err error) error {
	if p := b.failed.Load(); p != nil {
		return *p
	}
	var f error = &failedError{err}
	b.failed.Store(&f)
	return f
}

// loseLocked is called once t's transaction is gone (rolled back on conn,
// the connection it ran on, which the caller hands over): the closes its
// redo records acknowledged are applied again at once, on conn in a
// transaction of their own, as the next open of the store would
// (salvage) - on the same connection, so that no other writer of this
// process, queued for the writer pool's one connection, writes the branch
// first; the paths of t's other events are noted as lost. If the records
// cannot be applied (the disk is still full, say), the log is left for the
// next open, and nothing of this process may write the branch before then
// (DB.redoStuck): an event after them would make them inapplicable. The
// caller holds mu.
func (b *Batch) loseLocked(t *Tx, conn *sql.Conn) {
	changed := t.changed
	if l := b.redo; l != nil && l.size > int64(redoHeaderLen) {
		// What the log holds is kept, now or at the next open.
		changed = changed[min(b.recorded, len(changed)):]
		if err := b.salvageLocked(conn); err != nil {
			b.op.db.redoStuck.Store(&redoStuck{branch: b.op.BranchID, err: err})
			l.close() // its lock goes: the next open applies it
			b.redo = nil
			discard(conn)
			conn = nil
		}
	}
	if conn != nil {
		conn.Close()
	}
	b.recorded = 0
	for _, p := range changed {
		b.lost.add(p)
	}
}

// salvageLocked applies the Batch's own redo log on conn, its
// transaction being gone, and empties it.
func (b *Batch) salvageLocked(conn *sql.Conn) error {
	l := b.redo
	p, err := parseRedo(l.f, l.size)
	if err != nil {
		return err
	}
	db := b.op.db
	bg := context.Background()
	if _, err := conn.ExecContext(bg, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("apply the redo log again: %w", err)
	}
	_, _, err = db.applyRedo(bg, conn, p)
	if err == nil {
		err = db.syncPacks()
	}
	if err == nil {
		_, err = conn.ExecContext(bg, `COMMIT`)
	}
	if err != nil {
		conn.ExecContext(bg, `ROLLBACK`)
		return fmt.Errorf("apply the redo log again: %w", err)
	}
	l.reset()
	return nil
}

// readLocked runs fn for a Batch that failed with failed: in a
// transaction of its own, always rolled back (reading a collapsed
// directory writes the projection), so reads still work; an fn that
// appends an event gets failed. The caller holds mu.
func (b *Batch) readLocked(fn func(*Tx) error, failed error) error {
	bg := context.Background()
	conn, err := b.op.db.w.Conn(bg)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	// Deferred: a read takes no write lock unless it writes.
	if _, err := conn.ExecContext(bg, `BEGIN`); err != nil {
		discard(conn)
		return fmt.Errorf("begin read: %w", err)
	}
	defer endTx(conn, `ROLLBACK`)
	t, err := b.op.openTxFor(bg, conn, false)
	if err != nil {
		return err
	}
	defer t.p.close()
	t.p.now = b.op.db.now()
	if err := fn(t); err != nil {
		return err
	}
	if t.Appended() > 0 {
		return failed
	}
	return nil
}

// Unguarded makes b run its updates without savepoints: an update that
// fails after writing rolls back the whole open transaction, every
// uncommitted update with it, and Update returns its error wrapped. For a
// writer that gives up at its first error anyway (an import): a savepoint
// makes SQLite copy every page an update changes, that an earlier one of
// the transaction changed too, to a statement journal, a temporary file
// once past 64 KiB - in an import of Go's src/ 40,000 page writes to a
// file that is only read if the update fails. Call before the first
// Update.
func (b *Batch) Unguarded() {
	b.mu.Lock()
	b.unguarded = true
	b.mu.Unlock()
}

// txState is what a rolled-back update must restore in memory.
type txState struct {
	head           [32]byte
	headSeq, count int64
	next, nextIno  int64
	appended       int
	writes         int
	lead           *Event
	changed        int
}

func (t *Tx) save() txState {
	return txState{head: t.head, headSeq: t.headSeq, count: t.count, next: t.next, nextIno: t.p.nextIno, appended: t.appended,
		writes: t.p.writes, lead: t.op.lead, changed: len(t.changed)}
}

func (t *Tx) restore(s txState) {
	t.head, t.headSeq, t.count, t.next, t.p.nextIno, t.appended = s.head, s.headSeq, s.count, s.next, s.nextIno, s.appended
	t.op.lead = s.lead
	t.changed = t.changed[:s.changed]
	if t.p.writes != s.writes { // the rollback undid what the caches may know
		t.p.forget()
	}
}

// Update runs fn against the shared transaction.
func (b *Batch) Update(ctx context.Context, fn func(*Tx) error) error {
	b.lock()
	defer b.unlock()
	if err := b.Failed(); err != nil {
		return b.readLocked(fn, err)
	}
	// The transaction outlives any one request: never tie it to a
	// request's context (cancelling would roll everything back).
	bg := context.Background()
	if b.conn == nil {
		if err := b.op.db.FullErr(); err != nil {
			return err
		}
		conn, err := b.op.db.w.Conn(bg)
		if err != nil {
			return fmt.Errorf("begin write: %w", err)
		}
		if _, err := conn.ExecContext(bg, `BEGIN IMMEDIATE`); err != nil {
			discard(conn)
			return fmt.Errorf("begin write: %w", err)
		}
		uc := &updateConn{Conn: conn, unguarded: b.unguarded}
		if b.logCloses && !b.unguarded && (b.redo == nil || !b.redo.broken) {
			uc.cap = &redoCapture{}
		}
		t, err := b.op.openTx(bg, uc)
		if err != nil {
			endTx(conn, `ROLLBACK`)
			return err
		}
		t.p.paths = b.paths
		t.track = true
		b.conn, b.uc, b.t = conn, uc, t
	}
	b.t.p.now = b.op.db.now()
	saved := b.t.save()
	b.uc.begin()
	if b.uc.cap != nil {
		b.uc.cap.begin()
	}
	err := fn(b.t)
	savepoint, serr := b.uc.ended()
	if serr != nil { // even if fn went on without the write
		return b.abortLocked(serr)
	}
	if err != nil {
		if savepoint && b.unguarded || b.storageFailure(err) {
			return b.abortLocked(err)
		}
		if savepoint {
			if _, rerr := b.conn.ExecContext(bg, `ROLLBACK TO u; RELEASE u`); rerr != nil {
				return b.abortLocked(rerr)
			}
		}
		if b.uc.cap != nil {
			b.uc.cap.rewind()
		}
		b.t.restore(saved)
		return err
	}
	if savepoint && !b.unguarded {
		if err := b.uc.release(); err != nil {
			return b.abortLocked(err)
		}
	}
	b.pending++
	if b.pending >= b.maxOps {
		return b.commitLocked()
	}
	b.armLocked(b.maxDelay)
	return nil
}

// ReadObjects runs fn against the object store of the Batch's open
// transaction, or when none is open of the process's writer connection in
// autocommit (a read transaction per statement: no write lock), without
// counting as an update toward a commit: fn must only read. For reads
// frequent enough that an Update each would commit the batch every few
// milliseconds, each commit syncing the packs (a stream's chunk lookups,
// every 2 MiB of a big write). The writer's connection keeps the pages it
// read and wrote in its cache across its own commits, where a connection
// of the reader pool finds its cache emptied by every commit since its
// last statement and reads the pages back. What fn reads in the open
// transaction may still be rolled back (Rollbacks).
func (b *Batch) ReadObjects(ctx context.Context, fn func(*cas.Store) error) error {
	b.mu.Lock()
	if b.conn != nil {
		defer b.mu.Unlock()
		if b.Failed() != nil {
			// Lost: the committed rows, through the reader pool (the
			// writer's connection is still the Batch's).
			return fn(b.op.db.objs)
		}
		return fn(b.t.Objects())
	}
	// Not waiting for the connection under mu: an update waits for it
	// only as long as fn reads. (op may change under mu; its db not.)
	db := b.op.db
	b.mu.Unlock()
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("read objects: %w", err)
	}
	defer conn.Close()
	return fn(db.objs.With(conn))
}

// Record appends an event that changes no file (see Tx.Record) as one
// update: how a process's tracer or network proxy journals through the
// Batch it must share.
func (b *Batch) Record(ctx context.Context, evs ...Event) error {
	return b.Update(ctx, func(t *Tx) error {
		for _, ev := range evs {
			if err := t.Record(ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// Rollbacks is how many of the Batch's transactions were rolled back
// with the updates in them. An update that committed nothing itself but
// relies on rows an earlier update inserted (a file stored while it was
// written, in the overlay) compares it with the count before those
// inserts: unchanged, they committed or are in the open transaction.
func (b *Batch) Rollbacks() int64 { return b.rollbacks.Load() }

// Commit commits the shared transaction (a no-op when nothing is
// pending). When it returns nil, every earlier Update is committed; an
// error means the updates not committed before are lost, and the Batch
// has failed (see Failed).
//
// Commits are shared: when another Update or Commit is waiting for the
// Batch, Commit lets it run first and returns once a later commit (the
// last waiting caller's, or the timer's) has ended the transaction, so
// concurrent closes of files pay for one commit between them instead of
// one each (each commit writes the pages it changed to the WAL). Only a
// Batch whose MaxDelay is at most shareWait shares: it waits at most until
// its timer fires.
func (b *Batch) Commit() error {
	b.lock()
	defer b.unlock()
	if err := b.Failed(); err != nil {
		return err
	}
	if b.conn != nil && b.waiting.Load() > 0 && b.maxDelay > 0 && b.maxDelay <= shareWait {
		b.armLocked(b.maxDelay)
		b.sharers++
		for target := b.ends + 1; b.ends < target; {
			b.ended.Wait()
		}
		b.sharers--
		return b.Failed()
	}
	return b.commitLocked()
}

// LogCloses makes Persist append the transaction's rows to a redo log of
// the Batch's own instead of committing (redo.go): one write instead of a
// commit's dozen WAL pages. Call before the first update; Close must end
// the Batch (it removes the log).
func (b *Batch) LogCloses() {
	b.mu.Lock()
	b.logCloses = true
	b.mu.Unlock()
	// The directory exists from now on (the log itself comes with the
	// first record), so that a sandbox started after this can hide it
	// with the store's other files (workspace.StoreFiles).
	os.Mkdir(RedoDir(b.op.db.path), 0o700)
}

// Persist makes every update so far survive a crash of this process: with
// LogCloses, by a record in the Batch's redo log (recovered by the next
// open of the store after a crash), else - or when the transaction holds
// a statement the log cannot hold, or the log fails - by a commit, as
// Commit. Unlike a commit it does not end the transaction, so the write
// lock stays with the Batch until its timer or size commits.
func (b *Batch) Persist() error {
	b.lock()
	if err := b.Failed(); err != nil {
		b.unlock()
		return err
	}
	if b.conn == nil {
		b.unlock()
		return nil // nothing uncommitted
	}
	if c := b.uc.cap; c != nil {
		if items, ok := c.take(); ok {
			err := b.logLocked(items)
			if err == nil {
				b.unlock()
				return nil
			}
			// Not logged (the disk, say): the commit below says whether
			// the updates can be kept at all.
			c.refuse(err.Error())
		}
	}
	b.unlock()
	return b.Commit()
}

// logLocked appends a record of items to the log, creating it first.
func (b *Batch) logLocked(items []byte) error {
	if len(items) == 0 {
		return nil // nothing but derived rows since the last record
	}
	db := b.op.db
	if b.redo == nil {
		l, err := createRedoLog(db.path, b.op.BranchID, db.syncEach, &db.redoHeld)
		if err != nil {
			return err
		}
		b.redo = l
	}
	if b.redo.broken {
		return errors.New("redo log: an earlier write failed")
	}
	// The packed bytes the records name reach the disk first, as before a
	// commit.
	if err := db.syncPacks(); err != nil {
		return err
	}
	if err := b.redo.append(items); err != nil {
		return err
	}
	b.recorded = len(b.t.changed)
	b.logged.Add(1)
	return nil
}

// Logged is how many redo records Persist wrote.
func (b *Batch) Logged() int64 { return b.logged.Load() }

// Close commits what is pending and, once that succeeded, removes the
// Batch's redo log. A log whose transaction could not be committed stays
// (closed) for the next open of the store to recover. The Batch must not
// be used after.
func (b *Batch) Close() error {
	err := b.Commit()
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.redo; l != nil {
		// Everything committed, or the records applied again after the
		// transaction was lost (loseLocked): the log goes. Else it stays
		// for the next open.
		if !l.broken && (l.size == int64(redoHeaderLen) || err == nil && b.Failed() == nil) {
			l.remove()
		} else {
			l.close()
		}
		b.redo = nil
	}
	return err
}

// shareWait is the longest MaxDelay of a Batch whose commits are shared:
// how long a Commit may wait for the callers queued behind it.
const shareWait = 10 * time.Millisecond

// Commits is how many of the Batch's transactions committed.
func (b *Batch) Commits() int64 { return b.commits.Load() }

func (b *Batch) commitLocked() error {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if b.conn == nil {
		return nil
	}
	conn, t := b.conn, b.t
	b.uc.close()
	b.conn, b.uc, b.t, b.pending = nil, nil, nil, 0
	defer b.endLocked()
	defer t.p.close()
	err := t.flush(conn)
	if err == nil {
		// The packed bytes this transaction names reach the disk before
		// the rows that name them can.
		err = b.op.db.syncPacks()
	}
	if err == nil {
		if _, err = conn.ExecContext(context.Background(), `COMMIT`); err == nil {
			conn.Close()
			b.commits.Add(1)
			if b.redo != nil {
				b.redo.reset() // its records are committed
			}
			b.recorded = 0
			return nil
		}
	}
	// SQLite may have rolled back already (a failed COMMIT).
	conn.ExecContext(context.Background(), `ROLLBACK`)
	// Lost, with updates whose callers were told they succeeded: the
	// Batch fails for good (see Failed).
	b.rollbacks.Add(1)
	b.paths.clear() // inos of rolled-back directories will be allocated again
	b.loseLocked(t, conn)
	return b.failLocked(fmt.Errorf("commit batch: %w", err))
}

// updateConn is the Batch's connection as an update sees it: the
// update's first write opens its savepoint, so one that only reads (a
// lookup, a listing) runs no SAVEPOINT and RELEASE. Every write of an
// update, to the projection, the events or the objects, goes through
// ExecContext, from any goroutine (the object store writes chunks from
// several).
type updateConn struct {
	*sql.Conn
	mu        sync.Mutex // held while the savepoint opens: no write may run before
	savepoint bool       // SAVEPOINT u is open for the current update (unguarded: it wrote)
	err       error      // opening it failed: the Batch must abort
	unguarded bool       // see Batch.Unguarded: no SAVEPOINT is run
	// SAVEPOINT u and RELEASE u, prepared at the transaction's first
	// write and run by every writing update after it: an unprepared
	// statement is parsed again at each run, about 1 us of a pair's
	// 1.4 (npm ci: 0.37 s of the daemon's 9.7 s of CPU went to the two
	// statements). Closed before the transaction ends (close).
	save, rel *sql.Stmt
	// cap gathers what the redo log must hold (Batch.LogCloses); nil
	// when the Batch logs nothing.
	cap *redoCapture
}

// Statements of an update run with their context's values but not its
// cancellation: both database/sql and go-sqlite3 watch a cancellable
// context on a goroutine of their own for every statement, which cost an
// import more CPU than many of its statements (about 7 futex and
// nanosleep calls per imported file). A context already done still stops
// the update at its next statement, and an interrupted update rolls back
// its savepoint either way, so what a cancel can leave behind is the
// same; only a statement already running is no longer cut short (they
// are all small: a row, a directory's listing).
func (c *updateConn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.open(); err != nil {
		return nil, err
	}
	res, err := c.Conn.ExecContext(context.WithoutCancel(ctx), q, args...)
	if err == nil && c.cap != nil {
		c.cap.note(q, args)
	}
	return res, err
}

func (c *updateConn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Conn.QueryContext(context.WithoutCancel(ctx), q, args...)
}

func (c *updateConn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if ctx.Err() != nil {
		return c.Conn.QueryRowContext(ctx, q, args...) // a Row holding ctx's error
	}
	return c.Conn.QueryRowContext(context.WithoutCancel(ctx), q, args...)
}

func (c *updateConn) open() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.savepoint {
		return nil
	}
	if c.unguarded {
		c.savepoint = true
		return nil
	}
	if c.err == nil {
		if c.save == nil {
			c.save, c.err = c.Conn.PrepareContext(context.Background(), `SAVEPOINT u`)
		}
		if c.err == nil {
			if _, c.err = c.save.ExecContext(context.Background()); c.err == nil {
				c.savepoint = true
				return nil
			}
		}
	}
	return fmt.Errorf("savepoint: %w", c.err)
}

// release ends the current update's savepoint, keeping its writes in the
// transaction. Called while no write of an update is under way.
func (c *updateConn) release() error {
	if c.rel == nil {
		var err error
		if c.rel, err = c.Conn.PrepareContext(context.Background(), `RELEASE u`); err != nil {
			return fmt.Errorf("release savepoint: %w", err)
		}
	}
	if _, err := c.rel.ExecContext(context.Background()); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// close finalizes the prepared statements, before the transaction ends
// and the connection goes back to the pool (where a statement left
// prepared would keep its memory until the connection closed).
func (c *updateConn) close() {
	for _, st := range []*sql.Stmt{c.save, c.rel} {
		if st != nil {
			st.Close()
		}
	}
	c.save, c.rel = nil, nil
}

// begin readies c for the next update; ended reports whether the update
// opened its savepoint, or the error that kept it from opening. Both run
// while no write of an update is under way.
func (c *updateConn) begin() {
	c.mu.Lock()
	c.savepoint, c.err = false, nil
	c.mu.Unlock()
}

func (c *updateConn) ended() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.savepoint, c.err
}

// endTx ends the transaction open on conn with stmt (COMMIT or ROLLBACK)
// and returns conn to the pool. A failed end rolls back (SQLite may leave
// a transaction open after a failed COMMIT) and drops the connection, so
// the pool never hands out one inside a transaction.
func endTx(conn *sql.Conn, stmt string) error {
	bg := context.Background()
	if _, err := conn.ExecContext(bg, stmt); err != nil {
		conn.ExecContext(bg, `ROLLBACK`) // fails when SQLite already rolled back
		discard(conn)
		return err
	}
	return conn.Close()
}

// discard closes conn and drops it from the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// abortLocked rolls the whole transaction back after SQLite or the store
// failed under an update (or Fail was called), and fails the Batch. The
// failing update's own events count as lost too: an update may have been
// answered before it ran (overlay/behind.go).
func (b *Batch) abortLocked(err error) error {
	b.rollbackLocked()
	return b.failLocked(fmt.Errorf("batch: %w (uncommitted updates lost)", err))
}

// rollbackLocked rolls back the open transaction, if any, noting its
// events as lost. The caller holds mu.
func (b *Batch) rollbackLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	t, conn := b.t, b.conn
	if conn != nil {
		b.rollbacks.Add(1)
		b.t.p.close()
		b.uc.close()
		conn.ExecContext(context.Background(), `ROLLBACK`)
	}
	b.paths.clear()
	b.conn, b.uc, b.t, b.pending = nil, nil, nil, 0
	if conn != nil {
		b.loseLocked(t, conn) // after the rollback: its salvage writes
	}
	b.endLocked()
}

// SetOp commits what is pending and makes later updates part of op (a
// long-lived writer, such as one overlay serving many requests, journals
// each request under an op of its own). op must be on the same branch.
func (b *Batch) SetOp(op *Op) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if op.BranchID != b.op.BranchID {
		return fmt.Errorf("batch of branch %s cannot take an op of branch %s", termtext.Quote(b.op.Branch), termtext.Quote(op.Branch))
	}
	if err := b.Failed(); err != nil {
		return err
	}
	if err := b.commitLocked(); err != nil {
		return err
	}
	b.op = op
	return nil
}
