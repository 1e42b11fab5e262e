package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/artrt/art/journal"
)

// Environment of TestHelperProcessWriter.
const (
	helperEnv       = "ART_JOURNAL_TEST_WRITER" // "1" in the helper process
	helperStoreEnv  = "ART_JOURNAL_TEST_STORE"
	helperBranchEnv = "ART_JOURNAL_TEST_BRANCH"
	helperCountEnv  = "ART_JOURNAL_TEST_COUNT"
)

// TestHelperProcessWriter is not a test: TestTwoWriterProcesses runs the
// test binary with it selected to get a second writing process.
func TestHelperProcessWriter(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv(helperCountEnv))
	if err != nil {
		t.Fatal(err)
	}
	branch := os.Getenv(helperBranchEnv)
	db, err := journal.Open(ctx, os.Getenv(helperStoreEnv), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range n {
		_, err := db.Do(ctx, branch, "run", fmt.Sprintf("write %d", i), func(tx *journal.Tx) error {
			return writeFile(tx, fmt.Sprintf("f%04d", i), fmt.Sprintf("%s %d", branch, i), int64(i))
		})
		if err != nil {
			t.Fatalf("transaction %d on %s: %v", i, branch, err)
		}
		if i%50 == 49 {
			// Reads and snapshots interleave with the other writer too.
			if _, err := db.TakeSnapshot(ctx, branch, fmt.Sprint(i)); err != nil {
				t.Fatalf("snapshot %d on %s: %v", i, branch, err)
			}
			if _, err := db.Resolve(ctx, fmt.Sprintf("%s~0", branch), branch); err != nil {
				t.Fatalf("resolve on %s: %v", branch, err)
			}
		}
	}
}

// TestTwoWriterProcesses has two processes append to two branches of one
// store at once: both finish (no SQLITE_BUSY surfaces) and both chains are
// complete.
func TestTwoWriterProcesses(t *testing.T) {
	ctx := context.Background()
	n := 300
	if testing.Short() {
		n = 60
	}
	db := openStore(t)
	for _, b := range []string{"w1", "w2"} {
		if _, err := db.CreateBranch(ctx, b, resolve(t, db, "main")); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	type proc struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	var procs []*proc
	for _, b := range []string{"w1", "w2"} {
		p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperProcessWriter$", "-test.count=1", "-test.v")}
		p.cmd.Env = append(os.Environ(), helperEnv+"=1", helperStoreEnv+"="+db.Path(), helperBranchEnv+"="+b,
			helperCountEnv+"="+strconv.Itoa(n))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	// This process writes main meanwhile.
	for i := range n / 10 {
		mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, fmt.Sprintf("m%d", i), "main", 1) })
	}
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v\n%s", i+1, err, p.out.String())
		}
		if !bytes.Contains(p.out.Bytes(), []byte("--- PASS: TestHelperProcessWriter")) {
			t.Fatalf("writer %d did not run:\n%s", i+1, p.out.String())
		}
	}
	t.Logf("2 x %d transactions in %v", n, time.Since(start).Round(time.Millisecond))

	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %+v", rep.Problems)
	}
	for _, name := range []string{"w1", "w2"} {
		b, err := db.Branch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		// The branch event, one create per transaction, a snapshot per 50.
		if got, want := b.EventCount, int64(1+n+n/50); got != want {
			t.Errorf("%s has %d events, want %d", name, got, want)
		}
		files := treeMap(t, db.Objects(), headRoot(t, db, name), true)
		if got, want := len(files), n; got != want {
			t.Errorf("%s has %d files, want %d", name, got, want)
		}
		if got, want := files[fmt.Sprintf("f%04d", n-1)], fmt.Sprintf(`file:0644:u0:g0:m%d:"%s %d"`, n-1, name, n-1); got != want {
			t.Errorf("%s last file = %s, want %s", name, got, want)
		}
	}
}

// TestConcurrentGoroutines shares one DB between goroutines writing their
// own branches and readers resolving and listing at the same time.
func TestConcurrentGoroutines(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	const writers, n = 4, 40
	for w := range writers {
		if _, err := db.CreateBranch(ctx, fmt.Sprintf("g%d", w), resolve(t, db, "main")); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, writers+1)
	for w := range writers {
		go func() {
			branch := fmt.Sprintf("g%d", w)
			for i := range n {
				_, err := db.Do(ctx, branch, "run", "w", func(tx *journal.Tx) error {
					return writeFile(tx, fmt.Sprintf("f%d", i%7), fmt.Sprint(i), int64(i))
				})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", branch, err)
					return
				}
				if i%10 == 9 {
					if _, err := db.TakeSnapshot(ctx, branch, "s"); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if _, err := db.Resolve(ctx, "g0", "main"); err != nil {
				errs <- err
				return
			}
			if _, err := db.Events(ctx, journal.EventQuery{Branch: "g1", Limit: 5}); err != nil {
				errs <- err
				return
			}
			if _, err := db.Ops(ctx, journal.LogQuery{Limit: 3}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %+v", rep.Problems)
	}
	for w := range writers {
		b, err := db.Branch(ctx, fmt.Sprintf("g%d", w))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := b.EventCount, int64(1+n+n/10); got != want {
			t.Errorf("%s has %d events, want %d", b.Name, got, want)
		}
	}
}
