package journal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// putGarbage stores n valid, unreferenced objects (as a crashed or aborted
// writer leaves them) of about size bytes each, behind the journal's back.
func putGarbage(t testing.TB, path string, n, size int, seed int64) {
	t.Helper()
	raw := rawSQL(t, path)
	objs := cas.NewStore(raw)
	r := rand.New(rand.NewSource(seed))
	for i := 0; i < n; i++ {
		b := make([]byte, size)
		r.Read(b)
		if _, _, err := objs.Put(context.Background(), cas.KindChunk, b); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
}

// allStates materializes the state after every event of every branch.
func allStates(t testing.TB, db *journal.DB) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	raw := rawSQL(t, db.Path())
	rows, err := raw.Query(`SELECT branch, seq FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type bs struct{ b, s int64 }
	var all []bs
	for rows.Next() {
		var x bs
		rows.Scan(&x.b, &x.s)
		all = append(all, x)
	}
	rows.Close()
	raw.Close()
	out := map[string]map[string]string{}
	for _, x := range all {
		root, err := db.Materialize(ctx, x.b, x.s)
		if err != nil {
			t.Fatalf("materialize %d@%d: %v", x.b, x.s, err)
		}
		out[fmt.Sprintf("%d@%d", x.b, x.s)] = treeMap(t, db.Objects(), root, true)
	}
	snaps, err := db.Snapshots(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		out["snap "+s.ID.String()] = treeMap(t, db.Objects(), s.Root, true)
	}
	return out
}

func mustVerify(t testing.TB, db *journal.DB) {
	t.Helper()
	rep, err := db.Verify(context.Background(), journal.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// history writes, overwrites and deletes files over several ops, with
// snapshots, so that old content is referenced only by events.
func history(t testing.TB, db *journal.DB, branch string, rounds int) {
	ctx := context.Background()
	for i := 0; i < rounds; i++ {
		mustDo(t, db, branch, func(tx *journal.Tx) error {
			if err := writeFile(tx, fmt.Sprintf("f%d", i%3), strings.Repeat(fmt.Sprintf("%s round %d\n", branch, i), 3000), int64(i)); err != nil {
				return err
			}
			return writeFile(tx, "same", "x", 1)
		})
		if i%2 == 1 {
			if _, err := db.TakeSnapshot(ctx, branch, fmt.Sprintf("s%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestGCRemovesGarbageKeepsEveryState(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	history(t, db, "main", 8)
	putGarbage(t, db.Path(), 200, 60000, 1)
	history(t, db, "main", 2) // garbage is not the newest object
	before := allStates(t, db)

	dry, err := db.GC(ctx, journal.GCOptions{DryRun: true})
	// At least the garbage; more when a run left superseded trees behind.
	if err != nil || dry.Removed < 200 {
		t.Fatalf("dry run: %v %+v, want >= 200 to remove", err, dry)
	}
	rep, err := db.GC(ctx, journal.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removed != dry.Removed || rep.RemovedBytes < 200*60000 {
		t.Fatalf("removed %d objects, %d bytes; want %d objects", rep.Removed, rep.RemovedBytes, dry.Removed)
	}
	if rep.FileAfter >= rep.FileBefore-10*1000*1000 {
		t.Fatalf("store file %d -> %d bytes, want at least 10 MB less", rep.FileBefore, rep.FileAfter)
	}
	if st, err := os.Stat(db.Path()); err != nil || st.Size() > rep.FileBefore-10*1000*1000 {
		t.Fatalf("store file is %d bytes after gc", st.Size())
	}
	mustVerify(t, db)
	after := allStates(t, db)
	if len(after) != len(before) {
		t.Fatalf("%d states before, %d after", len(before), len(after))
	}
	for k, want := range before {
		if d := mapDiff(want, after[k]); d != "" {
			t.Fatalf("state %s changed by gc:\n%s", k, d)
		}
	}
	// Materializing past states wrote scratch trees, which are garbage;
	// after collecting them a further gc finds nothing (and is incremental).
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err = db.GC(ctx, journal.GCOptions{})
	if err != nil || rep.Removed != 0 {
		t.Fatalf("second gc: %v %+v", err, rep)
	}
	mustVerify(t, db)
}

// A writer that stores chunks in one transaction and references them in a
// later one is protected by the grace period.
func TestGCGraceKeepsRecentUnreferenced(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	history(t, db, "main", 2)
	if _, err := db.CreateBranch(ctx, "side", resolve(t, db, "main")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	putGarbage(t, db.Path(), 5, 1000, 2)
	history(t, db, "side", 1) // new objects: the garbage is not the newest
	rep, err := db.GC(ctx, journal.GCOptions{Grace: time.Hour})
	if err != nil || rep.Removed != 0 || rep.Protected != 5 {
		t.Fatalf("gc with grace: %v %+v, want 5 protected", err, rep)
	}
	rep, err = db.GC(ctx, journal.GCOptions{})
	if err != nil || rep.Removed != 5 {
		t.Fatalf("gc without grace: %v %+v", err, rep)
	}
	mustVerify(t, db)
}

// gc running concurrently with a writer on another connection pool (as
// another process would be) loses nothing, over many rounds.
func TestGCConcurrentWriter(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	if _, err := db.CreateBranch(ctx, "other", resolve(t, db, "main")); err != nil {
		t.Fatal(err)
	}
	w, err := journal.Open(ctx, db.Path(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	i := 0
	for round := 0; round < 25; round++ {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 4; k++ {
				i++
				if _, err := w.Do(ctx, "other", "run", "writer", func(tx *journal.Tx) error {
					return writeFile(tx, fmt.Sprintf("w%d", i%5), strings.Repeat(fmt.Sprintf("writer %d\n", i), 2000), int64(i))
				}); err != nil {
					t.Errorf("writer: %v", err)
					return
				}
			}
		}()
		putGarbage(t, db.Path(), 3, 5000, int64(100+round))
		if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		mustVerify(t, db) // verify itself wants a quiet store
	}
	allStates(t, db) // every state still materializes
	mustVerify(t, db)
}

// Once a store is in auto_vacuum=INCREMENTAL mode, a gc that frees a small
// part of it returns the pages with incremental_vacuum.
func TestGCIncrementalVacuumShrinks(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	r := rand.New(rand.NewSource(3))
	// Files under 1 MiB: their chunks stay inline in the store file
	// (larger content would go to a pack, leaving the file small).
	for i := range 10 {
		live := make([]byte, 900<<10)
		r.Read(live)
		mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, fmt.Sprint("big", i), string(live), 1) })
	}
	putGarbage(t, db.Path(), 20, 50000, 4)
	history(t, db, "main", 1)
	if rep, err := db.GC(ctx, journal.GCOptions{}); err != nil || rep.Vacuum != "full" {
		t.Fatalf("first gc: %v %+v", err, rep)
	}
	putGarbage(t, db.Path(), 30, 50000, 5)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "new", "new", 1) })
	rep, err := db.GC(ctx, journal.GCOptions{})
	if err != nil || rep.Vacuum != "incremental" || rep.Removed < 30 {
		t.Fatalf("second gc: %v %+v", err, rep)
	}
	if rep.FileAfter > rep.FileBefore-1000*1000 {
		t.Fatalf("store file %d -> %d bytes, want >= 1 MB less", rep.FileBefore, rep.FileAfter)
	}
	mustVerify(t, db)
}

// A pull stores what it lacks in one transaction and moves the branch in
// another. If a gc collects an old, unreferenced object the receive found
// present in between, the move must refuse instead of publishing a state
// with a hole; after receiving again it succeeds and the state is whole.
func TestMoveBranchRefusesAfterGC(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	content := []byte("content an aborted transfer left behind")
	// An old orphan: stored, referenced by nothing, older than any grace.
	raw := rawSQL(t, db.Path())
	if _, _, err := cas.NewStore(raw).Put(ctx, cas.KindChunk, content); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	receive := func() cas.ID {
		var root cas.ID
		err := db.ReceiveObjects(ctx, func(objs *cas.Store) error {
			m, _, err := objs.PutFile(ctx, strings.NewReader(string(content)))
			if err != nil {
				return err
			}
			root, _, err = objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{{Name: []byte("f"), Kind: cas.EntryFile, Mode: 0o644, Size: int64(len(content)), Target: m}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return root
	}
	gen, err := db.GCGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root := receive() // deduplicates every chunk against the orphan
	rep, err := db.GC(ctx, journal.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removed == 0 {
		t.Fatalf("gc removed nothing: %+v", rep)
	}
	if _, err := db.MoveBranch(ctx, "pulled", cas.ID{}, root, "pull", "pull", gen); !errors.Is(err, journal.ErrGCRaced) {
		t.Fatalf("move after a gc: %v, want ErrGCRaced", err)
	}
	if _, err := db.Branch(ctx, "pulled"); !errors.Is(err, journal.ErrBranchNotFound) {
		t.Fatalf("a refused move created the branch: %v", err)
	}
	gen, err = db.GCGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again := receive(); again != root {
		t.Fatalf("root changed: %s vs %s", again.Short(), root.Short())
	}
	if _, err := db.MoveBranch(ctx, "pulled", cas.ID{}, root, "pull", "pull", gen); err != nil {
		t.Fatal(err)
	}
	if got := treeMap(t, db.Objects(), headRoot(t, db, "pulled"), true); len(got) != 1 {
		t.Fatalf("pulled state: %v", got)
	}
	mustVerify(t, db)
}
