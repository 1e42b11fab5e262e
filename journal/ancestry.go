package journal

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// Ancestry: which states a state descends from.
//
// The history of a state (branch X, seq s) is the stretch of X's chain
// from X's newest reset at or before s (its EvBranch event, or the newest
// EvCheckout - art checkout, art undo, a pull's move) up to s, plus the
// history of the state that reset names (FromBranch@FromSeq; none for a
// branch created from the empty tree or a state moved in from another
// store, FromSeq 0), plus, at every EvMerge event of that stretch, the
// history of the state it merged. So a checkout or undo cuts the branch's
// history: what the branch moved away from is no longer its ancestry
// (after undoing a merge of B, B counts as not merged), and the state it
// moved to is. Deleted branches keep their events, so a history walks
// through them.
//
// A history is no longer a prefix of each chain it reaches (a branch that
// was checked out back holds its chain up to the target and again after
// the checkout, not what lies between), so it is held as stretches: per
// branch, disjoint [lo, hi] seq ranges, lo the reset each stretch begins
// with. Seqs are global and only grow, so the newest state two histories
// share is the greatest seq in the intersection of their stretches.

// maxAncestryEdges bounds the edges (branch, checkout and merge events)
// one history walk follows: a store that needs more is damaged or hostile.
const maxAncestryEdges = 1 << 20

// stretch is [lo, hi] of one branch's chain in a history: lo is the reset
// (EvBranch or EvCheckout) the stretch begins at, or 0 when the walk found
// none below hi (the branch's start was forgotten by an art that did not
// keep ancestry edges); hi is a state's seq and root that state's root as
// the edge naming it recorded (zero: not known).
type stretch struct {
	lo, hi int64
	root   cas.ID
}

// history is branch id -> its stretches, sorted by lo and disjoint (at
// most one per reset of the branch).
type history map[int64][]stretch

// find returns the index of branch's stretch with the greatest lo at or
// below seq (-1: none) and whether that stretch holds seq.
func (h history) find(branch, seq int64) (int, bool) {
	s := h[branch]
	i := sort.Search(len(s), func(i int) bool { return s[i].lo > seq }) - 1
	return i, i >= 0 && seq <= s[i].hi
}

// last returns the greatest seq of branch the history holds (0: none).
func (h history) last(branch int64) int64 {
	s := h[branch]
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].hi
}

// history returns the history of (branch, seq). Each event is read at most
// once: a state a stretch already holds adds nothing (the stretch's reset
// is its newest reset too, so its history is within the stretch's), and a
// new state reads only the events above the stretch below it. Every edge
// must point back in time (ErrCorrupt otherwise), so the walk ends even
// when a hostile store's edges form a cycle.
func (db *DB) history(ctx context.Context, q queryer, branch, seq int64) (history, error) {
	return db.histories(ctx, q, []point{{branch: branch, seq: seq}})
}

// point is a state: a branch, a seq and, when known, its root.
type point struct {
	branch, seq int64
	root        cas.ID
}

// histories returns the union of the histories of states (see history).
func (db *DB) histories(ctx context.Context, q queryer, states []point) (history, error) {
	h := history{}
	todo := slices.Clone(states)
	edges := 0
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if p.branch <= 0 || p.seq <= 0 {
			continue
		}
		i, held := h.find(p.branch, p.seq)
		if held {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var below int64
		if i >= 0 {
			below = h[p.branch][i].hi
		}
		reset, from, err := db.ancestryEdges(ctx, q, p.branch, below, p.seq)
		if err != nil {
			return nil, err
		}
		s := h[p.branch]
		switch {
		case reset > 0 || i < 0:
			// A new stretch, between stretch i and the next (whose lo is
			// above p.seq); reset 0: the walk found no reset at all.
			s = append(s, stretch{})
			copy(s[i+2:], s[i+1:])
			s[i+1] = stretch{reset, p.seq, p.root}
		default:
			s[i].hi, s[i].root = p.seq, p.root // no reset since stretch i: it goes on
		}
		h[p.branch] = s
		edges += len(from)
		if edges > maxAncestryEdges {
			return nil, fmt.Errorf("%w: the history of @%d has more than %d branch, checkout and merge points", ErrCorrupt, states[0].seq, maxAncestryEdges)
		}
		for _, e := range from {
			todo = append(todo, point{e.FromBranch, e.FromSeq, e.Root})
		}
	}
	return h, nil
}

// ancestryEdges reads branch's events with lo < seq <= hi, newest first,
// down to and including the newest reset (EvBranch, EvCheckout) among
// them. It returns that reset's seq (0: none in the range) and the edges
// met: the EvMerge events and the reset, if it names a source state.
// Each is checked: its source must be older than the event.
func (db *DB) ancestryEdges(ctx context.Context, q queryer, branch, lo, hi int64) (reset int64, out []Event, err error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, payload FROM events WHERE branch = ? AND seq > ? AND seq <= ? AND kind IN (?, ?, ?) ORDER BY seq DESC`,
		branch, lo, hi, int(EvBranch), int(EvCheckout), int(EvMerge))
	if err != nil {
		return 0, nil, fmt.Errorf("ancestry of branch %d: %w", branch, err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var kind int
		var payload []byte
		if err := rows.Scan(&seq, &kind, &payload); err != nil {
			return 0, nil, err
		}
		ev, err := DecodeEvent(payload)
		if err != nil {
			return 0, nil, fmt.Errorf("event %d: %w", seq, err)
		}
		if int(ev.Kind) != kind || ev.Branch != branch {
			return 0, nil, fmt.Errorf("%w: event %d's columns disagree with its payload (run art verify)", ErrCorrupt, seq)
		}
		if problem := edgeProblem(ev, seq); problem != "" {
			return 0, nil, fmt.Errorf("%w: event %d: %s (run art verify)", ErrCorrupt, seq, problem)
		}
		if ev.FromSeq > 0 {
			ev.Seq = seq
			out = append(out, *ev)
		}
		if ev.Kind != EvMerge {
			return seq, out, nil // the stretch begins here
		}
	}
	return 0, out, rows.Err()
}

// edgeProblem says what is wrong with ancestry event ev at seq, "" when
// nothing is (or ev is no ancestry event). A merge names a recorded
// state; a reset names one or none (FromBranch and FromSeq both 0: the
// empty tree or a state from another store); a named state is older than
// the event. Verify reports the same rule (chainCheck.event).
func edgeProblem(ev *Event, seq int64) string {
	switch ev.Kind {
	case EvMerge:
		if ev.FromBranch <= 0 || ev.FromSeq <= 0 {
			return "merge event names no source state"
		}
	case EvBranch, EvCheckout:
		if ev.FromBranch == 0 && ev.FromSeq == 0 {
			return ""
		}
		if ev.FromBranch <= 0 || ev.FromSeq <= 0 {
			return fmt.Sprintf("%s event names a source branch %d @%d that is no recorded state", ev.Kind, ev.FromBranch, ev.FromSeq)
		}
	default:
		return ""
	}
	if ev.FromSeq >= seq {
		return fmt.Sprintf("%s event names a source @%d that is not older than itself", ev.Kind, ev.FromSeq)
	}
	return ""
}

// MergeBase returns the newest state both a's and b's histories contain
// (see the ancestry rule above), with its Root and Snapshot (when it is
// exactly a snapshot) set. ok is false when the histories share nothing:
// a merge then uses the empty tree as its base. a and b need BranchID and
// Seq (as Resolve returns them; their Root, when set, is trusted). A store
// whose ancestry edges are damaged is ErrCorrupt.
//
// The base's root is the one recorded by the edge that names the state
// (or a's or b's own): art forget keeps every edge and gc keeps their
// roots, so the base is the same before and after a forget even when its
// events and snapshot are gone. Only a base no edge names (a damaged
// store) is replayed; a history that lost edges to an older art's forget,
// or a base that can be neither, is refused with ErrForgotten rather than
// answered with an older state, against which a merge would read a
// revert as no change.
func (db *DB) MergeBase(ctx context.Context, a, b State) (base State, ok bool, err error) {
	ha, err := db.histories(ctx, db.r, []point{{a.BranchID, a.Seq, a.Root}})
	if err != nil {
		return State{}, false, fmt.Errorf("merge base: %w", err)
	}
	hb, err := db.histories(ctx, db.r, []point{{b.BranchID, b.Seq, b.Root}})
	if err != nil {
		return State{}, false, fmt.Errorf("merge base: %w", err)
	}
	for _, h := range []history{ha, hb} {
		if err := db.complete(ctx, h); err != nil {
			return State{}, false, fmt.Errorf("merge base: %w", err)
		}
	}
	var best State
	for branch, sa := range ha {
		sb := hb[branch]
		// Both lists are sorted and disjoint: a merge-walk of them visits
		// each overlap once.
		for i, j := 0, 0; i < len(sa) && j < len(sb); {
			x, y := sa[i], sb[j]
			if x.hi < y.hi {
				i++
			} else {
				j++
			}
			lo, upTo, root := max(x.lo, y.lo), x.hi, x.root
			if y.hi < upTo {
				upTo, root = y.hi, y.root
			}
			if upTo < lo || upTo <= best.Seq {
				continue
			}
			cand := State{BranchID: branch, Seq: upTo, Root: root}
			if root.IsZero() {
				// No edge recorded the state's root: the branch's last
				// event at or before upTo, replayed below (the state names
				// an event of the chain even when upTo is a seq of another
				// branch, a hostile edge).
				var seq sql.NullInt64
				if err := db.r.QueryRowContext(ctx, `SELECT max(seq) FROM events WHERE branch = ? AND seq <= ?`, branch, upTo).Scan(&seq); err != nil {
					return State{}, false, fmt.Errorf("merge base: %w", err)
				}
				if !seq.Valid || seq.Int64 < lo {
					return State{}, false, fmt.Errorf("merge base: %w: no event of branch %d at or before @%d (run art verify)", ErrCorrupt, branch, upTo)
				}
				cand.Seq = seq.Int64
			}
			if cand.Seq > best.Seq {
				best = cand
			}
		}
	}
	if best.Seq == 0 {
		return State{}, false, nil
	}
	if best.Root.IsZero() {
		root, err := db.Materialize(ctx, best.BranchID, best.Seq)
		if err != nil {
			return State{}, false, fmt.Errorf("merge base @%d: %w", best.Seq, err)
		}
		best.Root = root
	}
	best.Branch = db.BranchName(ctx, best.BranchID)
	best.Snapshot = db.snapshotAt(ctx, best.Seq)
	return best, true, nil
}

// complete refuses a history with a stretch that found no reset below it:
// the branch's first event, its EvBranch, is gone - forgotten by an art
// that did not keep ancestry edges, which may have dropped other edges
// with it - so a base found through it could be older than the true one.
func (db *DB) complete(ctx context.Context, h history) error {
	for branch, ss := range h {
		if len(ss) == 0 || ss[0].lo != 0 {
			continue
		}
		var n int
		if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM forgotten WHERE branch = ? AND from_seq <= ?`, branch, ss[0].hi).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %w: the history of %s before @%d was forgotten with its branch point (art forget of an older art); the merge base cannot be known",
				ErrRevNotFound, ErrForgotten, termtext.Quote(db.BranchName(ctx, branch)), ss[0].hi)
		}
		return fmt.Errorf("%w: branch %d's chain below @%d has no branch event (run art verify)", ErrCorrupt, branch, ss[0].hi)
	}
	return nil
}
