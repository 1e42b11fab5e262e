package journal

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

// planChain is events 1..n; those in roots record a root (snapshots,
// checkouts).
func planChain(n int64, roots ...int64) []chainEvent {
	var out []chainEvent
	for s := int64(1); s <= n; s++ {
		out = append(out, chainEvent{seq: s, prev: []byte{byte(s - 1)}, hash: []byte{byte(s)}, hasRoot: slices.Contains(roots, s)})
	}
	return out
}

// withEdges marks events of chain as ancestry edges (branch, checkout,
// merge events).
func withEdges(chain []chainEvent, seqs ...int64) []chainEvent {
	for i := range chain {
		chain[i].edge = slices.Contains(seqs, chain[i].seq)
	}
	return chain
}

func planSnap(seq int64) Snapshot {
	return Snapshot{ID: cas.Sum([]byte(fmt.Sprint("snap", seq))), Seq: seq, Time: seq * int64(time.Hour), Message: fmt.Sprint("s", seq)}
}

func TestPlanForget(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	snaps := func(seqs ...int64) []Snapshot {
		var out []Snapshot
		for _, s := range seqs {
			out = append(out, planSnap(s))
		}
		return out
	}
	for _, c := range []struct {
		name      string
		snaps     []Snapshot
		chain     []chainEvent
		policy    Retention
		running   *int64
		keep      []int64 // snapshot seqs kept, newest first
		dropped   []int64 // event seqs removed, oldest first
		anchors   int
		protected bool
	}{
		{name: "no snapshots", policy: Retention{Last: 1}, chain: planChain(3)},
		{name: "keep all is a no-op", snaps: snaps(3, 6, 9), chain: planChain(11, 3, 6, 9), policy: Retention{Last: 5},
			keep: []int64{9, 6, 3}},
		{name: "keep the last: its unit's other events go with the older units",
			snaps: snaps(3, 6, 9), chain: planChain(11, 3, 6, 9), policy: Retention{Last: 1},
			keep: []int64{9}, dropped: []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "the first unit stays whole when its snapshot is kept",
			snaps: snaps(3, 6, 9), chain: planChain(11, 3, 6, 9), policy: Retention{Snapshots: []cas.ID{planSnap(3).ID, planSnap(9).ID}},
			keep: []int64{9, 3}, dropped: []int64{4, 5, 6, 7, 8}},
		{name: "the newest snapshot dropped stays as an anchor for the live events",
			snaps: snaps(3, 6), chain: planChain(8, 3, 6), policy: Retention{Snapshots: []cas.ID{planSnap(3).ID}},
			keep: []int64{3}, dropped: []int64{4, 5}, anchors: 1},
		{name: "no anchor when the next live event records its own root",
			snaps: snaps(3, 6), chain: planChain(8, 3, 6, 7), policy: Retention{Snapshots: []cas.ID{planSnap(3).ID}},
			keep: []int64{3}, dropped: []int64{4, 5, 6}},
		{name: "no anchor when the snapshot is the head",
			snaps: snaps(3, 6), chain: planChain(6, 3, 6), policy: Retention{Snapshots: []cas.ID{planSnap(3).ID}},
			keep: []int64{3}, dropped: []int64{4, 5}, anchors: 1},
		{name: "a running op keeps everything since it began and the base before",
			snaps: snaps(3, 6, 9), chain: planChain(11, 3, 6, 9), policy: Retention{Last: 1}, running: i64(5),
			keep: []int64{9, 6, 3}, protected: true},
		{name: "a running op that began at a snapshot needs no base before it",
			snaps: snaps(3, 6, 9), chain: planChain(11, 3, 6, 9), policy: Retention{Last: 1}, running: i64(6),
			keep: []int64{9, 6}, dropped: []int64{1, 2, 3, 4, 5}, protected: true}, // 4, 5 replayed from 3
		{name: "a running op after the newest snapshot keeps only it",
			snaps: snaps(3, 6, 9), chain: planChain(11, 3, 6, 9), policy: Retention{Snapshots: []cas.ID{planSnap(3).ID}}, running: i64(10),
			keep: []int64{9, 3}, dropped: []int64{4, 5, 6, 7, 8}, protected: true},
		{name: "ancestry edges stay amid dropped units",
			snaps: snaps(3, 6, 9), chain: withEdges(planChain(11, 1, 3, 5, 6, 9), 1, 5, 8), policy: Retention{Last: 1},
			keep: []int64{9}, dropped: []int64{2, 3, 4, 6, 7}}, // 1 branch, 5 checkout, 8 merge
		{name: "a checkout kept amid a dropped unit, the anchor after it too",
			snaps: snaps(3, 6), chain: withEdges(planChain(8, 1, 3, 5, 6), 1, 5), policy: Retention{Snapshots: []cas.ID{planSnap(3).ID}},
			keep: []int64{3}, dropped: []int64{4}, anchors: 1},
		{name: "within a duration of now",
			snaps: snaps(3, 6, 9), chain: planChain(9, 3, 6, 9), policy: Retention{Within: 4 * time.Hour},
			keep: []int64{9, 6}, dropped: []int64{1, 2, 3, 4, 5}},
	} {
		p := planSnapshots(forgetInput{Branch: "b", Snapshots: c.snaps, Policy: c.policy, Running: c.running, Now: time.Unix(0, 10*int64(time.Hour))})
		var kept []int64
		for _, d := range p.Keep {
			kept = append(kept, d.Seq)
			if len(d.Reasons) == 0 {
				t.Errorf("%s: snapshot @%d kept with no reason", c.name, d.Seq)
			}
		}
		if !slices.Equal(kept, c.keep) || len(p.Keep)+len(p.Forget) != len(c.snaps) || (p.Protected != "") != c.protected {
			t.Errorf("%s: kept %v (forgot %d, protected %q), want %v", c.name, kept, len(p.Forget), p.Protected, c.keep)
			continue
		}
		p.chain = c.chain
		p.cut()
		var dropped []int64
		for _, st := range p.stretches() {
			for _, e := range st {
				dropped = append(dropped, e.seq)
			}
		}
		if !slices.Equal(dropped, c.dropped) || p.Events != int64(len(c.dropped)) || p.Anchors != c.anchors {
			t.Errorf("%s: dropped %v (%d events), %d anchors; want %v, %d anchors", c.name, dropped, p.Events, p.Anchors, c.dropped, c.anchors)
		}
	}
}

func TestForgetStretches(t *testing.T) {
	p := &forgetPlan{chain: planChain(7), drop: []bool{true, true, false, true, false, false, true}}
	var got [][]int64
	for _, st := range p.stretches() {
		var seqs []int64
		for _, e := range st {
			seqs = append(seqs, e.seq)
		}
		got = append(got, seqs)
	}
	if want := [][]int64{{1, 2}, {4}, {7}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stretches %v, want %v", got, want)
	}
}
