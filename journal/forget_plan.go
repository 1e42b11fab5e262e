package journal

import (
	"fmt"
	"sort"
	"time"
)

// forgetInput is what planning a forget on one branch needs, loaded by
// the caller: the branch's snapshots (any order), the policy, the time it
// counts back from, and where the earliest running op on the branch began
// (nil: none runs).
type forgetInput struct {
	Branch    string
	Snapshots []Snapshot
	Policy    Retention
	Now       time.Time
	Running   *int64
}

// forgetPlan is what a forget does to one branch, computed with no I/O:
// planSnapshots decides the snapshots, cut (given the chain) the events.
// Its BranchForget is the report (Events counting the events dropped).
type forgetPlan struct {
	BranchForget
	seqs  []int64 // the snapshots' seqs, oldest first
	keep  []bool  // whether each is kept, oldest first
	chain []chainEvent
	drop  []bool // per chain event, set by cut
}

// planSnapshots applies the policy to the snapshots, newest first, and
// protects what a running op may undo to: every snapshot at or after the
// point where it began, and the last one before it as the base its state
// replays from (unless one is exactly there).
func planSnapshots(in forgetInput) *forgetPlan {
	snaps := append([]Snapshot(nil), in.Snapshots...)
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Seq > snaps[j].Seq }) // newest first
	reasons := keepSnapshots(snaps, in.Policy, in.Now)
	p := &forgetPlan{BranchForget: BranchForget{Branch: in.Branch, Keep: []SnapshotDecision{}, Forget: []SnapshotDecision{}}}
	if in.Running != nil {
		base := true
		for i := range snaps {
			need := snaps[i].Seq >= *in.Running
			if !need && base {
				need, base = true, false
			}
			if snaps[i].Seq == *in.Running {
				base = false
			}
			if need && reasons[i] == nil {
				reasons[i] = []string{"a running operation needs it"}
				p.Protected = "history since a running operation began is kept"
			}
		}
	}
	n := len(snaps)
	p.seqs, p.keep = make([]int64, n), make([]bool, n)
	for i := range snaps {
		d := SnapshotDecision{ID: snaps[i].ID, Seq: snaps[i].Seq, Root: snaps[i].Root, Time: snaps[i].Time, Message: snaps[i].Message, Reasons: reasons[i]}
		p.seqs[n-1-i], p.keep[n-1-i] = snaps[i].Seq, reasons[i] != nil
		if reasons[i] != nil {
			p.Keep = append(p.Keep, d)
		} else {
			p.Forget = append(p.Forget, d)
		}
	}
	return p
}

// cut marks the events of p.chain (oldest first) to remove and counts the
// anchors and the dropped events.
//
// Unit i of the chain is (seqs[i-1], seqs[i]]. A kept snapshot's event
// stays; the rest of its unit stays only when the state it replays from
// stays too (the previous snapshot is kept, or it is the branch's first
// unit, which starts at the branch's own root). A dropped snapshot's unit
// goes, except the newest snapshot's event when dropped: the live events
// after it replay from it (an anchor). The ancestry edges (branch,
// checkout and merge events) always stay, wherever they are: merge bases
// and the history graph are found through them (DB.MergeBase), and each
// is one small event.
func (p *forgetPlan) cut() {
	chain, seqs, keep, n := p.chain, p.seqs, p.keep, len(p.seqs)
	p.drop = make([]bool, len(chain))
	anchors := map[int]bool{}
	j := 0
	for i := range seqs {
		lo := int64(0)
		if i > 0 {
			lo = seqs[i-1]
		}
		whole := keep[i] && (i == 0 || keep[i-1])
		for ; j < len(chain) && chain[j].seq <= seqs[i]; j++ {
			switch {
			case chain[j].seq <= lo || whole:
			case chain[j].seq == seqs[i] && keep[i]:
			case chain[j].seq == seqs[i] && i+1 == n:
				anchors[j] = true
			default:
				p.drop[j] = true
			}
		}
	}
	for j := range chain {
		if chain[j].edge {
			p.drop[j] = false
		}
	}
	p.settleAnchors(anchors)
	p.Events = 0
	for _, d := range p.drop {
		if d {
			p.Events++
		}
	}
}

// settleAnchors keeps an anchor only if the next event kept after it
// replays from it; if that event records a root of its own (a kept
// snapshot, a checkout, an anchor left by an earlier forget), the anchor
// would only keep a tree alive. Backwards, so each decision sees the final
// state of the chain after it. The branch's last event always stays: it is
// the head.
func (p *forgetPlan) settleAnchors(anchors map[int]bool) {
	chain := p.chain
	for k := len(chain) - 1; k >= 0; k-- {
		if !anchors[k] {
			continue
		}
		m := k + 1
		for m < len(chain) && p.drop[m] {
			m++
		}
		if m < len(chain) && chain[m].hasRoot {
			p.drop[k] = true
		} else {
			p.Anchors++
		}
	}
}

// stretches returns the runs of consecutive dropped events, oldest first.
func (p *forgetPlan) stretches() [][]chainEvent {
	var out [][]chainEvent
	for k := 0; k < len(p.chain); {
		if !p.drop[k] {
			k++
			continue
		}
		e := k
		for e+1 < len(p.chain) && p.drop[e+1] {
			e++
		}
		out = append(out, p.chain[k:e+1])
		k = e + 1
	}
	return out
}

// keepSnapshots applies a policy to snapshots sorted newest first and
// returns the reasons each kept one is kept (nil: dropped).
func keepSnapshots(snaps []Snapshot, r Retention, now time.Time) [][]string {
	reasons := make([][]string, len(snaps))
	why := func(i int, s string) { reasons[i] = append(reasons[i], s) }
	for i := range snaps {
		if i < r.Last {
			why(i, fmt.Sprintf("last %d", r.Last))
		}
		if r.Within > 0 && now.Sub(time.Unix(0, snaps[i].Time)) <= r.Within {
			why(i, "within "+r.Within.String())
		}
		for _, id := range r.Snapshots {
			if id == snaps[i].ID {
				why(i, "named")
			}
		}
	}
	bucket := func(n int, name string, key func(t time.Time) string) {
		if n <= 0 {
			return
		}
		last, used := "", 0
		for i := range snaps {
			k := key(time.Unix(0, snaps[i].Time).Local())
			if k == last {
				continue
			}
			last = k
			if used >= n {
				return
			}
			used++
			why(i, fmt.Sprintf("%s %d", name, n))
		}
	}
	bucket(r.Hourly, "hourly", func(t time.Time) string { return t.Format("2006-01-02 15") })
	bucket(r.Daily, "daily", func(t time.Time) string { return t.Format("2006-01-02") })
	bucket(r.Weekly, "weekly", func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-%d", y, w) })
	bucket(r.Monthly, "monthly", func(t time.Time) string { return t.Format("2006-01") })
	return reasons
}

// chainEvent is one event of a branch's chain, as Forget needs it.
type chainEvent struct {
	seq     int64
	prev    []byte
	hash    []byte
	hasRoot bool
	edge    bool // an ancestry edge (branch, checkout, merge): never dropped
}
