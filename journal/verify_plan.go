package journal

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/artrt/art/cas"
)

// Verify's checks over plain data (rows read by verify.go), with no I/O.

// snapshotEvent is what Verify reads about a snapshot's event: its hash,
// root, branch and kind (missing: there is none), and the number of events
// the chain holds up to it, forgotten ones included.
type snapshotEvent struct {
	missing    bool
	hash, root []byte
	branch     int64
	kind       EventKind
	index      int64
}

// checkSnapshot compares a snapshot with its event and its event count.
func checkSnapshot(s Snapshot, ev snapshotEvent) []Problem {
	var out []Problem
	switch {
	case ev.missing:
		out = append(out, Problem{What: "snapshot", Object: s.ID.String(), Seq: s.Seq, Detail: "its event is missing"})
	case ev.kind != EvSnapshot || ev.branch != s.BranchID || !bytes.Equal(ev.hash, s.ID[:]) || !bytes.Equal(ev.root, s.Root[:]):
		out = append(out, Problem{What: "snapshot", Object: s.ID.String(), Seq: s.Seq, Detail: "does not match its event"})
	}
	if ev.index != s.EventCount {
		out = append(out, Problem{What: "snapshot", Object: s.ID.String(), Seq: s.Seq,
			Detail: fmt.Sprintf("chain has %d events up to it, snapshot recorded %d (events removed?)", ev.index, s.EventCount)})
	}
	return out
}

// chainRow is one events row of a branch, as stored.
type chainRow struct {
	seq, op, time                   int64
	kind                            int
	path, root, payload, prev, hash []byte
}

// chainCheck checks one branch's chain, fed its rows in seq order: each
// link and hash, each payload against its columns, the stretches art
// forget removed (gaps), and at the end the branch's head and count. It
// records the roots and manifests the events name in states.
type chainCheck struct {
	branch   int64
	label    string
	gaps     []gap
	states   *verifyStates
	prev     cas.ID
	n, live  int64 // events counted (forgotten ones too), events present
	last     int64 // seq of the last event or gap
	lost     bool  // a gap was crossed and no root recorded since
	problems []Problem
}

func (c *chainCheck) fail(seq int64, detail string) {
	c.problems = append(c.problems, Problem{What: "chain", Branch: c.label, Seq: seq, Detail: detail})
}

// skipGaps steps the chain over the stretches art forget removed before
// seq: each must start where the chain is and ends at its recorded last
// hash. It reports whether it crossed one.
func (c *chainCheck) skipGaps(seq int64) bool {
	crossed := false
	for len(c.gaps) > 0 && c.gaps[0].to < seq {
		g := c.gaps[0]
		c.gaps = c.gaps[1:]
		if g.firstPrev != c.prev || g.from <= c.last {
			c.fail(g.from, "a forgotten stretch of the chain does not join the events before it")
		}
		c.prev, c.last, c.n, crossed = g.lastID, g.to, c.n+g.count, true
	}
	return crossed
}

// event checks the next row. The event after a gap must record a root, or
// its state could not be replayed - except a merge marker, which changes
// no state (art forget keeps them, as ancestry edges, amid what it
// removes): then the first event after it that is no marker must.
func (c *chainCheck) event(r chainRow) {
	if c.skipGaps(r.seq) {
		c.lost = true
	}
	if r.root != nil {
		c.lost = false
	} else if c.lost && r.kind != int(EvMerge) {
		c.fail(r.seq, "the event after a forgotten stretch records no root to replay from")
		c.lost = false
	}
	c.n++
	c.live++
	c.last = r.seq
	if !bytes.Equal(r.prev, c.prev[:]) {
		c.fail(r.seq, "previous-hash link broken (an event was removed, reordered or altered)")
	}
	want := chainHash(cas.ID(r.prev), r.seq, r.payload)
	if !bytes.Equal(r.hash, want[:]) {
		c.fail(r.seq, "event hash does not match its contents")
	}
	copy(c.prev[:], r.hash)
	ev, err := DecodeEvent(r.payload)
	if err != nil {
		c.fail(r.seq, err.Error())
		return
	}
	if ev.Branch != c.branch || ev.Op != r.op || int(ev.Kind) != r.kind || ev.Time != r.time || !bytes.Equal(rootColumn(ev), r.root) ||
		(isPathEvent(ev.Kind) && !bytes.Equal(ev.Path, r.path)) {
		c.fail(r.seq, "event columns disagree with its hashed payload")
	}
	// An ancestry edge (branch, checkout, merge) names a recorded state
	// older than itself (DB.MergeBase walks them).
	if problem := edgeProblem(ev, r.seq); problem != "" {
		c.fail(r.seq, problem)
	}
	if !ev.Root.IsZero() {
		if _, ok := c.states.roots[ev.Root]; !ok {
			c.states.roots[ev.Root] = fmt.Sprintf("%s@%d", c.label, r.seq)
		}
	}
	if ev.Kind == EvWrite || ev.Kind == EvWriteData || (ev.Kind == EvCreate && ev.Attr.Kind == cas.EntryFile) {
		c.states.manifests[ev.Attr.Content] = fmt.Sprintf("%s@%d:%s", c.label, r.seq, ev.Path)
	}
}

// finish checks the end of the chain against the branch row.
func (c *chainCheck) finish(head cas.ID, headSeq, count int64) {
	c.skipGaps(headSeq + 1)
	if len(c.gaps) > 0 {
		c.fail(c.gaps[0].from, "a forgotten stretch lies past the branch head")
	}
	if c.n != count {
		c.fail(c.last, fmt.Sprintf("branch records %d events, chain has %d (truncated?)", count, c.n))
	}
	if c.prev != head || c.last != headSeq {
		c.fail(c.last, "branch head does not match the last event of its chain")
	}
}

// collectProblems is the report's list: the chain, snapshot and projection
// problems found, one per damaged object (a pack's problem stands for all
// its objects) and the damaged packs none of whose objects was read,
// sorted by kind and object.
func collectProblems(found []Problem, bad map[cas.ID]*Problem, packBad map[int64]*Problem) []Problem {
	done := map[*Problem]bool{}
	for _, p := range bad {
		if !done[p] {
			done[p] = true
			found = append(found, *p)
		}
	}
	for _, p := range packBad {
		if !done[p] { // its objects were not damaged after all (rows beyond the end none of which is read)
			found = append(found, *p)
		}
	}
	sort.SliceStable(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.What != b.What {
			return a.What < b.What
		}
		return a.Object < b.Object
	})
	return found
}

// reachCheck attributes damage to paths as the walk reaches objects. An
// object is reached once; until it is loaded, every path that refers to it
// is kept (pending), and if the load finds it damaged they all become its
// problem's paths; every later reference to a damaged object adds a path
// too. A sound tree or manifest is named by the first path that reached
// it, and names its children from there.
// refKey is an id as reached by a referrer expecting kind k.
type refKey struct {
	id cas.ID
	k  cas.Kind
}

type reachCheck struct {
	bad     map[cas.ID]*Problem
	pending map[refKey][]string // by id and kind: one id may be reached as two kinds (docs/store-format.md)
	w       *cas.Walker
}

// refer records that where refers to r and reaches r if it is new.
func (rc *reachCheck) refer(r cas.Ref, where string, reach func(cas.Ref)) {
	if p, ok := rc.bad[r.ID]; ok {
		p.addPath(where)
		return
	}
	key := refKey{r.ID, r.Kind}
	if ps, ok := rc.pending[key]; ok {
		rc.pending[key] = append(ps, where)
		return
	}
	// A chunk is present once its id was reached as anything; a manifest
	// or tree is walked as such even when its id was reached as a chunk.
	if _, seen := rc.w.Seen[r.ID]; seen && (r.Kind == cas.KindChunk || rc.w.ReachedAs(r.ID, r.Kind)) {
		return
	}
	rc.pending[key] = []string{where}
	reach(r)
}

// walk walks from root, labelled where.
func (rc *reachCheck) walk(ctx context.Context, root cas.Ref, where string) error {
	var roots []cas.Ref
	rc.refer(root, where, func(r cas.Ref) { roots = append(roots, r) })
	if len(roots) == 0 {
		return nil
	}
	return rc.w.Walk(ctx, roots...)
}

// damaged records r as damaged by err, with the paths that reached it.
func (rc *reachCheck) damaged(r cas.Ref, err error) {
	p := &Problem{What: "object", Object: r.ID.String(), Detail: fmt.Sprintf("%s: %v", r.Kind, err)}
	for _, where := range rc.pending[refKey{r.ID, r.Kind}] {
		p.addPath(where)
	}
	delete(rc.pending, refKey{r.ID, r.Kind})
	rc.bad[r.ID] = p
}

// refs is the walk's Refs: it names c's children from c's path.
func (rc *reachCheck) refs(_ context.Context, c *cas.Checked, reach func(cas.Ref)) error {
	paths := rc.pending[refKey{c.ID, c.Kind}]
	delete(rc.pending, refKey{c.ID, c.Kind})
	if len(paths) == 0 {
		return nil // damaged: recorded by the loader
	}
	where := paths[0]
	if t := c.Tree; t != nil {
		for i := range t.Entries {
			e := &t.Entries[i]
			switch e.Kind {
			case cas.EntryDir:
				rc.refer(cas.Ref{ID: e.Target, Kind: cas.KindTree}, where+string(e.Name)+"/", reach)
			case cas.EntryFile:
				rc.refer(cas.Ref{ID: e.Target, Kind: cas.KindManifest, Size: e.Size}, where+string(e.Name), reach)
			}
		}
	}
	if m := c.Manifest; m != nil {
		for _, x := range m.Extents {
			if !x.IsHole() {
				rc.refer(cas.Ref{ID: x.ID, Kind: cas.KindChunk, Size: x.Len}, where, reach)
			}
		}
	}
	return nil
}
