package mergeop

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"path/filepath"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// BenchmarkMergeDisjointHalves: two branches of n files that changed
// disjoint halves, merged in process (the bench section "merge" times the
// whole art merge process).
func BenchmarkMergeDisjointHalves(b *testing.B) {
	ctx := context.Background()
	const n = 10000
	db, err := journal.Open(ctx, filepath.Join(b.TempDir(), "s.db"), journal.Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	name := func(i int) string { return fmt.Sprintf("ws/d%03d/f%03d.txt", i/100, i%100) }
	write := func(branch string, from, to int, tag string) {
		_, err := db.Do(ctx, branch, "bench", "write", func(tx *journal.Tx) error {
			for i := from; i < to; i++ {
				p := name(i)
				data := fmt.Appendf(nil, "file %d %s\n", i, tag)
				id, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(data))
				if err != nil {
					return err
				}
				if n, err := tx.Resolve([]byte(p)); err == nil {
					if _, err := tx.Write(n.Ino, id, int64(len(data)), 2, nil); err != nil {
						return err
					}
					continue
				}
				parent := int64(journal.RootIno)
				for _, d := range []string{"ws", path.Dir(p)} {
					dn, err := tx.Resolve([]byte(d))
					if err != nil {
						if dn, err = tx.Create(parent, []byte(path.Base(d)), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
							return err
						}
					}
					parent = dn.Ino
				}
				if _, err := tx.Create(parent, []byte(path.Base(p)), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: id, Size: int64(len(data)), MTime: 1}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	write("main", 0, n, "base")
	s0, err := db.TakeSnapshot(ctx, "main", "base")
	if err != nil {
		b.Fatal(err)
	}
	base := journal.State{BranchID: s0.BranchID, Branch: s0.Branch, Seq: s0.Seq, Root: s0.Root, Snapshot: s0.ID}
	for _, br := range []string{"a", "b"} {
		if _, err := db.CreateBranch(ctx, br, base); err != nil {
			b.Fatal(err)
		}
	}
	write("a", 0, n/2, "a")
	write("b", n/2, n, "b")
	src, err := db.Head(ctx, "b")
	if err != nil {
		b.Fatal(err)
	}
	ahead, err := db.Head(ctx, "a")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		// Each merge into a fresh branch at a's head.
		b.StopTimer()
		into := fmt.Sprintf("a%d", i)
		if _, err := db.CreateBranch(ctx, into, ahead); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := Merge(ctx, db, Options{Source: src, SourceName: "b", Into: into})
		if err != nil || len(res.Merged) != n/2 {
			b.Fatalf("merge: %v, %d merged", err, len(res.Merged))
		}
	}
}
