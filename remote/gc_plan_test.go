package remote

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

func pid(n string) cas.ID { return cas.Sum([]byte(n)) }

func pset(ns ...string) map[cas.ID]struct{} {
	m := map[cas.ID]struct{}{}
	for _, n := range ns {
		m[pid(n)] = struct{}{}
	}
	return m
}

func ent(n string, length int64) gcEnt { return gcEnt{id: pid(n), kind: cas.KindChunk, length: length} }

func delta(n, base string, length int64) gcEnt {
	return gcEnt{id: pid(n), kind: cas.KindTree, codec: codecDelta, base: pid(base), length: length}
}

func trueKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestKeepPacks(t *testing.T) {
	ents := map[string][]gcEnt{
		"all-live":    {ent("a", 10), ent("b", 10)},
		"quarter":     {ent("c", 30), ent("x", 10)}, // 10 dead of 40: kept
		"third":       {ent("d", 20), ent("y", 10)}, // 10 dead of 30: rewritten
		"all-dead":    {ent("z", 10)},
		"empty":       nil,
		"dropped":     {ent("e", 10)},
		"delta-based": {delta("t", "gone", 10)},
	}
	live := pset("a", "b", "c", "d", "e", "t")
	names := sortedPacks(ents)
	if got, want := trueKeys(keepPacks(names, ents, live, map[string]bool{"dropped": true})), []string{"all-live", "delta-based", "quarter"}; !slices.Equal(got, want) {
		t.Errorf("keepPacks = %v, want %v", got, want)
	}
	// Closed: every object live and every delta's base live.
	if got, want := trueKeys(closedPacks(names, ents, live)), []string{"all-live", "dropped"}; !slices.Equal(got, want) {
		t.Errorf("closedPacks = %v, want %v", got, want)
	}
	kept := map[string]bool{"all-live": true, "delta-based": true}
	if got := baselessPacks(names, ents, kept, live); !slices.Equal(got, []string{"delta-based"}) {
		t.Errorf("baselessPacks = %v, want [delta-based]", got)
	}
	if got := baselessPacks(names, ents, kept, pset("gone")); len(got) != 0 {
		t.Errorf("baselessPacks with the base retained = %v, want none", got)
	}
	if got := keptRefs(names, ents, kept); len(got) != 3 || got[0].ID != pid("a") || got[2].Kind != cas.KindTree {
		t.Errorf("keptRefs = %v", got)
	}
}

func TestPlanMarker(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ents := map[string][]gcEnt{"k": {ent("a", 10)}, "c1": {ent("b", 10), ent("dead", 10)}, "c2": {ent("dead2", 5)}}
	packs := map[string]packInfo{"k": {packBytes: 100, idxBytes: 1}, "c1": {packBytes: 200, idxBytes: 2}, "c2": {packBytes: 300, idxBytes: 3}}
	orphans := map[string]packInfo{
		"old":    {packBytes: 7, modified: now.Add(-2 * minOrphanAge)},
		"young":  {packBytes: 9, modified: now.Add(-minOrphanAge / 2)},
		"graced": {packBytes: 11, modified: now.Add(-minOrphanAge - time.Minute)},
	}
	for _, c := range []struct {
		name     string
		now      *time.Time
		grace    time.Duration
		orphans  []string
		bytes    int64
		retained map[cas.ID]struct{}
		copy     []cas.ID
	}{
		{name: "clock unknown: no orphan", retained: pset("a", "b"), copy: []cas.ID{pid("b")}, bytes: 505},
		{name: "orphans older than an hour", now: &now, retained: pset("a", "b"), copy: []cas.ID{pid("b")},
			orphans: []string{"graced", "old"}, bytes: 505 + 7 + 11},
		{name: "a grace longer than an hour protects orphans", now: &now, grace: minOrphanAge + 2*time.Minute,
			retained: pset("a"), orphans: []string{"old"}, bytes: 505 + 7},
	} {
		p := planMarker(markInput{names: sortedPacks(ents), ents: ents, kept: map[string]bool{"k": true}, retained: c.retained,
			packs: packs, orphans: orphans, now: c.now, grace: c.grace, round: "r", history: 2})
		m := p.marker
		if m.Version != 1 || m.State != "marked" || m.Round != "r" || m.History != 2 || !slices.Equal(m.Kept, []string{"k"}) ||
			!slices.Equal(m.Condemned, []string{"c1", "c2"}) || !slices.Equal(m.Orphans, c.orphans) {
			t.Errorf("%s: marker %+v", c.name, m)
		}
		if p.condemnedBytes != c.bytes || p.condemned() != 2+len(c.orphans) || !slices.Equal(p.copy, c.copy) {
			t.Errorf("%s: condemned %d (%d bytes), copy %v; want %d bytes, copy %v", c.name, p.condemned(), p.condemnedBytes, p.copy, c.bytes, c.copy)
		}
	}
}

func TestRescuePlan(t *testing.T) {
	// kept: closed at the mark. new: written since the mark (its delta's
	// base only in c2). c1, c2, c3: condemned; x is in both c1 and c3.
	ents := map[string][]gcEnt{
		"kept": {ent("k", 1)},
		"new":  {{id: pid("n"), kind: cas.KindManifest}, delta("nd", "base", 1)},
		"c1":   {ent("x", 1), ent("y", 1)},
		"c2":   {{id: pid("base"), kind: cas.KindTree}},
		"c3":   {ent("x", 1)},
	}
	m := &gcMarker{Version: 1, Round: "r", State: "marked", Kept: []string{"kept"}, Condemned: []string{"c1", "c2", "c3"}}
	p := newRescuePlan(ents, m)
	var pending []string
	for _, r := range p.pending {
		pending = append(pending, fmt.Sprint(r.Kind))
	}
	if got, want := pending, []string{"manifest", "tree", "tree"}; !slices.Equal(got, want) {
		t.Fatalf("pending from the new pack: %v, want its manifest, its delta and the delta's base", got)
	}
	steps := []struct {
		ref           cas.Ref
		descend, ok   bool
		rescuedAfter  []string
		condemnAfter  []string
		pendingGrowth int
	}{
		{ref: cas.Ref{ID: pid("k"), Kind: cas.KindChunk}, ok: true, condemnAfter: []string{"c1", "c2", "c3"}},
		{ref: cas.Ref{ID: pid("n"), Kind: cas.KindManifest}, descend: true, ok: true, condemnAfter: []string{"c1", "c2", "c3"}},
		{ref: cas.Ref{ID: pid("base"), Kind: cas.KindTree}, descend: true, ok: true, rescuedAfter: []string{"c2"}, condemnAfter: []string{"c1", "c3"}, pendingGrowth: 1},
		{ref: cas.Ref{ID: pid("x"), Kind: cas.KindChunk}, ok: true, rescuedAfter: []string{"c1", "c2"}, condemnAfter: []string{"c3"}},
		{ref: cas.Ref{ID: pid("y"), Kind: cas.KindChunk}, ok: true, rescuedAfter: []string{"c1", "c2"}, condemnAfter: []string{"c3"}}, // visible now
		{ref: cas.Ref{ID: pid("nowhere"), Kind: cas.KindTree}, ok: false, rescuedAfter: []string{"c1", "c2"}, condemnAfter: []string{"c3"}},
	}
	for i, st := range steps {
		before := len(p.pending)
		descend, ok := p.reach(st.ref)
		if descend != st.descend || ok != st.ok || !slices.Equal(trueKeys(p.rescued), st.rescuedAfter) ||
			!slices.Equal(trueKeys(p.condemned), st.condemnAfter) || len(p.pending)-before != st.pendingGrowth {
			t.Fatalf("step %d (%s): descend %v ok %v rescued %v condemned %v pending +%d", i, st.ref.Kind, descend, ok,
				trueKeys(p.rescued), trueKeys(p.condemned), len(p.pending)-before)
		}
	}
	final := p.claim(m)
	if final.State != "deleting" || !slices.Equal(final.Condemned, []string{"c3"}) || final.Round != "r" || !slices.Equal(m.Condemned, []string{"c1", "c2", "c3"}) {
		t.Fatalf("claim = %+v (the read marker %v must not change)", final, m.Condemned)
	}
}

func TestSendOrderChildrenFirst(t *testing.T) {
	// root -> a -> c, root -> b -> c; d is missing but not under root.
	n := map[string]*node{}
	for _, name := range []string{"root", "a", "b", "c", "d"} {
		n[name] = &node{id: pid(name)}
	}
	n["root"].children = []cas.ID{pid("a"), pid("b"), pid("gone")} // gone: r has it
	n["a"].children = []cas.ID{pid("c")}
	n["b"].children = []cas.ID{pid("c")}
	missing := map[cas.ID]*node{}
	for _, x := range n {
		missing[x.id] = x
	}
	var got []string
	for _, x := range sendOrder(missing, pid("root")) {
		for name, y := range n {
			if y == x {
				got = append(got, name)
			}
		}
	}
	if want := []string{"c", "a", "b", "root"}; !slices.Equal(got, want) {
		t.Fatalf("send order %v, want %v", got, want)
	}
	if got := sendOrder(missing, pid("gone")); len(got) != 0 {
		t.Fatalf("send order of a root r has: %d objects, want none", len(got))
	}
}
