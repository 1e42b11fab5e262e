package workspace

import (
	"context"
	"os"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/migrations"
)

// UnchangedAt is the read-only fast path of a push (art push -m): it
// opens the existing store at path read-only and reports whether an Import
// with opts would change nothing (Unchanged), leaving the store file
// untouched. It returns false, and no error, whenever that cannot be shown
// this way - no store yet, one that needs a migration or is busy being
// created, anything changed, any error of the check: the caller then runs
// the full Import, which decides everything again and reports any real
// error itself. Only ctx's own error (the push was interrupted) is
// returned.
func UnchangedAt(ctx context.Context, path string, opts ImportOptions) (ImportStats, bool, error) {
	if path == "" {
		return ImportStats{}, false, nil
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return ImportStats{}, false, nil
	}
	db, err := journal.Open(ctx, path, journal.Options{ReadOnly: true})
	if err != nil {
		return ImportStats{}, false, nil
	}
	defer db.Close()
	if db.Schema() != migrations.Latest() {
		return ImportStats{}, false, nil // the full import migrates it first
	}
	st, ok, err := Unchanged(ctx, db, opts)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return ImportStats{}, false, cerr
		}
		return ImportStats{}, false, nil
	}
	return st, ok, nil
}
