package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Sync makes every transaction committed so far durable, whatever the
// durability setting: in WAL mode a commit is durable once the -wal file
// is on disk, so this is one fsync of it (fsync(2) for the overlay).
func (db *DB) Sync() error {
	f, err := os.Open(db.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // checkpointed and removed: everything is in the main file
	}
	if err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	return nil
}
