package journal

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

// TestRedoChainChecked: a log whose records pass their check but whose
// events do not chain, or belong to another branch, is refused before
// anything of it is applied.
func TestRedoChainChecked(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.art"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ev := (&Event{Kind: EvCreate, Branch: 1, Op: 1, Path: []byte("x"), Attr: Attr{Kind: cas.EntryFile}}).Encode()
	good := redoEventRow{seq: 7, branch: 1, op: 1, kind: int64(EvCreate), payload: ev, prev: cas.ID{1}}
	good.hash = chainHash(good.prev, good.seq, good.payload)
	forged := good
	forged.hash[0] ^= 1
	other := good
	other.branch = 2
	unlinked := good // chains to nothing before it
	unlinked.prev = cas.ID{9}
	unlinked.hash = chainHash(unlinked.prev, unlinked.seq, unlinked.payload)
	for name, evs := range map[string][]redoEventRow{
		"forged hash":  {forged},
		"other branch": {other},
		"broken link":  {good, unlinked},
	} {
		err := db.writeTx(ctx, func(tx *sql.Tx) error {
			_, _, err := db.applyRedo(ctx, tx, &parsedRedo{branch: 1, events: evs})
			return err
		})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: applied with %v, want ErrCorrupt", name, err)
		}
	}
}

// TestRedoKeptWhenCommitFails: a close acknowledged by its redo record is
// kept even when the commit after it fails (an fdatasync of the packs,
// here): the Batch leaves its log, the process's close of the store does
// not trim the packed bytes the log names, and the next open replays it.
func TestRedoKeptWhenCommitFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	op, err := db.BeginOp(ctx, "main", "run", "test")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 1<<30)
	b.LogCloses()
	big := make([]byte, 3<<20) // packed
	rand.Read(big)
	var id cas.ID
	if err := b.Update(ctx, func(tx *Tx) error {
		var err error
		if id, _, err = tx.Objects().PutFile(ctx, bytes.NewReader(big)); err != nil {
			return err
		}
		_, err = tx.Create(RootIno, []byte("big"), Attr{Kind: cas.EntryFile, Mode: 0o644, Content: id, Size: int64(len(big))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(); err != nil || b.Logged() != 1 {
		t.Fatalf("persist: %v, %d records", err, b.Logged())
	}
	db.syncFault = func() error { return fmt.Errorf("injected: %w", syscall.EIO) }
	if err := b.Close(); err == nil {
		t.Fatal("the batch's last commit succeeded despite the failed sync")
	}
	db.syncFault = nil
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := db.Recovered(); rec.Logs != 1 || len(rec.Failed) != 0 {
		t.Fatalf("recovered %+v, want the kept log replayed", rec)
	}
	var buf bytes.Buffer
	if _, err := db.Objects().ReadFile(ctx, id, &buf); err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("the logged file after recovery: %v (%d bytes)", err, buf.Len())
	}
	st, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := db.Objects().GetTree(ctx, st.Root)
	if err != nil || len(tr.Entries) != 1 || string(tr.Entries[0].Name) != "big" || tr.Entries[0].Target != id {
		t.Fatalf("the recovered tree: %+v, %v", tr, err)
	}
}

// TestRedoMovedBranchSetAside: a log whose transaction never committed,
// on a branch that moved since (neither at the log's start nor holding its
// events), is not applied: it is set aside and named.
func TestRedoMovedBranchSetAside(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := logOne(t, db, "a")
	// The transaction goes without its log being applied (as if this
	// process died), and another change lands on the branch.
	log := abandon(t, b)
	if _, err := db.Do(ctx, "main", "run", "other", func(tx *Tx) error { return createFile(ctx, tx, "b") }); err != nil {
		t.Fatal(err)
	}
	head, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	name := putDeadLog(t, path, log)
	db.recovered = RedoRecovery{}
	if err := db.recoverRedo(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := db.Recovered(); rec.Logs != 0 || len(rec.Failed) != 1 || !strings.Contains(rec.Failed[0], "moved") {
		t.Fatalf("recovered %+v, want the log set aside as moved", rec)
	}
	if _, err := os.Stat(name + ".failed"); err != nil {
		t.Fatalf("the log was not set aside: %v", err)
	}
	if got, _ := db.Head(ctx, "main"); got.Seq != head.Seq {
		t.Fatalf("head moved to %d from %d", got.Seq, head.Seq)
	}
}

// logOne opens a Batch with closes logged on db's main and persists one
// created file through it.
func logOne(t *testing.T, db *DB, name string) *Batch {
	t.Helper()
	ctx := context.Background()
	op, err := db.BeginOp(ctx, "main", "run", "test")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 1<<30)
	b.LogCloses()
	persistFile(t, b, name)
	return b
}

func persistFile(t *testing.T, b *Batch, name string) {
	t.Helper()
	ctx := context.Background()
	before := b.Logged()
	if err := b.Update(ctx, func(tx *Tx) error { return createFile(ctx, tx, name) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(); err != nil || b.Logged() != before+1 {
		t.Fatalf("persist %s: %v, %d records", name, err, b.Logged())
	}
}

// createFile creates the file name at the root holding its own name.
func createFile(ctx context.Context, tx *Tx, name string) error {
	id, _, err := tx.Objects().PutFile(ctx, strings.NewReader(name))
	if err != nil {
		return err
	}
	_, err = tx.Create(RootIno, []byte(name), Attr{Kind: cas.EntryFile, Mode: 0o644, Content: id, Size: int64(len(name))})
	return err
}

// abandon returns b's redo log's bytes and makes b lose its transaction
// without the log being applied, as if its process had died: the log is
// removed first (the caller puts its bytes back as a dead writer's).
func abandon(t *testing.T, b *Batch) []byte {
	t.Helper()
	log, err := os.ReadFile(b.redo.path)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.redo.remove()
	b.redo = nil
	b.mu.Unlock()
	b.Fail(errors.New("test"))
	return log
}

// putDeadLog writes log into the store's redo directory as a log no
// writer holds, and returns its path.
func putDeadLog(t *testing.T, path string, log []byte) string {
	t.Helper()
	name := filepath.Join(RedoDir(path), "0123456789abcdef0123456789abcdef.log")
	os.MkdirAll(RedoDir(path), 0o700)
	if err := os.WriteFile(name, log, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// headNames lists the names at the root of main's head.
func headNames(t *testing.T, db *DB) string {
	t.Helper()
	st, err := db.Head(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := db.Objects().GetTree(context.Background(), st.Root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range tr.Entries {
		names = append(names, string(e.Name))
	}
	return strings.Join(names, " ")
}

// TestRedoLiveWriterLeftAlone: another process's recovery never touches
// the log of a writer that lives (it reads it only under the write lock,
// where such a writer has no transaction open); when that writer then
// loses its transaction it applies its own log, every record of it.
func TestRedoLiveWriterLeftAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := logOne(t, db, "r1")
	// Another process opens the store meanwhile: its recovery waits for
	// the write lock the batch holds.
	opened := make(chan *DB)
	go func() {
		other, err := Open(ctx, path, Options{})
		if err != nil {
			t.Error(err)
		}
		opened <- other
	}()
	time.Sleep(50 * time.Millisecond)
	persistFile(t, b, "r2")
	b.Fail(errors.New("the transaction is lost")) // rolls back, then applies its own log
	other := <-opened
	if other == nil {
		return
	}
	defer other.Close()
	if rec := other.Recovered(); rec.Logs != 0 || len(rec.Failed) != 0 {
		t.Errorf("the other open recovered %+v from a live writer's log", rec)
	}
	if got := headNames(t, db); got != "r1 r2" {
		t.Fatalf("main holds %q after the lost transaction, want both logged files", got)
	}
	if paths, more := b.Lost(); len(paths) != 0 || more != 0 {
		t.Errorf("lost %v (+%d), want nothing: every event was logged", paths, more)
	}
	if err := b.Close(); err == nil {
		t.Error("the failed batch closed without its failure")
	}
	if ents, _ := os.ReadDir(RedoDir(path)); len(ents) != 0 {
		t.Errorf("redo logs left: %v", ents)
	}
}

// TestRedoStuckBranchTakesNothing: a batch that loses its transaction and
// cannot apply its log again (the pack sync keeps failing) leaves the log
// for the next open and lets nothing else of this process write the
// branch (an event after the log's base would make it inapplicable); the
// next open applies it.
func TestRedoStuckBranchTakesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	b := logOne(t, db, "kept")
	db.syncFault = func() error { return fmt.Errorf("injected: %w", syscall.ENOSPC) }
	if err := b.Close(); err == nil {
		t.Fatal("the commit succeeded despite the failed sync")
	}
	db.syncFault = nil
	_, err = db.Do(ctx, "main", "run", "after", func(tx *Tx) error {
		return tx.Record(Event{Kind: EvEnd})
	})
	if err == nil || !strings.Contains(err.Error(), "redo log") {
		t.Fatalf("a write to the branch after the stuck log: %v, want it refused", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := db.Recovered(); rec.Logs != 1 || len(rec.Failed) != 0 {
		t.Fatalf("recovered %+v, want the kept log applied", rec)
	}
	if got := headNames(t, db); got != "kept" {
		t.Fatalf("main holds %q", got)
	}
}

// TestRedoSalvagedAfterFailedCommit: when the commit fails once, the batch
// applies its log again at once: the logged closes are in the store
// without waiting for another open, and only what no close covered is
// reported lost.
func TestRedoSalvagedAfterFailedCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := logOne(t, db, "logged")
	if err := b.Update(ctx, func(tx *Tx) error {
		_, err := tx.Create(RootIno, []byte("dir"), Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	db.syncFault = func() error {
		if once.CompareAndSwap(false, true) {
			return fmt.Errorf("injected: %w", syscall.EIO)
		}
		return nil
	}
	if err := b.Commit(); err == nil {
		t.Fatal("the commit succeeded despite the failed sync")
	}
	if got := headNames(t, db); got != "logged" {
		t.Fatalf("main holds %q after the salvage, want the logged file only", got)
	}
	if paths, _ := b.Lost(); len(paths) != 1 || paths[0] != "dir" {
		t.Fatalf("lost %q, want the directory no close covered", paths)
	}
	b.Close()
	if ents, _ := os.ReadDir(RedoDir(path)); len(ents) != 0 {
		t.Errorf("redo logs left: %v", ents)
	}
}

// deadLogLocked makes a store at path whose branch main has a dead
// writer's log with one file, file, not on the branch, and takes the
// store's write lock on a connection of its own, so that a recovery
// cannot apply the log; release gives the lock back (and is called at
// the test's end if the test did not).
func deadLogLocked(t *testing.T, file string) (path, name string, release func()) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	log := abandon(t, logOne(t, db, file))
	db.Close()
	name = putDeadLog(t, path, log)
	holder, err := sql.Open(driverName, "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := holder.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	}
	if err != nil {
		holder.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
				t.Error(err)
			}
			conn.Close()
			holder.Close()
		})
	}
	t.Cleanup(release)
	return path, name, release
}

// TestRedoBusyStoreLeavesLog: a recovery the store cannot take now (its
// write lock held past the busy timeout) leaves the log in place, not set
// aside; the next open applies it.
func TestRedoBusyStoreLeavesLog(t *testing.T) {
	ctx := context.Background()
	path, name, release := deadLogLocked(t, "waiting")
	busy, err := Open(ctx, path, Options{Read: true, BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := busy.Recovered()
	busy.Close()
	if rec.Logs != 0 || len(rec.Failed) != 1 || !strings.Contains(rec.Failed[0], "not applied yet") {
		t.Fatalf("recovered %+v under a held lock, want the log left for later", rec)
	}
	if _, err := os.Stat(name); err != nil {
		t.Fatalf("the log did not stay: %v", err)
	}
	release()
	// The process that could not apply it writes nothing to the branch
	// before a recovery has: its next op runs the recovery first.
	db, err := Open(ctx, path, Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.redoLeft.Store(int64(1), "a log") // as the busy open above left it
	if err := db.redoWaits(1); err == nil {
		t.Fatal("a branch with a log left behind takes writes")
	}
	if got := headNames(t, db); got != "waiting" { // this open applied it already
		t.Fatalf("main holds %q", got)
	}
	if _, err := db.Do(ctx, "main", "run", "later", func(tx *Tx) error { return createFile(ctx, tx, "later") }); err != nil {
		t.Fatalf("the first op after the log was applied: %v", err)
	}
	if got := headNames(t, db); got != "later waiting" {
		t.Fatalf("main holds %q", got)
	}
}

// TestRedoLeftHoldsBranchDuringRetry: a log an open could not apply
// (the store busy) keeps this process's writers off its branch until a
// later recovery has applied it - during that recovery too. The retry
// used to forget the log before running the recovery, so a writer of
// another goroutine could append to the branch first, and the log, no
// longer applicable, was set aside with its acknowledged closes.
func TestRedoLeftHoldsBranchDuringRetry(t *testing.T) {
	ctx := context.Background()
	path, name, release := deadLogLocked(t, "waiting")
	db, err := Open(ctx, path, Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.redoWaits(1); err == nil {
		t.Fatal("an open that could not apply the log lets writers at its branch")
	}
	release()
	ran := false
	redoHooks.recovering = func() {
		ran = true
		if err := db.redoWaits(1); err == nil {
			t.Error("while the retry's recovery runs, a writer could append to the branch ahead of the log")
		}
	}
	t.Cleanup(func() { redoHooks.recovering = nil })
	if _, err := db.Do(ctx, "main", "run", "later", func(tx *Tx) error { return createFile(ctx, tx, "later") }); err != nil {
		t.Fatalf("the first op once the store is free: %v", err)
	}
	if !ran {
		t.Fatal("the op ran no recovery first")
	}
	if err := db.redoWaits(1); err != nil {
		t.Fatalf("the branch after its log applied: %v", err)
	}
	if got := headNames(t, db); got != "later waiting" {
		t.Fatalf("main holds %q, want the log's file and the later one", got)
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("the applied log is still there: %v", err)
	}
}

// TestRedoCorruptMiddleSetAside: a record that fails its check with
// records after it is no torn tail: the log is set aside whole, nothing
// of it applied.
func TestRedoCorruptMiddleSetAside(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := logOne(t, db, "one")
	persistFile(t, b, "two")
	log := abandon(t, b)
	log[redoHeaderLen+8+3] ^= 0xff // inside the first record's items
	putDeadLog(t, path, log)
	if err := db.recoverRedo(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := db.Recovered(); rec.Logs != 0 || len(rec.Failed) != 1 || !strings.Contains(rec.Failed[0], "fails its check") {
		t.Fatalf("recovered %+v, want the log set aside", rec)
	}
	if got := headNames(t, db); got != "" {
		t.Fatalf("main holds %q", got)
	}
}
