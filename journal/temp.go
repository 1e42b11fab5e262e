package journal

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"
)

// TempPrefix starts the names of temporary branches (a read-only mount of a
// past state). ValidBranchName refuses it, so users cannot collide with
// them, and listings hide them.
const TempPrefix = "."

// IsTemp reports whether a branch name is a temporary branch.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// CreateTempBranch makes a hidden branch at state from, O(1). The caller
// deletes it with DeleteBranch when done; one left behind by a crash is
// harmless (hidden, and its history stays valid).
func (db *DB) CreateTempBranch(ctx context.Context, from State) (Branch, error) {
	name := fmt.Sprintf("%stmp-%d-%d", TempPrefix, os.Getpid(), time.Now().UnixNano())
	var b Branch
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		b, err = db.createBranchTx(ctx, tx, name, from, "temporary branch at "+describeState(from))
		return err
	})
	return b, err
}
