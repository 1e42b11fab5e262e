package journal_test

import (
	"fmt"
	"testing"

	"github.com/artrt/art/internal/walvfs"
	"github.com/artrt/art/journal"
)

// The store's writer commits through internal/walvfs: an operation's
// commit reaches the WAL in one write, not two a frame (header, page),
// and a plain connection reads what was committed.
func TestStoreCommitIsOneWALWrite(t *testing.T) {
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return mkdirAll(tx, "d") })
	before := walvfs.Read()
	for i := range 5 {
		mustDo(t, db, "main", func(tx *journal.Tx) error {
			return writeFile(tx, fmt.Sprintf("d/f%d", i), fmt.Sprintf("content %d", i), 1)
		})
	}
	after := walvfs.Read()
	writes, real, frames := after.Writes-before.Writes, after.RealWrites-before.RealWrites, after.Frames-before.Frames
	// Other tests of the package may commit meanwhile (all through the
	// VFS, one write a commit as well): at least the 5 commits' frames
	// held, at most one write for every 5 frames.
	if frames < 5*5 || real*5 > frames || writes < 2*frames {
		t.Fatalf("5 operations: SQLite wrote the WAL %d times, the VFS %d times, %d frames held; want >= 25 frames, and a write for at most 5 frames", writes, real, frames)
	}
	raw := rawSQL(t, db.Path())
	if n := count(t, raw, `SELECT count(*) FROM dentries WHERE name LIKE 'f%'`); n != 5 {
		t.Fatalf("a plain connection reads %d of the 5 files' names", n)
	}
}
