package journal

import (
	"context"
	"database/sql"
	"fmt"
)

// Ancestry: which states a state descends from.
//
// The history of a state (branch X, seq s) is X's chain up to s; at X's
// EvBranch event, the history of the state it was created from
// (FromBranch@FromSeq); at every EvMerge event of X at or before s, also
// the history of the state it merged. Checkouts and undos (EvCheckout) do
// not cut a history: the branch's earlier chain stays its ancestry, and the
// state a checkout moved to is not an ancestor edge. Deleted branches keep
// their events, so a history walks through them.
//
// Because a history holds a prefix of each chain it reaches, it is a map
// from branch to the greatest seq of that branch's chain it holds (a
// reach). Seqs are global and only grow, so the newest state two histories
// share is the one with the greatest seq in their intersection.

// maxAncestryEdges bounds the edges (branch and merge events) one history
// walk follows: a store that needs more is damaged or hostile.
const maxAncestryEdges = 1 << 20

// reach returns the history of (branch, seq) as branch id -> greatest seq
// of that branch's chain in it. Each event is read at most once (a
// branch's range is only ever extended), so the walk ends even when a
// hostile store's edges form a cycle; an edge that does not point back in
// time is ErrCorrupt.
func (db *DB) reach(ctx context.Context, q queryer, branch, seq int64) (map[int64]int64, error) {
	reach := map[int64]int64{}
	type point struct{ branch, seq int64 }
	todo := []point{{branch, seq}}
	edges := 0
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		lo := reach[p.branch]
		if p.branch <= 0 || p.seq <= lo {
			continue
		}
		reach[p.branch] = p.seq
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		from, err := db.ancestryEdges(ctx, q, p.branch, lo, p.seq)
		if err != nil {
			return nil, err
		}
		edges += len(from)
		if edges > maxAncestryEdges {
			return nil, fmt.Errorf("%w: the history of @%d has more than %d branch and merge points", ErrCorrupt, seq, maxAncestryEdges)
		}
		for _, e := range from {
			todo = append(todo, point{e.FromBranch, e.FromSeq})
		}
	}
	return reach, nil
}

// ancestryEdges returns branch's EvBranch and EvMerge events with lo < seq
// <= hi that name a source state, checked: the source must be older than
// the event.
func (db *DB) ancestryEdges(ctx context.Context, q queryer, branch, lo, hi int64) ([]Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, payload FROM events WHERE branch = ? AND seq > ? AND seq <= ? AND kind IN (?, ?) ORDER BY seq`,
		branch, lo, hi, int(EvBranch), int(EvMerge))
	if err != nil {
		return nil, fmt.Errorf("ancestry of branch %d: %w", branch, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var seq int64
		var kind int
		var payload []byte
		if err := rows.Scan(&seq, &kind, &payload); err != nil {
			return nil, err
		}
		ev, err := DecodeEvent(payload)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		if int(ev.Kind) != kind || ev.Branch != branch {
			return nil, fmt.Errorf("%w: event %d's columns disagree with its payload (run art verify)", ErrCorrupt, seq)
		}
		if ev.FromBranch == 0 && ev.FromSeq == 0 && ev.Kind == EvBranch {
			continue // a branch created from the empty tree
		}
		if ev.FromBranch <= 0 || ev.FromSeq <= 0 || ev.FromSeq >= seq {
			return nil, fmt.Errorf("%w: %s event %d names source @%d, which is not an older state (run art verify)", ErrCorrupt, ev.Kind, seq, ev.FromSeq)
		}
		ev.Seq = seq
		out = append(out, *ev)
	}
	return out, rows.Err()
}

// MergeBase returns the newest state both a's and b's histories contain
// (see the ancestry rule above), with its Root materialized and Snapshot
// set when it is exactly a snapshot. ok is false when the histories share
// nothing: a merge then uses the empty tree as its base. a and b need
// BranchID and Seq (as Resolve returns them). A store whose ancestry
// edges are damaged is ErrCorrupt.
func (db *DB) MergeBase(ctx context.Context, a, b State) (base State, ok bool, err error) {
	ra, err := db.reach(ctx, db.r, a.BranchID, a.Seq)
	if err != nil {
		return State{}, false, fmt.Errorf("merge base: %w", err)
	}
	rb, err := db.reach(ctx, db.r, b.BranchID, b.Seq)
	if err != nil {
		return State{}, false, fmt.Errorf("merge base: %w", err)
	}
	var best State
	for branch, sa := range ra {
		sb, in := rb[branch]
		if !in {
			continue
		}
		upTo := min(sa, sb)
		if upTo <= best.Seq {
			continue
		}
		// The branch's last event at or before upTo: the state names an
		// event of the chain even when upTo is a seq of another branch.
		var seq sql.NullInt64
		if err := db.r.QueryRowContext(ctx, `SELECT max(seq) FROM events WHERE branch = ? AND seq <= ?`, branch, upTo).Scan(&seq); err != nil {
			return State{}, false, fmt.Errorf("merge base: %w", err)
		}
		if seq.Valid && seq.Int64 > best.Seq {
			best = State{BranchID: branch, Seq: seq.Int64}
		}
	}
	if best.Seq == 0 {
		return State{}, false, nil
	}
	root, err := db.Materialize(ctx, best.BranchID, best.Seq)
	if err != nil {
		return State{}, false, fmt.Errorf("merge base @%d: %w", best.Seq, err)
	}
	best.Root = root
	best.Branch = db.BranchName(ctx, best.BranchID)
	best.Snapshot = db.snapshotAt(ctx, best.Seq)
	return best, true, nil
}
