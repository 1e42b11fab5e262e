package journal_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestSnapshotCostIsChangedDirs imports 2000 files, then changes one and
// counts the tree objects the next snapshot writes: one per directory from
// the file up to the root, whatever the size of the tree. Branch creation
// and checkout load nothing but the root.
func TestSnapshotCostIsChangedDirs(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	raw := rawSQL(t, db.Path())
	trees := func() int { return count(t, raw, `SELECT count(*) FROM objects WHERE kind = ?`, int(cas.KindTree)) }

	const files = 2000
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		for i := range files {
			dir := fmt.Sprintf("d%02d/e%d", i%20, i%3)
			if i%100 == 0 {
				dir = fmt.Sprintf("d%02d/e0/deep/er", i/100)
			}
			if err := mkdirAll(tx, dir); err != nil {
				return err
			}
			if err := writeFile(tx, fmt.Sprintf("%s/f%04d", dir, i), fmt.Sprintf("file %d", i), 1); err != nil {
				return err
			}
		}
		return nil
	})
	before := trees()
	s1, err := db.TakeSnapshot(ctx, "main", "import")
	if err != nil {
		t.Fatal(err)
	}
	// 20 d*, 60 e*, 20 deep, 20 er, and the root.
	if got, want := trees()-before, 20+60+20+20+1; got != want {
		t.Fatalf("first snapshot wrote %d trees, want %d", got, want)
	}

	for _, c := range []struct {
		path  string
		depth int // directories containing it, below the root
	}{
		{"d07/e1/f1507", 2},
		{"d00/e0/deep/er/f0000", 4},
	} {
		mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, c.path, "changed "+c.path, 2) })
		before := trees()
		if _, err := db.TakeSnapshot(ctx, "main", "change"); err != nil {
			t.Fatal(err)
		}
		if got, want := trees()-before, c.depth+1; got != want {
			t.Fatalf("snapshot after changing %s wrote %d trees, want %d (depth+1)", c.path, got, want)
		}
	}
	// A snapshot of an unchanged tree writes nothing.
	before = trees()
	if _, err := db.TakeSnapshot(ctx, "main", "again"); err != nil {
		t.Fatal(err)
	}
	if got := trees() - before; got != 0 {
		t.Fatalf("snapshot of an unchanged head wrote %d trees", got)
	}

	nodes := func(branch string) int {
		b, err := db.Branch(ctx, branch)
		if err != nil {
			t.Fatal(err)
		}
		return count(t, raw, `SELECT count(*) FROM nodes WHERE branch = ?`, b.ID)
	}
	if _, err := db.CreateBranch(ctx, "side", resolve(t, db, s1.ID.String())); err != nil {
		t.Fatal(err)
	}
	if got, want := nodes("side"), 1; got != want {
		t.Fatalf("new branch has %d node rows, want %d (just the root)", got, want)
	}
	if _, err := db.Checkout(ctx, "main", resolve(t, db, s1.ID.String())); err != nil {
		t.Fatal(err)
	}
	if got, want := nodes("main"), 1; got != want {
		t.Fatalf("main after checkout has %d node rows, want %d", got, want)
	}
	if got, want := headRoot(t, db, "main"), s1.Root; got != want {
		t.Fatalf("head after checkout = %s, want %s", got.Short(), want.Short())
	}

	// Changing one file of a collapsed tree loads only its path and writes
	// depth+1 trees.
	mustDo(t, db, "side", func(tx *journal.Tx) error { return writeFile(tx, "d03/e0/f0003", "side change", 3) })
	// root + d03's 3 children + e0's files (2000/20/3, about 33) and deep
	if got := nodes("side"); got > 1+20+3+40 {
		t.Fatalf("one write on a collapsed branch loaded %d nodes", got)
	}
	before = trees()
	if _, err := db.TakeSnapshot(ctx, "side", "side"); err != nil {
		t.Fatal(err)
	}
	if got, want := trees()-before, 3; got != want {
		t.Fatalf("snapshot on side wrote %d trees, want %d", got, want)
	}
	if got, want := len(diffPaths(t, db.Objects(), s1.Root, headRoot(t, db, "side"))), 1; got != want {
		t.Fatalf("side differs from s1 in %d paths, want %d", got, want)
	}
}
