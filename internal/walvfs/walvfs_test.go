package walvfs_test

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/internal/walvfs"
	_ "github.com/mattn/go-sqlite3"
)

// childEnv names the store a re-executed test binary writes and then
// kills itself over (see TestMain).
const childEnv = "ART_WALVFS_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		mode, path, _ := strings.Cut(spec, ":")
		if err := child(mode, path); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		// What the VFS still held would die here with the process.
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	os.Exit(m.Run())
}

// open opens path with the VFS (or SQLite's own when plain), in WAL mode
// with synchronous=NORMAL as art's stores are.
func open(t testing.TB, path string, plain bool, extra url.Values) *sql.DB {
	db, err := openErr(path, plain, extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openErr(path string, plain bool, extra url.Values) (*sql.DB, error) {
	if err := walvfs.Register(); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_busy_timeout", "10000")
	if !plain {
		q.Set("vfs", walvfs.Name)
	}
	for k, v := range extra {
		q[k] = v
	}
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// newStore makes a store in a temporary directory, opens it through the
// VFS with extra's options and creates table t (k, v): its path and
// connection.
func newStore(t *testing.T, extra url.Values) (string, *sql.DB) {
	path := filepath.Join(t.TempDir(), "s.db")
	db := open(t, path, false, extra)
	mustExec(t, db, `CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)`)
	return path, db
}

// spills are the options of a connection whose page cache is 10 pages:
// a transaction of a few rows spills frames to the WAL before its commit.
func spills() url.Values { return url.Values{"_cache_size": {"10"}} }

// A commit's frames reach the file in one write, and another connection
// (SQLite's own VFS) reads what it committed.
func TestCommitIsOneWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db := open(t, path, false, nil)
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB); CREATE INDEX t_v ON t (v)`); err != nil {
		t.Fatal(err)
	}
	before := walvfs.Read()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		// ~3 KB rows: about a page each in the table and in the index.
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, i, strings.Repeat(string(rune('a'+i)), 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	d := delta(before)
	// Two writes a frame by SQLite, every frame held, one write.
	if d.Writes < 20 || d.Frames != d.Writes/2 || d.RealWrites != 1 || d.Runs != 1 {
		t.Fatalf("a 10-row commit: %+v; want >= 20 writes by SQLite, writes/2 frames held, one write by the VFS", d)
	}
	other := open(t, path, true, nil)
	var n int
	var sum int64
	if err := other.QueryRow(`SELECT count(*), sum(length(v)) FROM t`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 10 || sum != 30000 {
		t.Fatalf("read back %d rows of %d bytes, want 10 of 30000", n, sum)
	}
}

func delta(before walvfs.Stats) walvfs.Stats {
	a := walvfs.Read()
	return walvfs.Stats{Writes: a.Writes - before.Writes, RealWrites: a.RealWrites - before.RealWrites,
		Frames: a.Frames - before.Frames, Runs: a.Runs - before.Runs, Discarded: a.Discarded - before.Discarded}
}

// check fails t unless every connection passes integrity_check and reads
// the rows of t as want (key -> value).
func check(t *testing.T, want map[int]string, dbs ...*sql.DB) {
	t.Helper()
	for i, db := range dbs {
		var ok string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			t.Fatalf("connection %d: integrity_check: %q, %v", i, ok, err)
		}
		rows, err := db.Query(`SELECT k, v FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]string{}
		for rows.Next() {
			var k int
			var v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			got[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if len(got) != len(want) {
			t.Fatalf("connection %d: %d rows, want %d", i, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("connection %d: row %d is %.20q (%d bytes), want %.20q (%d bytes)", i, k, got[k], len(got[k]), v, len(v))
			}
		}
	}
}

// mustExec runs statements on db (or tx), failing t on an error.
func mustExec(t *testing.T, db interface {
	Exec(string, ...any) (sql.Result, error)
}, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// A writer whose transaction spilled frames to the WAL and then rolled
// back leaves nothing behind: another connection's commit at the same
// place in the WAL is kept, and the first writer goes on over it. (A
// version that held a transaction's frames until its commit wrote the
// rolled-back ones later, over the other writer's: "file is not a
// database" at the first writer's next statement.)
func TestRollbackAfterSpillLeavesNothingHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	extra := url.Values{}
	extra.Set("_cache_size", "10") // pages: the transaction spills
	a := open(t, path, false, extra)
	if _, err := a.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	before := walvfs.Read()
	for i := range 25 {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, i, strings.Repeat("a", 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if walvfs.Read().Writes == before.Writes {
		t.Fatal("the transaction spilled nothing to the WAL: the test does not test")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	b := open(t, path, true, nil)
	for i := range 40 {
		if _, err := b.Exec(`INSERT INTO t VALUES (?, ?)`, 100+i, strings.Repeat("b", 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Exec(`INSERT INTO t VALUES (1000, 'c')`); err != nil {
		t.Fatalf("the first writer after the other's commits: %v", err)
	}
	for _, db := range []*sql.DB{a, b, open(t, path, true, nil)} {
		var ok string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			t.Fatalf("integrity_check: %q, %v", ok, err)
		}
		var n int
		var bs int64
		if err := db.QueryRow(`SELECT count(*), coalesce(sum(length(v)), 0) FROM t WHERE v LIKE 'b%'`).Scan(&n, &bs); err != nil {
			t.Fatal(err)
		}
		if n != 40 || bs != 40*3000 {
			t.Fatalf("the other writer's rows read back as %d of %d bytes, want 40 of %d", n, bs, 40*3000)
		}
	}
}

// child writes the store at path by mode, then TestMain kills it:
//   - commits: 10 commits of a row each, one write each, the WAL never
//     checkpointed, so what is read back is the frames the VFS wrote;
//   - big: one transaction far over SQLite's page
//     cache (spilled frames, pages rewritten in place, checksums
//     rewritten), then a small commit after it.
func child(mode, path string) error {
	extra := url.Values{}
	extra.Set("_cache_size", "10") // pages: a big transaction spills
	db, err := openErr(path, false, extra)
	if err != nil {
		return err
	}
	if _, err := db.Exec(`PRAGMA wal_autocheckpoint=0`); err != nil {
		return err
	}
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB); CREATE TABLE c (n INTEGER)`); err != nil {
		return err
	}
	if _, err := db.Exec(`INSERT INTO c VALUES (0)`); err != nil {
		return err
	}
	switch mode {
	case "commits":
		for i := range 10 {
			before := walvfs.Read()
			tx, err := db.Begin()
			if err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, i, strings.Repeat("x", 1000)); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE c SET n = n + 1`); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			// One write a commit, so the kill tests the held frames.
			if d := delta(before); d.RealWrites != 1 || d.Runs != 1 {
				return fmt.Errorf("commit %d: %+v, want one write", i, d)
			}
		}
	case "big":
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for i := range 2000 {
			if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, i, strings.Repeat("y", 1000)); err != nil {
				return err
			}
		}
		// Every page again, in the same transaction, after they spilled.
		if _, err := tx.Exec(`UPDATE t SET v = upper(v)`); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE c SET n = 2000`); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if _, err := db.Exec(`INSERT INTO t VALUES (2000, 'Y')`); err != nil {
			return err
		}
		if _, err := db.Exec(`UPDATE c SET n = n + 1`); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

// A commit is in the file when COMMIT returns: a process killed right
// after its last commit loses none of them, and the store is intact.
func TestKilledAfterCommitKeepsEverything(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		rows       int
		sum        int64
		wantUpper  bool
		wantCommit int
	}{
		{"commits", 10, 10 * 1000, false, 10},
		{"big", 2001, 2000*1000 + 1, true, 2001},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+tc.mode+":"+path)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v, want killed by SIGKILL; output:\n%s", err, out)
			}
			// The commits are in the WAL (never checkpointed): what is
			// read back comes from the frames the VFS wrote.
			if st, err := os.Stat(path + "-wal"); err != nil || st.Size() == 0 {
				t.Fatalf("WAL after the kill: %v, %v; want a non-empty file", st, err)
			}
			db := open(t, path, true, nil)
			var ok string
			if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
				t.Fatalf("integrity_check: %q, %v", ok, err)
			}
			var n, c int
			var sum int64
			if err := db.QueryRow(`SELECT count(*), sum(length(v)), (SELECT n FROM c) FROM t`).Scan(&n, &sum, &c); err != nil {
				t.Fatal(err)
			}
			if n != tc.rows || sum != tc.sum || c != tc.wantCommit {
				t.Fatalf("after the kill: %d rows of %d bytes, counter %d; want %d, %d, %d", n, sum, c, tc.rows, tc.sum, tc.wantCommit)
			}
			if tc.wantUpper {
				var lower int
				if err := db.QueryRow(`SELECT count(*) FROM t WHERE v GLOB '*y*'`).Scan(&lower); err != nil || lower != 0 {
					t.Fatalf("rows left as first written: %d, %v; want 0 (the in-transaction update lost)", lower, err)
				}
			}
		})
	}
}

// Two writers through the VFS, each with a cache small enough to spill,
// take turns: one spills a transaction and rolls it back, the other
// commits over the same WAL offsets, and the other way round, with
// checkpoints between some rounds. Every commit is kept, no rolled-back
// row shows, and the store is intact for both and for a plain reader.
func TestWritersAlternateSpillRollbackAndCommit(t *testing.T) {
	path, a := newStore(t, spills())
	b := open(t, path, false, spills())
	want := map[int]string{}
	before := walvfs.Read()
	for round := range 6 {
		w, other := a, b
		if round%2 == 1 {
			w, other = b, a
		}
		tx, err := w.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 25 {
			mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, 10000*(round+1)+i, strings.Repeat("r", 3000))
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx, err = other.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			k, v := 100*round+i, strings.Repeat(fmt.Sprint(round), 1000+i)
			mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, k, v)
			want[k] = v
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// The writer that rolled back writes after the other's commit.
		k, v := 100*round+50, "after"
		mustExec(t, w, `INSERT INTO t VALUES (?, ?)`, k, v)
		want[k] = v
		if round == 3 {
			mustExec(t, a, `PRAGMA wal_checkpoint(RESTART)`)
		}
	}
	if d := delta(before); d.Frames == 0 || d.Discarded == 0 {
		t.Fatalf("counters %+v: want frames held and some discarded at a rollback (the test does not test)", d)
	}
	check(t, want, a, b, open(t, path, true, nil))
}

// A savepoint rolled back after its statements spilled frames, then more
// writes (spilling over the rolled-back frames, at offsets before the
// end of what was written) and a commit: the commit has exactly what was
// not rolled back. The savepoint is taken at the transaction's start
// (its spilled frames all undone) and after some spilled rows.
func TestSavepointRollbackAfterSpill(t *testing.T) {
	for _, first := range []int{0, 20} {
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			path, db := newStore(t, spills())
			want := map[int]string{}
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for i := range first {
				v := strings.Repeat("a", 3000)
				mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, i, v)
				want[i] = v
			}
			mustExec(t, tx, `SAVEPOINT s`)
			before := walvfs.Read()
			for i := range 25 {
				mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, 1000+i, strings.Repeat("s", 3000))
			}
			if first > 0 {
				mustExec(t, tx, `UPDATE t SET v = 'changed' WHERE k < 5`)
			}
			if walvfs.Read().Writes == before.Writes {
				t.Fatal("the savepoint spilled nothing: the test does not test")
			}
			mustExec(t, tx, `ROLLBACK TO s`)
			mustExec(t, tx, `RELEASE s`)
			for i := range 25 {
				v := strings.Repeat("c", 2900+i)
				mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, 2000+i, v)
				want[2000+i] = v
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			check(t, want, db, open(t, path, true, nil))
		})
	}
}

// The same pages written again and again in one transaction after they
// spilled: SQLite reads a spilled page back from the WAL and overwrites
// its frame in place (the page alone, at an earlier offset), and
// rewrites the checksums at the commit. With a working set a few pages
// over the cache, the frames read back and overwritten are among those
// still held. The last values win.
func TestFrameOverwrittenInPlace(t *testing.T) {
	path, db := newStore(t, spills())
	want := map[int]string{}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	// A row a page: 14 pages and the tree's root.
	for i := range 14 {
		mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, i, strings.Repeat("a", 3000))
	}
	before := walvfs.Read()
	for pass := range 6 {
		for i := range 14 {
			v := strings.Repeat(fmt.Sprint(pass), 3000-i)
			mustExec(t, tx, `UPDATE t SET v = ? WHERE k = ?`, v, i)
			want[i] = v
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// In place: SQLite's writes of a page alone, more than the frames
	// it wrote whole would make (two writes a frame).
	if d := delta(before); d.Writes <= 2*d.Frames {
		t.Fatalf("counters %+v: no page was written in place: the test does not test", d)
	}
	check(t, want, db, open(t, path, true, nil))
}

// Checkpoints of every kind between commits, so that the WAL restarts
// at frame 1 (its header written again at offset 0) and is truncated:
// every commit is kept, and a commit after a restart is two writes (the
// WAL's header, then the frames).
func TestCheckpointsRestartTheWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db := open(t, path, false, nil)
	reader := open(t, path, true, nil)
	mustExec(t, db, `PRAGMA wal_autocheckpoint=0`)
	mustExec(t, db, `CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)`)
	want := map[int]string{}
	k := 0
	commit := func() walvfs.Stats {
		t.Helper()
		before := walvfs.Read()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			v := strings.Repeat(fmt.Sprint(k%10), 1500)
			mustExec(t, tx, `INSERT INTO t VALUES (?, ?)`, k, v)
			want[k] = v
			k++
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return delta(before)
	}
	for round, mode := range []string{"PASSIVE", "RESTART", "TRUNCATE", "PASSIVE", "TRUNCATE", "RESTART"} {
		for range 3 {
			if d := commit(); d.RealWrites > 2 || d.Runs != 1 {
				t.Fatalf("round %d: a commit: %+v; want one run, at most one other write (the WAL header)", round, d)
			}
		}
		check(t, want, reader)
		mustExec(t, db, `PRAGMA wal_checkpoint(`+mode+`)`)
		if mode == "TRUNCATE" {
			if st, err := os.Stat(path + "-wal"); err != nil || st.Size() != 0 {
				t.Fatalf("WAL after a TRUNCATE checkpoint: %v, %v; want empty", st, err)
			}
		}
		if mode != "PASSIVE" {
			// The next commit restarts the WAL: its header, then frames
			// from frame 1.
			d := commit()
			if d.RealWrites != 2 || d.Runs != 1 {
				t.Fatalf("round %d: the commit after a %s checkpoint: %+v; want the WAL header and one run", round, mode, d)
			}
			st, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			if mode == "TRUNCATE" && st.Size() != 32+int64(d.Frames)*(4096+24) {
				t.Fatalf("WAL after its restart: %d bytes, want 32 + %d frames", st.Size(), d.Frames)
			}
		}
	}
	check(t, want, db, reader, open(t, path, true, nil))
}

// A failed write of the held frames fails the COMMIT; the store reads as
// at the previous commit (here and for a plain connection), and the next
// transaction on the same connection commits.
func TestFailedRunWriteFailsTheCommit(t *testing.T) {
	path, db := newStore(t, nil)
	want := map[int]string{1: strings.Repeat("1", 5000)}
	mustExec(t, db, `INSERT INTO t VALUES (1, ?)`, want[1])
	walvfs.FailRun(1)
	t.Cleanup(func() { walvfs.FailRun(0) })
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, `INSERT INTO t VALUES (2, ?)`, strings.Repeat("2", 5000))
	mustExec(t, tx, `UPDATE t SET v = 'lost' WHERE k = 1`)
	if err := tx.Commit(); err == nil || !strings.Contains(err.Error(), "disk I/O error") {
		t.Fatalf("COMMIT with its frames' write failing: %v, want a disk I/O error", err)
	}
	tx.Rollback()
	check(t, want, db, open(t, path, true, nil))
	want[3] = strings.Repeat("3", 5000)
	mustExec(t, db, `INSERT INTO t VALUES (3, ?)`, want[3])
	check(t, want, db, open(t, path, true, nil))
}

// In exclusive locking mode SQLite takes no shared-memory locks, so the
// VFS never sees the WAL write lock and holds nothing: each write goes
// through as it comes, and the store is intact.
func TestExclusiveModeHoldsNothing(t *testing.T) {
	path, db := newStore(t, url.Values{"_locking_mode": {"EXCLUSIVE"}})
	before := walvfs.Read()
	want := map[int]string{}
	for i := range 5 {
		want[i] = strings.Repeat("x", 3000)
		mustExec(t, db, `INSERT INTO t VALUES (?, ?)`, i, want[i])
	}
	if d := delta(before); d.Writes == 0 || d.Frames != 0 || d.RealWrites != d.Writes {
		t.Fatalf("exclusive mode: %+v; want every write through, none held", d)
	}
	check(t, want, db)
	db.Close()
	check(t, want, open(t, path, true, nil))
}

// On a file without powersafe overwrite SQLite pads a commit to a sector
// under synchronous=FULL, and may split a write at the sync point: the
// VFS holds nothing there, and the store is intact.
func TestNoPowersafeOverwriteHoldsNothing(t *testing.T) {
	path, db := newStore(t, url.Values{"psow": {"0"}, "_synchronous": {"FULL"}})
	before := walvfs.Read()
	want := map[int]string{}
	for i := range 5 {
		want[i] = strings.Repeat("p", 3000+i)
		mustExec(t, db, `INSERT INTO t VALUES (?, ?)`, i, want[i])
	}
	if d := delta(before); d.Writes == 0 || d.Frames != 0 || d.RealWrites != d.Writes {
		t.Fatalf("psow=0: %+v; want every write through, none held", d)
	}
	check(t, want, db, open(t, path, true, nil))
}
