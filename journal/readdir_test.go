package journal_test

import (
	"fmt"
	"testing"

	"github.com/artrt/art/journal"
)

// TestReadDirUpTo: a directory of at most max entries is listed as
// ReadDir lists it; a bigger one is not (ok false, nothing listed); an
// empty one is listed, empty.
func TestReadDirUpTo(t *testing.T) {
	db := openStore(t)
	mustDo(t, db, journal.DefaultBranch, func(tx *journal.Tx) error {
		if err := mkdirAll(tx, "d/empty"); err != nil {
			return err
		}
		for i := range 3 {
			if err := writeFile(tx, fmt.Sprintf("d/f%d", i), "x", 1); err != nil {
				return err
			}
		}
		return nil
	})
	mustDo(t, db, journal.DefaultBranch, func(tx *journal.Tx) error {
		d, err := tx.Resolve([]byte("d"))
		if err != nil {
			return err
		}
		all, err := tx.ReadDir(d.Ino)
		if err != nil {
			return err
		}
		if got, want := len(all), 4; got != want { // empty, f0, f1, f2
			t.Fatalf("ReadDir: %d entries, want %d", got, want)
		}
		for _, max := range []int{4, 5, 64} {
			des, ok, err := tx.ReadDirUpTo(d.Ino, max)
			if err != nil {
				return err
			}
			if !ok || fmt.Sprint(des) != fmt.Sprint(all) {
				t.Errorf("ReadDirUpTo(d, %d) = %v, %v; want %v, true", max, des, ok, all)
			}
		}
		for _, max := range []int{1, 3} {
			des, ok, err := tx.ReadDirUpTo(d.Ino, max)
			if err != nil {
				return err
			}
			if ok || des != nil {
				t.Errorf("ReadDirUpTo(d, %d) = %v, %v; want nil, false (4 entries)", max, des, ok)
			}
		}
		e, err := tx.Resolve([]byte("d/empty"))
		if err != nil {
			return err
		}
		des, ok, err := tx.ReadDirUpTo(e.Ino, 1)
		if err != nil {
			return err
		}
		if !ok || len(des) != 0 {
			t.Errorf("ReadDirUpTo(empty, 1) = %v, %v; want no entries, true", des, ok)
		}
		return nil
	})
}
