package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestSnapshotListsAhead: a snapshot lists the children of dirty
// subdirectories ahead, many directories a query (computeRoot). Whatever
// the windows - none (a query a directory, as before), the default, or
// windows whose rows exceed the bound and are halved down to a query a
// directory - the same changes give the same tree, bit for bit, holding
// every path: a wide directory of 100 subdirectories with 60 files each,
// every tenth empty, every seventh with a deeper chain, then a second
// snapshot after a change in every third subdirectory only.
func TestSnapshotListsAhead(t *testing.T) {
	build := func(t *testing.T) (first, second cas.ID, paths int) {
		db := openStore(t)
		snap := func(change func(tx *journal.Tx) error) cas.ID {
			var root cas.ID
			mustDo(t, db, "main", func(tx *journal.Tx) error {
				if err := change(tx); err != nil {
					return err
				}
				s, err := tx.Snapshot("test")
				root = s.Root
				return err
			})
			return root
		}
		first = snap(func(tx *journal.Tx) error {
			for i := range 100 {
				dir := fmt.Sprintf("wide/s%03d", i)
				if err := mkdirAll(tx, dir); err != nil {
					return err
				}
				if i%10 == 9 {
					continue // empty
				}
				if i%7 == 0 {
					if err := mkdirAll(tx, dir+"/deep/er"); err != nil {
						return err
					}
					if err := writeFile(tx, dir+"/deep/er/f", "deep "+dir, 5); err != nil {
						return err
					}
				}
				for j := range 60 {
					if err := writeFile(tx, fmt.Sprintf("%s/f%02d", dir, j), fmt.Sprintf("%d/%d", i, j), int64(j)); err != nil {
						return err
					}
				}
			}
			return writeFile(tx, "top", "top", 1)
		})
		second = snap(func(tx *journal.Tx) error {
			for i := 0; i < 100; i += 3 {
				if i%10 == 9 {
					continue
				}
				if err := writeFile(tx, fmt.Sprintf("wide/s%03d/f00", i), "changed", 7); err != nil {
					return err
				}
			}
			return nil
		})
		return first, second, len(treeMap(t, db.Objects(), second, true))
	}
	wantPaths := 1 + 1 + 100 + 90*60 + 14*3 // top, wide, subdirectories, files, deep/er/f under 14 of them
	var want [2]cas.ID
	for _, c := range []struct {
		name                    string
		dirs, rows, held        int
		lists, tooBig, heldFull bool // listings ahead made, too big, not made for what was held
	}{
		{"a query a directory", 1, 0, 0, false, false, false},
		{"default windows", 64, 4096, 0, true, false, false},
		{"windows halved", 64, 1000, 0, true, true, false},
		{"small windows, most too big", 4, 10, 0, true, true, false},
		{"little held ahead", 8, 4096, 100, true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer journal.SetRootPrefetch(c.dirs, c.rows, c.held)()
			lists0, tooBig0, full0 := journal.RootAheadCounts()
			first, second, paths := build(t)
			lists, tooBig, full := journal.RootAheadCounts()
			if (lists > lists0) != c.lists || (tooBig > tooBig0) != c.tooBig || (full > full0) != c.heldFull {
				t.Errorf("%d listings ahead, %d too big, %d not made for what was held; want some: %v, %v, %v",
					lists-lists0, tooBig-tooBig0, full-full0, c.lists, c.tooBig, c.heldFull)
			}
			if paths != wantPaths {
				t.Errorf("second snapshot holds %d paths, want %d", paths, wantPaths)
			}
			if first == second {
				t.Errorf("the second snapshot's tree is the first's")
			}
			if want[0].IsZero() {
				want = [2]cas.ID{first, second}
				return
			}
			if first != want[0] || second != want[1] {
				t.Errorf("trees %s, %s; a query a directory made %s, %s", first.Short(), second.Short(), want[0].Short(), want[1].Short())
			}
		})
	}
}

// TestSnapshotSecondNameIsCorrupt: a directory with a second name in
// another dirty directory (a corrupt projection: the row added behind the
// journal's back) is ErrCorrupt, with or without listings ahead: a listing
// read before the walk stored the directory holds it dirty, one read after
// holds it clean, and both are the same directory reached twice.
func TestSnapshotSecondNameIsCorrupt(t *testing.T) {
	for _, c := range []struct {
		name       string
		dirs, rows int
	}{
		{"a query a directory", 1, 0},
		{"default windows", 64, 4096},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer journal.SetRootPrefetch(c.dirs, c.rows, 0)()
			db := openStore(t)
			mustDo(t, db, journal.DefaultBranch, func(tx *journal.Tx) error {
				if err := mkdirAll(tx, "p1/x"); err != nil {
					return err
				}
				return mkdirAll(tx, "p2")
			})
			headRoot(t, db, journal.DefaultBranch)
			mustDo(t, db, journal.DefaultBranch, func(tx *journal.Tx) error {
				if err := writeFile(tx, "p1/x/f", "x", 1); err != nil {
					return err
				}
				return writeFile(tx, "p2/g", "g", 1)
			})
			raw := rawSQL(t, db.Path())
			defer raw.Close()
			if _, err := raw.Exec(`INSERT INTO dentries (branch, parent, name, ino)
				SELECT x.branch, p2.ino, CAST('y' AS BLOB), x.ino FROM dentries x, dentries p2
				WHERE x.name = CAST('x' AS BLOB) AND p2.name = CAST('p2' AS BLOB)`); err != nil {
				t.Fatal(err)
			}
			_, err := db.Head(context.Background(), journal.DefaultBranch)
			if !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") {
				t.Errorf("head of a projection with a directory named twice: %v, want ErrCorrupt", err)
			}
		})
	}
}
