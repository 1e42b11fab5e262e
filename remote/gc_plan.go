package remote

import (
	"sort"
	"time"

	"github.com/artrt/art/cas"
)

// The S3 gc's decisions, made over plain data (the packs' index entries,
// the live and retained sets, the marker) with no I/O; gc.go loads the
// data, walks, and carries the decisions out.

// sortedPacks returns the names of ents' packs, sorted.
func sortedPacks(ents map[string][]gcEnt) []string {
	names := make([]string, 0, len(ents))
	for name := range ents {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// keepPacks picks the packs worth keeping as they are: a pack with live
// objects whose dead objects are at most a quarter of its bytes (rewriting
// it would cost more than it frees), unless dropped says otherwise.
func keepPacks(names []string, ents map[string][]gcEnt, live map[cas.ID]struct{}, dropped map[string]bool) map[string]bool {
	kept := map[string]bool{}
	for _, name := range names {
		if dropped[name] {
			continue
		}
		var dead, all int64
		anyLive := false
		for _, e := range ents[name] {
			all += e.length
			if _, ok := live[e.id]; ok {
				anyLive = true
			} else {
				dead += e.length
			}
		}
		if anyLive && dead*4 <= all {
			kept[name] = true
		}
	}
	return kept
}

// closedPacks picks the packs closed as they are: not empty, every object
// live, and every delta's base live. The fallback when keepPacks does not
// settle.
func closedPacks(names []string, ents map[string][]gcEnt, live map[cas.ID]struct{}) map[string]bool {
	kept := map[string]bool{}
	for _, name := range names {
		ok := len(ents[name]) > 0
		for _, e := range ents[name] {
			_, l := live[e.id]
			_, b := live[e.base]
			ok = ok && l && (e.codec != codecDelta || b)
		}
		if ok {
			kept[name] = true
		}
	}
	return kept
}

// keptRefs lists the objects of the kept packs: they stay visible to Has,
// so everything under them is retained too.
func keptRefs(names []string, ents map[string][]gcEnt, kept map[string]bool) []cas.Ref {
	var refs []cas.Ref
	for _, name := range names {
		if kept[name] {
			for _, e := range ents[name] {
				refs = append(refs, cas.Ref{ID: e.id, Kind: e.kind})
			}
		}
	}
	return refs
}

// baselessPacks lists the kept packs holding a delta whose base is not
// retained: keeping them would leave the delta unreadable.
func baselessPacks(names []string, ents map[string][]gcEnt, kept map[string]bool, retained map[cas.ID]struct{}) []string {
	var out []string
	for _, name := range names {
		if !kept[name] {
			continue
		}
		for _, e := range ents[name] {
			if _, ok := retained[e.base]; e.codec == codecDelta && !ok {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// markInput is what planMarker decides from.
type markInput struct {
	names    []string // every pack with an index, sorted
	ents     map[string][]gcEnt
	kept     map[string]bool
	retained map[cas.ID]struct{}
	packs    map[string]packInfo // sizes of the packs with an index
	orphans  map[string]packInfo // .pack objects without one
	now      *time.Time          // the server's clock; nil: unknown (no orphan is old enough)
	grace    time.Duration
	round    string
	history  int
}

// markPlan is phase 1's decision: the marker to write, the bytes it
// condemns, and the retained objects no kept pack holds (to copy into new
// packs before the marker is written).
type markPlan struct {
	marker         *gcMarker
	condemnedBytes int64
	copy           []cas.ID
}

// condemned is how many packs (with or without an index) the plan
// condemns.
func (p *markPlan) condemned() int { return len(p.marker.Condemned) + len(p.marker.Orphans) }

// planMarker condemns every pack not kept and every index-less pack old
// enough (a push writes a pack, then its index: an index-less pack is an
// interrupted push only when it is old, whatever the grace says), and
// lists the retained objects to copy.
func planMarker(in markInput) *markPlan {
	p := &markPlan{marker: &gcMarker{Version: 1, Round: in.round, State: "marked", History: in.history}}
	held := map[cas.ID]bool{}
	for _, name := range in.names {
		if in.kept[name] {
			p.marker.Kept = append(p.marker.Kept, name)
			for _, e := range in.ents[name] {
				held[e.id] = true
			}
			continue
		}
		p.marker.Condemned = append(p.marker.Condemned, name)
		p.condemnedBytes += in.packs[name].packBytes + in.packs[name].idxBytes
	}
	if in.now != nil {
		for name, o := range in.orphans {
			if in.now.Sub(o.modified) >= max(in.grace, minOrphanAge) {
				p.marker.Orphans = append(p.marker.Orphans, name)
				p.condemnedBytes += o.packBytes
			}
		}
		sort.Strings(p.marker.Orphans)
	}
	for id := range in.retained {
		if !held[id] {
			p.copy = append(p.copy, id)
		}
	}
	return p
}

// rescuePlan decides phase 2's rescue as the walk from the refs and the
// packs written since the mark reaches each object: an object held only
// by condemned packs saves the first of them, whose own objects are then
// walked in turn. It does no I/O: the walk asks reach about each object
// and takes the refs in pending as more roots.
type rescuePlan struct {
	ents        map[string][]gcEnt
	condemned   map[string]bool  // still condemned
	closed      map[cas.ID]uint8 // held by a kept pack as these kinds (a bit each), whose closure as them the mark established
	visible     map[cas.ID]bool  // held by a pack that stays but is not known closed
	inCondemned map[cas.ID][]string
	rescued     map[string]bool
	pending     []cas.Ref // objects of newly visible packs, to walk
}

// newRescuePlan sorts the packs of ents into kept (per the marker),
// condemned and new; the new ones' objects are the first pending.
func newRescuePlan(ents map[string][]gcEnt, m *gcMarker) *rescuePlan {
	p := &rescuePlan{ents: ents, condemned: m.condemnedSet(), closed: map[cas.ID]uint8{}, visible: map[cas.ID]bool{},
		inCondemned: map[cas.ID][]string{}, rescued: map[string]bool{}}
	kept := map[string]bool{}
	for _, n := range m.Kept {
		kept[n] = true
	}
	for _, name := range sortedPacks(ents) {
		switch {
		case kept[name]:
			for _, e := range ents[name] {
				p.closed[e.id] |= 1 << (e.kind & 7)
			}
		case p.condemned[name]:
			for _, e := range ents[name] {
				p.inCondemned[e.id] = append(p.inCondemned[e.id], name)
			}
		default:
			p.show(name)
		}
	}
	return p
}

// show makes pack name's objects visible and queues them (and each
// delta's base) for the walk.
func (p *rescuePlan) show(name string) {
	for _, e := range p.ents[name] {
		p.visible[e.id] = true
		if e.kind != cas.KindChunk {
			p.pending = append(p.pending, cas.Ref{ID: e.id, Kind: e.kind})
		}
		if e.codec == codecDelta {
			p.pending = append(p.pending, cas.Ref{ID: e.base, Kind: cas.KindTree})
		}
	}
}

// reach decides about an object the walk reached: whether to load it and
// follow its references (trees and manifests not held by a kept pack). An
// object held nowhere but in condemned packs rescues the first of them;
// one held nowhere at all is an error (ok false).
func (p *rescuePlan) reach(r cas.Ref) (descend, ok bool) {
	if bits, ok := p.closed[r.ID]; ok {
		// Reached as a kind no kept pack holds it as (an id names bytes:
		// a chunk with a manifest's bytes), its closure as that kind is
		// not established: walk it, rescuing what it needs.
		return r.Kind != cas.KindChunk && bits&(1<<(r.Kind&7)) == 0, true
	}
	if !p.visible[r.ID] {
		packs := p.inCondemned[r.ID]
		if len(packs) == 0 {
			return false, false
		}
		p.rescued[packs[0]] = true
		delete(p.condemned, packs[0])
		p.show(packs[0])
	}
	return r.Kind != cas.KindChunk, true
}

// claim is the marker that claims the deletion: m with the packs still
// condemned.
func (p *rescuePlan) claim(m *gcMarker) *gcMarker {
	final := *m
	final.State = "deleting"
	final.Condemned = nil
	for _, n := range m.Condemned {
		if p.condemned[n] {
			final.Condemned = append(final.Condemned, n)
		}
	}
	return &final
}
