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

// A commit's frames reach the file a write each (header and page
// together; the commit frame's header alone), and another connection
// (SQLite's own VFS) reads what it committed.
func TestFrameIsOneWrite(t *testing.T) {
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
	after := walvfs.Read()
	writes, real, frames := after.Writes-before.Writes, after.RealWrites-before.RealWrites, after.Frames-before.Frames
	// Two writes a frame by SQLite; one by the VFS, and two for the
	// commit frame.
	if writes < 20 || frames != writes/2-1 || real != frames+2 {
		t.Fatalf("a 10-row commit: SQLite wrote %d times, the VFS %d times, %d frames whole; want >= 20, frames + 2, writes/2 - 1", writes, real, frames)
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
//   - commits: 10 commits of a row each, the WAL never checkpointed, so
//     what is read back is the frames the VFS wrote;
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
