package journal

import (
	"context"
	"fmt"
)

// View runs fn on a Tx at the head of branch inside one read transaction:
// every read fn makes sees the same state, while other processes go on
// writing. It is for deciding, without writing, whether a write is needed
// at all (a push that finds nothing changed). Nothing fn does is kept: a
// write fails (the reader connections are query-only, as is a store opened
// ReadOnly), and so does reading a part of the branch whose projection
// would have to be written first (a collapsed directory, a live tree not
// yet encoded). View takes no write lock and records no op.
func (db *DB) View(ctx context.Context, branch string, fn func(*Tx) error) error {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	b, err := branchByName(ctx, tx, branch)
	if err != nil {
		return err
	}
	op := &Op{db: db, BranchID: b.ID, Branch: b.Name, Kind: "view", BeforeSeq: b.HeadSeq}
	t, err := op.openTx(ctx, tx)
	if err != nil {
		return err
	}
	defer t.p.close()
	return fn(t)
}

// HeadSnapshot returns the snapshot at the branch's head, and false if
// anything happened on the branch since its last snapshot (or it has
// none).
func (t *Tx) HeadSnapshot() (Snapshot, bool, error) {
	ss, err := t.db.snapshotsQ(t.p.ctx, t.p.tx, `WHERE s.branch = ? AND s.seq = ?`, t.op.BranchID, t.headSeq)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("head snapshot of %s: %w", t.op.Branch, err)
	}
	if len(ss) != 1 || ss[0].ID != t.head {
		return Snapshot{}, false, nil
	}
	return ss[0], true, nil
}
