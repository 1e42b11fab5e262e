package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

// TestBatchFailedSyncKeepsWhatCommitReported is the overlay's close and
// fsync in miniature (docs/architecture.md, "Commit failure"): writers
// store a file each (its content, then its create: an update) and then
// commit (what a close does before it returns), in parallel with the
// Batch's own timed commits. The Nth pack sync before a commit fails, as
// an fdatasync of a full disk would, for that commit only. Then:
//   - every file whose Commit returned nil is in the store, byte for
//     byte, after the store is reopened;
//   - every Update and Commit after the failure fails, with the errno of
//     the failure (the injected one succeeds again: the Batch itself
//     refuses), while a read still works;
//   - every file whose create returned nil but is not in the store is
//     named by Lost.
func TestBatchFailedSyncKeepsWhatCommitReported(t *testing.T) {
	for _, n := range []int64{1, 2, 5, 17} {
		t.Run(fmt.Sprintf("sync%d", n), func(t *testing.T) { testFailedSync(t, n) })
	}
}

func testFailedSync(t *testing.T, failAt int64) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "f.db")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	op, err := db.BeginOp(ctx, "main", "test", "failed sync")
	if err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	db.syncFault = func() error {
		if syncs.Add(1) == failAt {
			return fmt.Errorf("injected fdatasync failure: %w", syscall.EIO)
		}
		return nil
	}
	b := op.NewBatch(time.Millisecond, 0)

	type file struct {
		name    string
		content []byte
	}
	var (
		mu        sync.Mutex
		committed []file              // Commit returned nil after the create
		answered  = map[string]bool{} // the create returned nil
		refused   []error
	)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(failAt)))
			for i := range 100 { // a Batch that went on after the failure stops here
				// Past cas's inline limit: the chunks go to the pack.
				f := file{name: fmt.Sprintf("g%d-%d", g, i), content: make([]byte, 64<<10+rng.IntN(64<<10))}
				for j := range f.content {
					f.content[j] = byte(rng.Uint32())
				}
				err := b.Update(ctx, func(tx *Tx) error {
					id, st, err := tx.Objects().PutFile(ctx, bytes.NewReader(f.content))
					if err != nil {
						return err
					}
					_, err = tx.Create(RootIno, []byte(f.name), Attr{Kind: cas.EntryFile, Mode: 0o644, Content: id, Size: st.Size})
					return err
				})
				if err == nil {
					mu.Lock()
					answered[f.name] = true
					mu.Unlock()
					err = b.Commit()
				}
				mu.Lock()
				if err != nil {
					refused = append(refused, err)
					mu.Unlock()
					return
				}
				committed = append(committed, f)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if syncs.Load() < failAt {
		t.Fatalf("%d syncs, the failure was injected at %d", syncs.Load(), failAt)
	}
	for _, err := range refused {
		if !errors.Is(err, ErrBatchFailed) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("a writer stopped with %v, want ErrBatchFailed and EIO", err)
		}
	}
	// The Batch stays failed, though the syncs succeed again.
	err = b.Update(ctx, func(tx *Tx) error {
		_, err := tx.Create(RootIno, []byte("after"), Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	})
	if !errors.Is(err, ErrBatchFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("an update after the failure: %v, want ErrBatchFailed and EIO", err)
	}
	if err := b.Commit(); !errors.Is(err, ErrBatchFailed) {
		t.Fatalf("a commit after the failure: %v, want ErrBatchFailed", err)
	}
	if err := b.Update(ctx, func(tx *Tx) error { _, err := tx.ReadDir(RootIno); return err }); err != nil {
		t.Fatalf("a read after the failure: %v", err)
	}
	lost, more := b.Lost()
	if more != 0 {
		t.Fatalf("%d lost paths beyond the %d named", more, len(lost))
	}
	named := map[string]bool{}
	for _, p := range lost {
		named[p] = true
	}
	if err := op.End(ctx, nil); err != nil { // other writes still work
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	if db, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	head, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := db.Objects().GetTree(ctx, head.Root)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]cas.ID{}
	for _, e := range tree.Entries {
		kept[string(e.Name)] = e.Target
	}
	for _, f := range committed {
		id, ok := kept[f.name]
		if !ok {
			t.Fatalf("%s: its commit returned nil, but the store does not hold it", f.name)
		}
		var got bytes.Buffer
		if _, err := db.Objects().ReadFile(ctx, id, &got); err != nil || !bytes.Equal(got.Bytes(), f.content) {
			t.Fatalf("%s: read back %d bytes (%v), want its %d bytes", f.name, got.Len(), err, len(f.content))
		}
	}
	for name := range answered {
		if _, ok := kept[name]; !ok && !named[name] {
			t.Fatalf("%s: its create returned nil, the store does not hold it, and Lost does not name it (lost: %q)", name, lost)
		}
	}
	// Every sync before the failing one was a commit that succeeded (the
	// test saw the Batch work before it failed). A writer's own Commit
	// may still have returned the failure: when the timer committed its
	// update first, its Commit shares the next commit, the failing one,
	// and reports that (so committed may be empty for failAt 2).
	if got := b.Commits(); got != failAt-1 {
		t.Fatalf("%d commits succeeded before sync %d failed, want %d", got, failAt, failAt-1)
	}
	rep, err := db.Verify(ctx, VerifyOptions{Rebuild: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}
