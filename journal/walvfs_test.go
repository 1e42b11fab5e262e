package journal_test

import (
	"fmt"
	"testing"

	"github.com/artrt/art/internal/walvfs"
	"github.com/artrt/art/journal"
)

// The store's writer commits through internal/walvfs: a WAL frame
// reaches the file in one write, not two (header, page), and a plain
// connection reads what was committed.
func TestStoreWritesWALFramesWhole(t *testing.T) {
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
	// Other tests of the package may commit meanwhile: all through the
	// VFS, so the counts hold whatever they add. A whole frame is two of
	// SQLite's writes in one; a commit of n frames is n + 1 writes.
	if frames < 5 || writes != real+frames || real*10 > writes*6 {
		t.Fatalf("5 operations: SQLite wrote the WAL %d times, the VFS %d times, %d frames whole; want writes = real + frames and at most 60%% of them real", writes, real, frames)
	}
	raw := rawSQL(t, db.Path())
	if n := count(t, raw, `SELECT count(*) FROM dentries WHERE name LIKE 'f%'`); n != 5 {
		t.Fatalf("a plain connection reads %d of the 5 files' names", n)
	}
}
