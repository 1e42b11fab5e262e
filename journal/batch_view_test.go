package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// viewLookup looks name up in the root through b.View.
func viewLookup(b *journal.Batch, name string) (journal.Node, error) {
	var n journal.Node
	err := b.View(context.Background(), func(tx *journal.Tx) error {
		var err error
		n, err = tx.Lookup(journal.RootIno, []byte(name))
		return err
	})
	return n, err
}

// wantViews checks how many Views b ran on a read connection and through
// its transaction since the counts were before.
func wantViews(t *testing.T, b *journal.Batch, before [2]int64, reader, batch int64, what string) [2]int64 {
	t.Helper()
	r, bt := b.ViewStats()
	if r-before[0] != reader || bt-before[1] != batch {
		t.Fatalf("%s: views on the reader %d, through the batch %d; want %d and %d", what, r-before[0], bt-before[1], reader, batch)
	}
	return [2]int64{r, bt}
}

// A View must see every update that returned before it, committed or not:
// while the Batch's transaction holds an uncommitted change, a read on a
// connection of its own would miss it (its snapshot holds only what is
// committed). This fails if View ever reads elsewhere while the Batch
// holds a change, and if it never uses the read connection.
func TestBatchViewSeesUncommitted(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return mkdirAll(tx, "x") }) // the root is loaded
	op, err := db.BeginOp(ctx, "main", "test", "view")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 0) // commits only when told
	var views [2]int64

	// Nothing open: the reader serves it, and finds nothing.
	if _, err := viewLookup(b, "a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup before the create: %v, want ENOENT", err)
	}
	views = wantViews(t, b, views, 1, 0, "idle batch")

	// A create not yet committed: the reader's snapshot does not hold
	// it, so the View must go through the Batch and find it.
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		_, err := tx.Create(journal.RootIno, []byte("a"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	n, err := viewLookup(b, "a")
	if err != nil {
		t.Fatalf("lookup of an uncommitted create: %v", err)
	}
	views = wantViews(t, b, views, 0, 1, "uncommitted create")
	// The same holds for an unlink: the reader would still find it.
	if err := b.Update(ctx, func(tx *journal.Tx) error { return tx.Rmdir(journal.RootIno, []byte("a")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := viewLookup(b, "a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup after an uncommitted rmdir: %v, want ENOENT", err)
	}
	views = wantViews(t, b, views, 0, 1, "uncommitted rmdir")
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		var err error
		n, err = tx.Create(journal.RootIno, []byte("a"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// Committed: the reader serves it again, and sees the change.
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := viewLookup(b, "a")
	if err != nil || got.Ino != n.Ino {
		t.Fatalf("lookup after the commit: ino %d, %v; want %d", got.Ino, err, n.Ino)
	}
	views = wantViews(t, b, views, 1, 0, "committed")

	// A transaction that has only read holds nothing the reader lacks.
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		_, err := tx.Lookup(journal.RootIno, []byte("a"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := viewLookup(b, "a"); err != nil {
		t.Fatal(err)
	}
	views = wantViews(t, b, views, 1, 0, "read-only transaction open")

	// A failing update that wrote and was rolled back to its savepoint
	// still counts as a change (conservative): through the Batch.
	boom := errors.New("boom")
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		if _, err := tx.Create(journal.RootIno, []byte("ghost"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing update: %v", err)
	}
	if _, err := viewLookup(b, "ghost"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a rolled-back create: %v, want ENOENT", err)
	}
	wantViews(t, b, views, 0, 1, "after a rolled-back update")
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A View of a directory the branch has not loaded yet would write (the
// projection loads it): it runs again through the Batch, and its answer
// is the same.
func TestBatchViewLoadsThroughBatch(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		if err := mkdirAll(tx, "d/sub"); err != nil {
			return err
		}
		return writeFile(tx, "d/f", "data", 1)
	})
	s, err := db.TakeSnapshot(ctx, "main", "base")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateBranch(ctx, "side", resolve(t, db, s.ID.String())); err != nil {
		t.Fatal(err)
	}
	op, err := db.BeginOp(ctx, "side", "test", "view")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 0)
	var views [2]int64
	list := func(dir string) []string {
		t.Helper()
		var names []string
		err := b.View(ctx, func(tx *journal.Tx) error {
			names = nil
			d, err := tx.Resolve([]byte(dir))
			if err != nil {
				return err
			}
			des, err := tx.ReadDir(d.Ino)
			for _, de := range des {
				names = append(names, string(de.Name))
			}
			return err
		})
		if err != nil {
			t.Fatalf("list %q: %v", dir, err)
		}
		return names
	}
	if got := fmt.Sprint(list("d")); got != "[f sub]" {
		t.Fatalf("list d = %s", got)
	}
	// The reader stopped at its first write and the Batch loaded d (and
	// the root on the way); its transaction holds that, uncommitted.
	views = wantViews(t, b, views, 0, 1, "collapsed directory")
	list("d")
	views = wantViews(t, b, views, 0, 1, "loaded, uncommitted")
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(list("d")); got != "[f sub]" {
		t.Fatalf("list d again = %s", got)
	}
	wantViews(t, b, views, 1, 0, "loaded and committed")
}

// Views on many goroutines while updates create names: every name whose
// create returned before a View began is in what the View reads, and a
// View never runs on the reader while the Batch holds a change (the race
// detector watches the shared state).
func TestBatchViewConcurrent(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return mkdirAll(tx, "x") }) // the root is loaded
	op, err := db.BeginOp(ctx, "main", "test", "view")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Millisecond, 0)
	const names = 200
	var mu sync.Mutex
	done := 0 // names 0..done-1 were created
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				k := done
				mu.Unlock()
				if k == 0 {
					continue
				}
				name := fmt.Sprintf("n%03d", k-1)
				if _, err := viewLookup(b, name); err != nil {
					errs <- fmt.Errorf("view of %s, created before it began: %w", name, err)
					return
				}
			}
		}()
	}
	for i := 0; i < names; i++ {
		if err := b.Update(ctx, func(tx *journal.Tx) error {
			_, err := tx.Create(journal.RootIno, []byte(fmt.Sprintf("n%03d", i)), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		done = i + 1
		mu.Unlock()
		if i%20 == 0 {
			time.Sleep(3 * time.Millisecond) // let a group commit go by: the reader's turn
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	r, bt := b.ViewStats()
	if r == 0 || bt == 0 {
		t.Fatalf("views on the reader %d, through the batch %d: both routes should have served", r, bt)
	}
}
