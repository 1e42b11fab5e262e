package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
)

// GraphOp is one operation of the history graph (art log --graph): the op
// as art log lists it, and the ops its state descends from.
type GraphOp struct {
	OpInfo
	// BranchID tells branches apart, also deleted ones (Branch is then
	// "(deleted)").
	BranchID int64 `json:"branch_id"`
	Deleted  bool  `json:"deleted,omitempty"`
	// Parents are op ids: the previous op of the same branch first; for a branch's first op, the op on the
	// source branch whose chain holds the fork point; for a merge op, also
	// the op that holds the merged state. An op is always newer (a
	// greater id) than its parents.
	Parents []int64 `json:"parents"`
	// Jump is, for a checkout or undo, the op that holds the state the
	// branch moved to. That state is where the branch's history goes on
	// from (DB.MergeBase), but it is drawn as the branch jumping back
	// rather than as a parent, so the ops the branch moved away from keep
	// their place on its lane. 0 when there is none (a pulled state, a
	// state whose events were forgotten).
	Jump int64 `json:"jump,omitempty"`
}

// GraphQuery selects the ops of Graph.
type GraphQuery struct {
	// Branch: only the ops in this branch's history (its own, and those
	// of the branches it was forked from or merged, up to the states it
	// took); "" = every op of every branch, deleted ones too.
	Branch string
}

// Graph returns ops newest first (by id) with their parents and jumps,
// read from the branch and merge events (ancestry) and checkout events
// (jumps). Edges a damaged store gets wrong (a source state on another
// branch than it names, an op no older than its child) are left out
// rather than failing the listing; MergeBase and verify report them.
func (db *DB) Graph(ctx context.Context, q GraphQuery) ([]GraphOp, error) {
	var hist history
	var only int64
	if q.Branch != "" {
		b, err := db.Branch(ctx, q.Branch)
		if err != nil {
			return nil, err
		}
		if hist, err = db.graphHistory(ctx, b); err != nil {
			return nil, fmt.Errorf("history of %s: %w", q.Branch, err)
		}
		only = b.ID
	}
	ops, err := db.graphOps(ctx)
	if err != nil {
		return nil, err
	}
	if err := db.graphEdges(ctx, ops); err != nil {
		return nil, err
	}
	out := make([]GraphOp, 0, len(ops))
	for i := len(ops) - 1; i >= 0; i-- {
		o := ops[i]
		if hist != nil && o.BranchID != only {
			// Up to the newest state of that branch the history took.
			if o.BeforeSeq >= hist.last(o.BranchID) {
				continue
			}
		}
		if o.Parents == nil {
			o.Parents = []int64{}
		}
		out = append(out, *o)
	}
	return out, nil
}

// graphOps reads every op, oldest first, with its snapshots and with its
// branch's previous op as first parent.
func (db *DB) graphOps(ctx context.Context) ([]*GraphOp, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT o.branch, (SELECT deleted_ns IS NOT NULL FROM branches b WHERE b.id = o.branch), `+opCols+` FROM ops o ORDER BY o.id`)
	if err != nil {
		return nil, fmt.Errorf("read ops: %w", err)
	}
	defer rows.Close()
	var ops []*GraphOp
	last := map[int64]int64{} // branch -> its newest op so far
	for rows.Next() {
		g := &GraphOp{}
		var deleted sql.NullBool
		o, err := scanOp(prefixScanner{rows, []any{&g.BranchID, &deleted}})
		if err != nil {
			return nil, err
		}
		g.OpInfo = o
		g.Deleted = deleted.Bool
		ops = append(ops, g)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for _, g := range ops {
		if p := last[g.BranchID]; p != 0 {
			g.Parents = []int64{p}
		}
		last[g.BranchID] = g.ID
	}
	// Snapshots: one query, matched to their ops by seq.
	snaps, err := db.snapshots(ctx, "")
	if err != nil {
		return nil, err
	}
	opOf, err := db.snapshotOps(ctx)
	if err != nil {
		return nil, err
	}
	byID := indexOps(ops)
	for _, s := range snaps { // newest first, as Ops lists them
		if g := byID[opOf[s.Seq]]; g != nil {
			g.Snapshots = append(g.Snapshots, s)
		}
	}
	return ops, nil
}

// snapshotOps maps each snapshot event's seq to its op.
func (db *DB) snapshotOps(ctx context.Context) (map[int64]int64, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT seq, op FROM events WHERE seq IN (SELECT seq FROM snapshots)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var seq, op int64
		if err := rows.Scan(&seq, &op); err != nil {
			return nil, err
		}
		m[seq] = op
	}
	return m, rows.Err()
}

func indexOps(ops []*GraphOp) map[int64]*GraphOp {
	m := make(map[int64]*GraphOp, len(ops))
	for _, g := range ops {
		m[g.ID] = g
	}
	return m
}

// graphHistory returns what b's graph shows of other branches: the
// history of b's head and of each state b left by a checkout or undo, so
// every op of b drawn has its parents drawn too (an undone merge's source
// is no longer in the head's history, but the merge op still is b's).
func (db *DB) graphHistory(ctx context.Context, b Branch) (history, error) {
	states := []point{{branch: b.ID, seq: b.HeadSeq}}
	rows, err := db.r.QueryContext(ctx, `SELECT seq FROM events WHERE branch = ? AND kind = ? AND seq <= ? ORDER BY seq`, b.ID, int(EvCheckout), b.HeadSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		if len(states) > maxAncestryEdges {
			return nil, fmt.Errorf("%w: branch %d has more than %d checkouts", ErrCorrupt, b.ID, maxAncestryEdges)
		}
		states = append(states, point{branch: b.ID, seq: seq - 1})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return db.histories(ctx, db.r, states)
}

// graphEdges adds the fork and merge parents and the checkout jumps, read
// from the branch, checkout and merge events.
func (db *DB) graphEdges(ctx context.Context, ops []*GraphOp) error {
	byID := indexOps(ops)
	rows, err := db.r.QueryContext(ctx, `SELECT seq, op, kind, payload FROM events WHERE kind IN (?, ?, ?) ORDER BY seq`,
		int(EvBranch), int(EvCheckout), int(EvMerge))
	if err != nil {
		return fmt.Errorf("read branch points: %w", err)
	}
	type edge struct {
		op   int64
		kind EventKind
		from int64 // branch
		at   int64 // seq
	}
	var edges []edge
	for rows.Next() {
		var seq, op int64
		var kind int
		var payload []byte
		if err := rows.Scan(&seq, &op, &kind, &payload); err != nil {
			rows.Close()
			return err
		}
		ev, err := DecodeEvent(payload)
		if err != nil || int(ev.Kind) != kind || ev.FromBranch <= 0 || ev.FromSeq <= 0 || ev.FromSeq >= seq {
			continue // no source (init, a pulled state) or a damaged event: no edge
		}
		edges = append(edges, edge{op, ev.Kind, ev.FromBranch, ev.FromSeq})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, e := range edges {
		g := byID[e.op]
		if g == nil {
			continue
		}
		src, err := db.opHolding(ctx, e.from, e.at)
		if err != nil {
			return err
		}
		if src == 0 || src >= g.ID {
			continue
		}
		switch e.kind {
		case EvCheckout:
			g.Jump = src
		default:
			if !containsID(g.Parents, src) {
				g.Parents = append(g.Parents, src)
			}
		}
	}
	for _, g := range ops {
		// The same-branch parent stays first; the others newest first.
		if len(g.Parents) > 2 {
			rest := g.Parents[1:]
			sort.Slice(rest, func(i, j int) bool { return rest[i] > rest[j] })
		}
	}
	return nil
}

// opHolding returns the op of branch whose events hold the state right
// after seq: the op of event seq, or, when that event was forgotten, the op
// whose range of the branch's chain holds it; 0 when none does.
func (db *DB) opHolding(ctx context.Context, branch, seq int64) (int64, error) {
	var op, b int64
	err := db.r.QueryRowContext(ctx, `SELECT op, branch FROM events WHERE seq = ?`, seq).Scan(&op, &b)
	if err == nil {
		if b != branch {
			return 0, nil
		}
		return op, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	err = db.r.QueryRowContext(ctx, `SELECT id FROM ops WHERE branch = ? AND before_seq < ? AND end_seq >= ? ORDER BY id DESC LIMIT 1`,
		branch, seq, seq).Scan(&op)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return op, err
}

func containsID(ids []int64, id int64) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// prefixScanner scans its first columns into pre and hands the rest to
// the scanner that reads them (scanOp).
type prefixScanner struct {
	s   scanner
	pre []any
}

func (p prefixScanner) Scan(dest ...any) error { return p.s.Scan(append(p.pre, dest...)...) }
