package journal_test

import (
	"fmt"
	"testing"

	"github.com/artrt/art/internal/walvfs"
	"github.com/artrt/art/journal"
)

// The store's writer commits through internal/walvfs: a commit's frames
// reach the WAL in one write, not two per frame, and a plain connection
// reads what was committed.
func TestStoreCommitsGatherWALFrames(t *testing.T) {
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return mkdirAll(tx, "d") })
	before := walvfs.Read()
	for i := range 5 {
		mustDo(t, db, "main", func(tx *journal.Tx) error {
			return writeFile(tx, fmt.Sprintf("d/f%d", i), fmt.Sprintf("content %d", i), 1)
		})
	}
	after := walvfs.Read()
	writes, real, commits := after.Writes-before.Writes, after.RealWrites-before.RealWrites, after.Commits-before.Commits
	// Other tests of the package may commit meanwhile: all through the
	// VFS, so the ratio holds whatever they add.
	if commits < 5 || real*4 > writes {
		t.Fatalf("5 operations: SQLite wrote the WAL %d times, the VFS %d times, %d commits; want at least 5 commits and a quarter of the writes or fewer", writes, real, commits)
	}
	raw := rawSQL(t, db.Path())
	if n := count(t, raw, `SELECT count(*) FROM dentries WHERE name LIKE 'f%'`); n != 5 {
		t.Fatalf("a plain connection reads %d of the 5 files' names", n)
	}
}
