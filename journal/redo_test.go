package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// Environment of TestHelperProcessRedo.
const (
	redoHelperEnv      = "ART_JOURNAL_TEST_REDO" // the script to run in the helper process
	redoHelperStoreEnv = "ART_JOURNAL_TEST_REDO_STORE"
)

// redoScript runs the helper's updates through b, calling Persist where a
// close would; each step is one update. It returns the root of the branch
// as it stood after the last persisted update, computed inside the batch.
func redoScript(ctx context.Context, b *journal.Batch) (cas.ID, error) {
	big := make([]byte, 3<<20) // past the size at which chunks go to packs
	rand.Read(big)
	steps := []func(tx *journal.Tx) error{
		func(tx *journal.Tx) error { return mkdirAll(tx, "d/e") },
		func(tx *journal.Tx) error { return writeFile(tx, "d/a", "first", 1e9) },
		func(tx *journal.Tx) error { return writeFile(tx, "d/a", "second version", 2e9) },
		func(tx *journal.Tx) error {
			d, err := tx.Resolve([]byte("d"))
			if err != nil {
				return err
			}
			return tx.Rename(d.Ino, []byte("a"), d.Ino, []byte("b"), 0)
		},
		func(tx *journal.Tx) error {
			id, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(big))
			if err != nil {
				return err
			}
			e, err := tx.Resolve([]byte("d/e"))
			if err != nil {
				return err
			}
			_, err = tx.Create(e.Ino, []byte("big"), journal.Attr{Kind: cas.EntryFile, Mode: 0o600, MTime: 3e9, Content: id, Size: int64(len(big))})
			return err
		},
		func(tx *journal.Tx) error {
			root, err := tx.Resolve(nil)
			if err != nil {
				return err
			}
			_, err = tx.Create(root.Ino, []byte("ln"), journal.Attr{Kind: cas.EntrySymlink, Mode: 0o777, Link: []byte("d/b")})
			return err
		},
		func(tx *journal.Tx) error {
			n, err := tx.Resolve([]byte("d/b"))
			if err != nil {
				return err
			}
			if _, err := tx.SetAttr(n.Ino, journal.SetMode, journal.Attr{Mode: 0o640}); err != nil {
				return err
			}
			if err := tx.SetXattr(n.Ino, "user.k", []byte("v")); err != nil {
				return err
			}
			d, err := tx.Resolve([]byte("d"))
			if err != nil {
				return err
			}
			_, err = tx.Link(n.Ino, d.Ino, []byte("hard"))
			return err
		},
		func(tx *journal.Tx) error { return writeFile(tx, "gone", "soon unlinked", 4e9) },
		func(tx *journal.Tx) error {
			root, err := tx.Resolve(nil)
			if err != nil {
				return err
			}
			return tx.Unlink(root.Ino, []byte("gone"))
		},
		// A failed update in between leaves nothing in the log.
		func(tx *journal.Tx) error {
			if err := writeFile(tx, "failed", "rolled back", 5e9); err != nil {
				return err
			}
			return errors.New("fails on purpose")
		},
	}
	for i, step := range steps {
		err := b.Update(ctx, step)
		if i == len(steps)-1 {
			if err == nil {
				return cas.ID{}, errors.New("the failing step succeeded")
			}
		} else if err != nil {
			return cas.ID{}, fmt.Errorf("step %d: %w", i, err)
		}
		if err := b.Persist(); err != nil {
			return cas.ID{}, fmt.Errorf("persist after step %d: %w", i, err)
		}
	}
	var root cas.ID
	err := b.Update(ctx, func(tx *journal.Tx) error {
		var err error
		root, err = tx.Root()
		return err
	})
	if err == nil {
		err = b.Persist()
	}
	return root, err
}

// TestHelperProcessRedo is not a test: the redo tests run the test binary
// with it selected to get a writer they can kill. It runs redoScript with
// closes logged, prints the root and its redo records, adds an update it
// never persists, then waits to be killed.
func TestHelperProcessRedo(t *testing.T) {
	if os.Getenv(redoHelperEnv) == "" {
		return
	}
	ctx := context.Background()
	db, err := journal.Open(ctx, os.Getenv(redoHelperStoreEnv), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	op, err := db.BeginOp(ctx, "main", "run", "redo helper")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 1<<30) // commits only when told
	b.LogCloses()
	root, err := redoScript(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, func(tx *journal.Tx) error { return writeFile(tx, "unpersisted", "lost", 6e9) }); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("root %s records %d commits %d\n", root, b.Logged(), b.Commits())
	time.Sleep(time.Minute)
	t.Fatal("not killed")
}

// startRedoHelper runs TestHelperProcessRedo on the store at path and
// returns once it has persisted its script, with its root.
func startRedoHelper(t *testing.T, path string) (cmd *exec.Cmd, root string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcessRedo$", "-test.count=1")
	// Its TMPDIR is the test's: killed, it cannot clean its own up.
	cmd.Env = append(os.Environ(), redoHelperEnv+"=1", redoHelperStoreEnv+"="+path, "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	var records, commits int
	if _, err := fmt.Sscanf(line, "root %s records %d commits %d", &root, &records, &commits); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	// Every persist but the ones after the failed step and the root's
	// wrote a record, none committed.
	if records < 9 || commits != 0 {
		t.Fatalf("helper wrote %d redo records and %d commits; want at least 9 and none", records, commits)
	}
	return cmd, root
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGKILL)
	if err := cmd.Wait(); err == nil {
		t.Fatal("the helper exited 0 before it was killed")
	}
}

// redoLogs lists the store's redo logs (and set-aside ones).
func redoLogs(t *testing.T, path string) []string {
	t.Helper()
	ents, err := os.ReadDir(journal.RedoDir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestRedoRecoversKilledWriter: a writer killed with its transaction
// uncommitted loses nothing it persisted - the next open replays its log
// to the very tree it had (the same root, mtimes of directories
// included) - and what it did not persist is gone.
func TestRedoRecoversKilledWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	before := resolve(t, db, "main")
	db.Close()

	cmd, root := startRedoHelper(t, path)
	kill(t, cmd)
	if logs := redoLogs(t, path); len(logs) != 1 {
		t.Fatalf("redo logs after the kill: %q, want one", logs)
	}

	db, err = journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := db.Recovered()
	if rec.Logs != 1 || rec.Events == 0 || len(rec.Failed) != 0 {
		t.Fatalf("recovered %+v, want one log replayed", rec)
	}
	after := resolve(t, db, "main")
	if after.Root.String() != root {
		got := treeMap(t, db.Objects(), after.Root, true)
		t.Fatalf("recovered root %s, the writer had %s; recovered tree:\n%v", after.Root, root, got)
	}
	if after.Seq <= before.Seq {
		t.Fatalf("head seq %d after recovery, %d before", after.Seq, before.Seq)
	}
	tree := treeMap(t, db.Objects(), after.Root, false)
	for _, p := range []string{"unpersisted", "failed", "gone", "d/a"} {
		if _, ok := tree[p]; ok {
			t.Errorf("%s is in the recovered tree", p)
		}
	}
	for _, p := range []string{"d/b", "d/hard", "d/e/big", "ln"} {
		if _, ok := tree[p]; !ok {
			t.Errorf("%s is not in the recovered tree", p)
		}
	}
	// (treeMap read every file back, verified: the big one's chunks
	// from the pack the writer left.)
	if logs := redoLogs(t, path); len(logs) != 0 {
		t.Errorf("redo logs after recovery: %q", logs)
	}
	// The chain verifies, and replaying it whole gives the projection
	// recovery left.
	if rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true}); err != nil || !rep.OK() || len(rep.Rebuilt) != 0 {
		t.Errorf("verify --rebuild after recovery: %+v, %v", rep, err)
	}
	db.Close()

	// A second open finds nothing to do.
	db2, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if rec := db2.Recovered(); rec.Logs != 0 || len(rec.Failed) != 0 {
		t.Fatalf("second open recovered %+v", rec)
	}
	if again := resolve(t, db2, "main"); again.Seq != after.Seq {
		t.Fatalf("head moved from %d to %d at the second open", after.Seq, again.Seq)
	}
}

// persistedLog runs one logged update on a fresh store's main and
// returns the store, the batch and a copy of its redo log's bytes.
func persistedLog(t *testing.T) (db *journal.DB, path string, b *journal.Batch, log []byte) {
	t.Helper()
	ctx := context.Background()
	db = openStore(t)
	path = db.Path()
	op, err := db.BeginOp(ctx, "main", "run", "test")
	if err != nil {
		t.Fatal(err)
	}
	b = op.NewBatch(time.Hour, 1<<30)
	b.LogCloses()
	if err := b.Update(ctx, func(tx *journal.Tx) error { return writeFile(tx, "a", "logged", 1e9) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(); err != nil {
		t.Fatal(err)
	}
	if b.Logged() != 1 || b.Commits() != 0 {
		t.Fatalf("persist wrote %d records and %d commits, want 1 and 0", b.Logged(), b.Commits())
	}
	logs := redoLogs(t, path)
	if len(logs) != 1 {
		t.Fatalf("redo logs: %q", logs)
	}
	if log, err = os.ReadFile(filepath.Join(journal.RedoDir(path), logs[0])); err != nil {
		t.Fatal(err)
	}
	return db, path, b, log
}

// putLog writes data as a redo log of the store at path.
func putLog(t *testing.T, path, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(journal.RedoDir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(journal.RedoDir(path), name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

const logName = "0123456789abcdef0123456789abcdef.log"

// TestRedoCommittedNotReplayed: a log whose transaction committed (a crash
// between the commit and the log's reset) is removed, not applied again.
func TestRedoCommittedNotReplayed(t *testing.T) {
	ctx := context.Background()
	db, path, b, log := persistedLog(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if logs := redoLogs(t, path); len(logs) != 0 {
		t.Fatalf("redo logs after Close: %q", logs)
	}
	head := resolve(t, db, "main")
	putLog(t, path, logName, log)
	db2, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if rec := db2.Recovered(); rec.Logs != 0 || len(rec.Failed) != 0 {
		t.Fatalf("recovered %+v from a committed log", rec)
	}
	if got := resolve(t, db2, "main"); got.Seq != head.Seq || got.Root != head.Root {
		t.Fatalf("head %d %s after reopening, %d %s before", got.Seq, got.Root, head.Seq, head.Root)
	}
	if logs := redoLogs(t, path); len(logs) != 0 {
		t.Fatalf("redo logs after recovery: %q", logs)
	}
}

// TestRedoHostileLogs: what a store's redo directory holds is data: a
// file that is not a log, a log whose record is torn or fails its check,
// a link, are never applied and never fail the open.
func TestRedoHostileLogs(t *testing.T) {
	ctx := context.Background()
	db, path, b, log := persistedLog(t)
	b.Close()
	head := resolve(t, db, "main")
	torn := append([]byte{}, log...)
	torn[len(torn)-3] ^= 0xff // the record's check fails: dropped
	putLog(t, path, "00000000000000000000000000000001.log", []byte("not a redo log at all, but long enough to have a header"))
	putLog(t, path, "00000000000000000000000000000002.log", torn)
	putLog(t, path, "00000000000000000000000000000003.log", log[:len(log)-1]) // torn
	putLog(t, path, "NOT-A-LOG.log", log)
	target := filepath.Join(t.TempDir(), "elsewhere.log")
	if err := os.WriteFile(target, log, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(journal.RedoDir(path), "00000000000000000000000000000004.log")); err != nil {
		t.Fatal(err)
	}
	db2, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	rec := db2.Recovered()
	if rec.Logs != 0 || len(rec.Failed) != 2 {
		t.Fatalf("recovered %+v, want nothing applied and two failures (the non-log, the link)", rec)
	}
	if got := resolve(t, db2, "main"); got.Seq != head.Seq {
		t.Fatalf("head moved to %d from %d", got.Seq, head.Seq)
	}
	if data, err := os.ReadFile(target); err != nil || !bytes.Equal(data, log) {
		t.Fatalf("the link's target changed: %v", err)
	}
	// The redo directory itself as a link is not followed.
	os.RemoveAll(journal.RedoDir(path))
	dir := t.TempDir()
	putLog(t, filepath.Join(dir, "x"), logName, log) // makes dir/x.redo/LOG
	if err := os.Symlink(journal.RedoDir(filepath.Join(dir, "x")), journal.RedoDir(path)); err != nil {
		t.Fatal(err)
	}
	db3, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if rec := db3.Recovered(); rec.Logs != 0 || len(rec.Failed) != 1 {
		t.Fatalf("recovered %+v through a linked redo directory", rec)
	}
}

// TestRedoUnloggableCommits: an update the log cannot hold (a snapshot's
// row) makes the next Persist commit instead.
func TestRedoUnloggableCommits(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	op, err := db.BeginOp(ctx, "main", "run", "test")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 1<<30)
	b.LogCloses()
	defer b.Close()
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		if err := writeFile(tx, "a", "x", 1e9); err != nil {
			return err
		}
		_, err := tx.Snapshot("mid-batch")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(); err != nil {
		t.Fatal(err)
	}
	if b.Logged() != 0 || b.Commits() != 1 {
		t.Fatalf("persist wrote %d records and %d commits, want 0 and 1", b.Logged(), b.Commits())
	}
	// The next transaction logs again.
	if err := b.Update(ctx, func(tx *journal.Tx) error { return writeFile(tx, "b", "y", 2e9) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(); err != nil {
		t.Fatal(err)
	}
	if b.Logged() != 1 || b.Commits() != 1 {
		t.Fatalf("persist wrote %d records and %d commits, want 1 and 1", b.Logged(), b.Commits())
	}
}

// TestRedoForeignLogRefused: a log another user could have written (here:
// one writable by others) is never applied, and left where it is.
func TestRedoForeignLogRefused(t *testing.T) {
	ctx := context.Background()
	db, path, b, log := persistedLog(t)
	b.Close()
	head := resolve(t, db, "main")
	// Its transaction committed, which does not matter: the refusal comes
	// before the log is read.
	putLog(t, path, logName, log)
	if err := os.Chmod(filepath.Join(journal.RedoDir(path), logName), 0o666); err != nil {
		t.Fatal(err)
	}
	db2, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if rec := db2.Recovered(); rec.Logs != 0 || len(rec.Failed) != 1 || !strings.Contains(rec.Failed[0], "writable by others") {
		t.Fatalf("recovered %+v, want the log refused", rec)
	}
	if logs := redoLogs(t, path); len(logs) != 1 || logs[0] != logName {
		t.Fatalf("redo logs: %q, want the refused log left in place", logs)
	}
	if got := resolve(t, db2, "main"); got.Seq != head.Seq {
		t.Fatalf("head moved to %d from %d", got.Seq, head.Seq)
	}
}

// TestRedoReclaimKeepsLoggedPackBytes: what a full disk's gc runs first
// (ReclaimPacks: no write, so no recovery) never frees the pack bytes a
// killed writer's redo log names: the next open still recovers the file
// they hold.
func TestRedoReclaimKeepsLoggedPackBytes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cmd, root := startRedoHelper(t, path)
	kill(t, cmd)
	rep, err := journal.ReclaimPacks(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksRemoved != 0 {
		t.Fatalf("reclaim removed %d packs a redo log names", rep.PacksRemoved)
	}
	db, err = journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	after := resolve(t, db, "main")
	if rec := db.Recovered(); rec.Logs != 1 || after.Root.String() != root {
		t.Fatalf("recovered %+v to %s, the writer had %s", rec, after.Root, root)
	}
	treeMap(t, db.Objects(), after.Root, true) // reads every file back, the packed one too
}
