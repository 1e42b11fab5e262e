package journal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	err     error // a failed background commit, reported by the next call

	// rollbacks counts transactions rolled back with their updates (a
	// failed commit, an abort): see Rollbacks.
	rollbacks atomic.Int64

	// paths caches paths across the batch's transactions
	// (each close commits one). The projection clears it whenever a
	// directory moves or goes, and a rollback does too; the branch has
	// no other writer while it is batched (see Batch).
	paths *pathCache
}

// NewBatch returns a Batch for op's branch.
func (op *Op) NewBatch(maxDelay time.Duration, maxOps int) *Batch {
	if maxOps <= 0 {
		maxOps = 1000
	}
	return &Batch{op: op, maxDelay: maxDelay, maxOps: maxOps, paths: newPathCache()}
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
}

func (t *Tx) save() txState {
	return txState{head: t.head, headSeq: t.headSeq, count: t.count, next: t.next, nextIno: t.p.nextIno, appended: t.appended,
		writes: t.p.writes, lead: t.op.lead}
}

func (t *Tx) restore(s txState) {
	t.head, t.headSeq, t.count, t.next, t.p.nextIno, t.appended = s.head, s.headSeq, s.count, s.next, s.nextIno, s.appended
	t.op.lead = s.lead
	if t.p.writes != s.writes { // the rollback undid what the caches may know
		t.p.forget()
	}
}

// Update runs fn against the shared transaction.
func (b *Batch) Update(ctx context.Context, fn func(*Tx) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.err; err != nil {
		b.err = nil
		return err
	}
	// The transaction outlives any one request: never tie it to a
	// request's context (cancelling would roll everything back).
	bg := context.Background()
	if b.conn == nil {
		conn, err := b.op.db.w.Conn(bg)
		if err != nil {
			return fmt.Errorf("begin write: %w", err)
		}
		if _, err := conn.ExecContext(bg, `BEGIN IMMEDIATE`); err != nil {
			discard(conn)
			return fmt.Errorf("begin write: %w", err)
		}
		uc := &updateConn{Conn: conn, unguarded: b.unguarded}
		t, err := b.op.openTx(bg, uc)
		if err != nil {
			endTx(conn, `ROLLBACK`)
			return err
		}
		t.p.paths = b.paths
		b.conn, b.uc, b.t = conn, uc, t
	}
	b.t.p.now = b.op.db.now()
	saved := b.t.save()
	b.uc.begin()
	err := fn(b.t)
	savepoint, serr := b.uc.ended()
	if serr != nil { // even if fn went on without the write
		return b.abortLocked(serr)
	}
	if err != nil {
		if savepoint && b.unguarded {
			return b.abortLocked(err)
		}
		if savepoint {
			if _, rerr := b.conn.ExecContext(bg, `ROLLBACK TO u; RELEASE u`); rerr != nil {
				return b.abortLocked(rerr)
			}
		}
		b.t.restore(saved)
		return err
	}
	if savepoint && !b.unguarded {
		if _, err := b.conn.ExecContext(bg, `RELEASE u`); err != nil {
			return b.abortLocked(err)
		}
	}
	b.pending++
	if b.pending >= b.maxOps {
		return b.commitLocked()
	}
	if b.timer == nil && b.maxDelay > 0 {
		b.timer = time.AfterFunc(b.maxDelay, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.timer = nil
			if err := b.commitLocked(); err != nil && b.err == nil {
				b.err = err
			}
		})
	}
	return nil
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

// Commit commits the shared transaction now (a no-op when nothing is
// pending). After it returns, every earlier Update is committed.
// Rollbacks is how many of the Batch's transactions were rolled back
// with the updates in them. An update that committed nothing itself but
// relies on rows an earlier update inserted (a file stored while it was
// written, in the overlay) compares it with the count before those
// inserts: unchanged, they committed or are in the open transaction.
func (b *Batch) Rollbacks() int64 { return b.rollbacks.Load() }

func (b *Batch) Commit() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.err; err != nil {
		b.err = nil
		return err
	}
	return b.commitLocked()
}

func (b *Batch) commitLocked() error {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if b.conn == nil {
		return nil
	}
	conn, t := b.conn, b.t
	b.conn, b.uc, b.t, b.pending = nil, nil, nil, 0
	defer t.p.close()
	if err := t.flush(conn); err != nil {
		b.rollbacks.Add(1)
		endTx(conn, `ROLLBACK`)
		b.paths.clear() // inos of rolled-back directories will be allocated again
		return fmt.Errorf("commit batch: %w", err)
	}
	// The packed bytes this transaction names reach the disk before the
	// rows that name them can.
	if err := b.op.db.packs.Sync(); err != nil {
		b.rollbacks.Add(1)
		endTx(conn, `ROLLBACK`)
		b.paths.clear()
		return fmt.Errorf("commit batch: %w", err)
	}
	if err := endTx(conn, `COMMIT`); err != nil {
		b.rollbacks.Add(1)
		b.paths.clear()
		return fmt.Errorf("commit batch: %w", err)
	}
	return nil
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
	return c.Conn.ExecContext(context.WithoutCancel(ctx), q, args...)
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
		if _, c.err = c.Conn.ExecContext(context.Background(), `SAVEPOINT u`); c.err == nil {
			c.savepoint = true
			return nil
		}
	}
	return fmt.Errorf("savepoint: %w", c.err)
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

// abortLocked rolls the whole transaction back after SQLite itself failed.
func (b *Batch) abortLocked(err error) error {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if b.conn != nil {
		b.rollbacks.Add(1)
		b.t.p.close()
		endTx(b.conn, `ROLLBACK`)
	}
	b.paths.clear()
	b.conn, b.uc, b.t, b.pending = nil, nil, nil, 0
	return fmt.Errorf("batch: %w (uncommitted updates lost)", err)
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
	if err := b.err; err != nil {
		b.err = nil
		return err
	}
	if err := b.commitLocked(); err != nil {
		return err
	}
	b.op = op
	return nil
}
