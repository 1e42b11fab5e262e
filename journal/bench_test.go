package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// The Batch benchmarks replay, per file, the updates the overlay makes
// for one FUSE request of tar x and rm -rf, on a real store file: the
// journal's share of the mount daemon's CPU per namespace operation.
// Files go 100 to a directory, as in a source tree.

const benchFilesPerDir = 100

// cpuNow is the process's CPU time (user + system) in nanoseconds.
func cpuNow(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// startCPU resets the timer and returns a function that reports the CPU
// time per op, steadier than wall time on a shared machine.
func startCPU(b *testing.B) func() {
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow(b)
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(cpuNow(b)-c0)/float64(b.N), "cpu-ns/op")
	}
}

type benchTree struct {
	db    *journal.DB
	b     *journal.Batch
	dirs  []int64
	empty cas.ID
}

func newBenchTree(tb testing.TB, files int) *benchTree {
	tb.Helper()
	ctx := context.Background()
	db := openStore(tb)
	op, err := db.BeginOp(ctx, "main", "bench", "bench")
	if err != nil {
		tb.Fatal(err)
	}
	bt := &benchTree{db: db, b: op.NewBatch(0, 1000)}
	err = bt.b.Update(ctx, func(tx *journal.Tx) error {
		if bt.empty, _, err = tx.Objects().PutManifest(ctx, &cas.Manifest{}); err != nil {
			return err
		}
		for i := 0; i <= files/benchFilesPerDir; i++ {
			n, err := tx.Create(journal.RootIno, fmt.Appendf(nil, "d%04d", i), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
			if err != nil {
				return err
			}
			bt.dirs = append(bt.dirs, n.Ino)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := bt.b.Commit(); err != nil {
		tb.Fatal(err)
	}
	return bt
}

// do runs fn as one update of the tree's Batch and commits it.
func (bt *benchTree) do(tb testing.TB, fn func(tx *journal.Tx) error) {
	tb.Helper()
	if err := bt.b.Update(context.Background(), fn); err != nil {
		tb.Fatal(err)
	}
	if err := bt.b.Commit(); err != nil {
		tb.Fatal(err)
	}
}

func (bt *benchTree) place(i int) (int64, []byte) {
	return bt.dirs[i/benchFilesPerDir], fmt.Appendf(nil, "file%06d.go", i)
}

// create is tar x's CREATE of file i, then its close: content, the
// mode and mtime held back until then, and the commit of every close.
func (bt *benchTree) create(tb testing.TB, i int) {
	ctx := context.Background()
	dir, name := bt.place(i)
	var ino int64
	err := bt.b.Update(ctx, func(tx *journal.Tx) error {
		n, err := tx.Create(dir, name, journal.Attr{Kind: cas.EntryFile, Mode: 0o600, Content: bt.empty, MTime: 1})
		ino = n.Ino
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	err = bt.b.Update(ctx, func(tx *journal.Tx) error {
		id, st, err := tx.Objects().PutFile(ctx, bytes.NewReader(fmt.Appendf(nil, "package p // %d\n", i)))
		if err != nil {
			return err
		}
		if _, err := tx.SetAttr(ino, journal.SetMode|journal.SetMTime, journal.Attr{Mode: 0o644, MTime: 2}); err != nil {
			return err
		}
		_, err = tx.Write(ino, id, st.Size, 2, nil)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := bt.b.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkBatchCreate is one file of tar x: CREATE and its close.
func BenchmarkBatchCreate(b *testing.B) {
	bt := newBenchTree(b, b.N)
	defer startCPU(b)()
	for i := 0; i < b.N; i++ {
		bt.create(b, i)
	}
}

// benchCommitEvery is how many updates of rm -rf one commit takes: the
// overlay's Batch commits 5 ms after the first (a few hundred
// microseconds each).
const benchCommitEvery = 16

// BenchmarkBatchUnlink is one file of rm -rf: UNLINK (the overlay looks
// the name up and removes it in one update).
func BenchmarkBatchUnlink(b *testing.B) {
	bt := newBenchTree(b, b.N)
	for i := 0; i < b.N; i++ {
		bt.create(b, i)
	}
	defer startCPU(b)()
	bt.updates(b, func(i int, tx *journal.Tx) error {
		dir, name := bt.place(i)
		if _, err := tx.Lookup(dir, name); err != nil {
			return err
		}
		return tx.Unlink(dir, name)
	})
}

// updates runs fn(i) as b.N updates of the tree's Batch, committing every
// benchCommitEvery of them as the overlay's group commit does.
func (bt *benchTree) updates(b *testing.B, fn func(i int, tx *journal.Tx) error) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if err := bt.b.Update(ctx, func(tx *journal.Tx) error { return fn(i, tx) }); err != nil {
			b.Fatal(err)
		}
		if i%benchCommitEvery == benchCommitEvery-1 {
			if err := bt.b.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := bt.b.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBatchSetattr is a SETATTR of a closed file's mtime (touch, or
// a directory's mtime journaled after its entries changed).
func BenchmarkBatchSetattr(b *testing.B) {
	ctx := context.Background()
	const files = 1000
	bt := newBenchTree(b, files)
	inos := make([]int64, files)
	for i := range files {
		bt.create(b, i)
		dir, name := bt.place(i)
		if err := bt.b.Update(ctx, func(tx *journal.Tx) error {
			n, err := tx.Lookup(dir, name)
			inos[i] = n.Ino
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	defer startCPU(b)()
	bt.updates(b, func(i int, tx *journal.Tx) error {
		_, err := tx.SetAttr(inos[i%files], journal.SetMTime, journal.Attr{MTime: int64(i)})
		return err
	})
}

// BenchmarkBatchLookupMiss is a LOOKUP of a name that does not exist (the
// kernel asks before every CREATE).
func BenchmarkBatchLookupMiss(b *testing.B) {
	ctx := context.Background()
	const files = 1000
	bt := newBenchTree(b, files)
	for i := range files {
		bt.create(b, i)
	}
	defer startCPU(b)()
	for i := 0; i < b.N; i++ {
		dir, _ := bt.place(i % files)
		err := bt.b.Update(ctx, func(tx *journal.Tx) error {
			_, err := tx.Lookup(dir, []byte("absent"))
			return err
		})
		if err == nil {
			b.Fatal("lookup of an absent name succeeded")
		}
	}
	if err := bt.b.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBatchReadDir lists a directory of 10 and of 100 files (Go's
// source tree averages nine entries a directory).
func BenchmarkBatchReadDir(b *testing.B) {
	for _, files := range []int{10, benchFilesPerDir} {
		b.Run(fmt.Sprint(files), func(b *testing.B) {
			ctx := context.Background()
			bt := newBenchTree(b, files)
			for i := range files {
				bt.create(b, i)
			}
			defer startCPU(b)()
			for i := 0; i < b.N; i++ {
				err := bt.b.Update(ctx, func(tx *journal.Tx) error {
					des, err := tx.ReadDir(bt.dirs[0])
					if err == nil && len(des) != files {
						err = fmt.Errorf("%d entries", len(des))
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := bt.b.Commit(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkSnapshotTrees is the snapshot at the end of a session that
// changed every directory of a node_modules-sized tree (npm ci: 1,732
// directories, 12,000 files): Tx.Root encodes and stores every dirty
// directory's tree. Between iterations (untimed) one file of each
// directory gets a new mtime, which makes every directory dirty again.
func BenchmarkSnapshotTrees(b *testing.B) {
	const top, sub, files = 100, 16, 7
	bt := newBenchTree(b, 0)
	var first []int64 // one file of each directory
	bt.do(b, func(tx *journal.Tx) error {
		for i := range top {
			d, err := tx.Create(journal.RootIno, fmt.Appendf(nil, "pkg%03d", i), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
			if err != nil {
				return err
			}
			for j := range sub {
				s, err := tx.Create(d.Ino, fmt.Appendf(nil, "lib%02d", j), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
				if err != nil {
					return err
				}
				for k := range files {
					f, err := tx.Create(s.Ino, fmt.Appendf(nil, "index%d.js", k), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: bt.empty, MTime: 1})
					if err != nil {
						return err
					}
					if k == 0 {
						first = append(first, f.Ino)
					}
				}
			}
		}
		return nil
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bt.do(b, func(tx *journal.Tx) error {
			for _, ino := range first {
				if _, err := tx.SetAttr(ino, journal.SetMTime, journal.Attr{MTime: int64(i + 2)}); err != nil {
					return err
				}
			}
			return nil
		})
		b.StartTimer()
		bt.do(b, func(tx *journal.Tx) error {
			_, err := tx.Root()
			return err
		})
	}
}
