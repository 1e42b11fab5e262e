package merge

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randTree builds trees over a small name space so that two sides' edits
// collide often: names a, b, c up to three levels, few contents, modes and
// xattrs.
type randTree struct{ r *rand.Rand }

func (g randTree) name() string { return string(rune('a' + g.r.IntN(3))) }

func (g randTree) entry(k Kind) *Entry {
	e := &Entry{Kind: k, Mode: []uint32{0o644, 0o755}[g.r.IntN(2)]}
	switch k {
	case File:
		e.ID = fmt.Sprintf("c%d", g.r.IntN(4))
	case Symlink:
		e.ID = fmt.Sprintf("t%d", g.r.IntN(3))
	}
	if g.r.IntN(4) == 0 {
		e.Xattrs = map[string]string{"user." + g.name(): fmt.Sprintf("v%d", g.r.IntN(2))}
	}
	return e
}

func (g randTree) kind() Kind {
	return []Kind{File, File, File, Dir, Dir, Symlink, Special}[g.r.IntN(7)]
}

func (g randTree) base() Tree {
	t := Tree{}
	for range 12 {
		g.add(t)
	}
	return t
}

// add puts a new entry at a random free path whose parents are dirs.
func (g randTree) add(t Tree) {
	p := ""
	for depth := 0; depth < 3; depth++ {
		if p != "" {
			p += "/"
		}
		p += g.name()
		e := t[p]
		if e == nil {
			t[p] = g.entry(g.kind())
			return
		}
		if e.Kind != Dir {
			return
		}
	}
}

func clone(t Tree) Tree {
	out := Tree{}
	for p, e := range t {
		c := *e
		c.Xattrs = maps.Clone(e.Xattrs)
		out[p] = &c
	}
	return out
}

func (g randTree) pick(t Tree) string {
	if len(t) == 0 {
		return ""
	}
	ps := slices.Sorted(maps.Keys(t))
	return ps[g.r.IntN(len(ps))]
}

func removeAll(t Tree, p string) {
	for q := range t {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(t, q)
		}
	}
}

// edit applies a few random changes: content, mode, xattrs, delete (a
// whole subtree), add, kind change, rename (as a move of a subtree).
func (g randTree) edit(t Tree) Tree {
	t = clone(t)
	for range 1 + g.r.IntN(4) {
		p := g.pick(t)
		if p == "" {
			g.add(t)
			continue
		}
		e := t[p]
		switch g.r.IntN(8) {
		case 0:
			if e.Kind == File || e.Kind == Symlink {
				e.ID += "'"
			}
		case 1:
			e.Mode ^= 0o111
		case 2:
			if e.Xattrs == nil {
				e.Xattrs = map[string]string{}
			}
			e.Xattrs["user."+g.name()] = fmt.Sprintf("w%d", g.r.IntN(2))
		case 3:
			removeAll(t, p)
		case 4:
			g.add(t)
		case 5:
			removeAll(t, p)
			t[p] = g.entry(g.kind())
		case 6:
			to := g.name() + g.name()
			if _, ok := t[to]; !ok {
				for q, e := range t {
					if q == p || strings.HasPrefix(q, p+"/") {
						t[to+q[len(p):]] = e
					}
				}
				removeAll(t, p)
			}
		case 7:
			if e.Kind == File {
				e.ID = fmt.Sprintf("c%d", g.r.IntN(4)) // maybe the other side's edit
			}
		}
	}
	return t
}

// TestPlanModel checks PlanTrees on random trees and random edits of two
// sides, path by path, against the rules written out independently here.
func TestPlanModel(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	g := randTree{r: r}
	counts := map[string]int{}
	for i := range 20000 {
		base := g.base()
		ours, theirs := g.edit(base), g.edit(base)
		if r.IntN(10) == 0 {
			theirs = g.edit(ours)
		}
		favor := Side(1 + r.IntN(2))
		plan := PlanTrees(base, ours, theirs, favor)
		if err := checkPlan(base, ours, theirs, favor, plan, counts); err != nil {
			t.Fatalf("case %d (seed %d, favor %s): %v\nbase   %s\nours   %s\ntheirs %s\nplan   %s",
				i, seed, favor, err, dump(base), dump(ours), dump(theirs), dumpPlan(plan))
		}
	}
	t.Logf("steps by rule: %v", counts)
	for _, k := range []string{"take", "meta", "text", "conflict:delete/change", "conflict:kind", "conflict:mode", "conflict:xattr", "conflict:content", "conflict:clash"} {
		if counts[k] == 0 {
			t.Errorf("no case exercised %q", k)
		}
	}
}

func checkPlan(base, ours, theirs Tree, favor Side, plan *Plan, counts map[string]int) error {
	steps := map[string]Step{}
	var order []string
	for _, s := range plan.Steps {
		if _, dup := steps[s.Path]; dup {
			return fmt.Errorf("%s: two steps", s.Path)
		}
		steps[s.Path] = s
		order = append(order, s.Path)
	}
	for i := 1; i < len(order); i++ {
		if strings.HasPrefix(order[i-1], order[i]+"/") {
			return fmt.Errorf("steps out of order: %s before %s", order[i-1], order[i])
		}
	}
	result := Tree{}
	all := map[string]bool{}
	for _, tr := range []Tree{base, ours, theirs} {
		for p := range tr {
			all[p] = true
		}
	}
	favored := ours
	if favor == Theirs {
		favored = theirs
	}
	for p := range all {
		b, o, th := base[p], ours[p], theirs[p]
		s, ok := steps[p]
		if !ok {
			// No step: ours stays, which is right only if theirs changed nothing
			// or made ours' change.
			if !th.Equal(b) && !th.Equal(o) {
				return fmt.Errorf("%s: no step though theirs changed it", p)
			}
			if o != nil {
				result[p] = o
			}
			continue
		}
		if s.Base != b || s.Ours != o || s.Theirs != th {
			return fmt.Errorf("%s: step's entries are not the path's", p)
		}
		if s.Result != nil {
			result[p] = s.Result
		}
		switch s.Action {
		case Take:
			counts["take"]++
			if !s.Result.Equal(th) {
				return fmt.Errorf("%s: take without theirs' entry", p)
			}
			if !o.Equal(b) && (o == nil || th == nil || o.Kind != th.Kind) {
				return fmt.Errorf("%s: took theirs over a change of ours", p)
			}
		case SetMeta, MergeText:
			if s.Action == SetMeta {
				counts["meta"]++
			} else {
				counts["text"]++
			}
			if o == nil || th == nil || o.Kind != th.Kind || s.Result.Kind != o.Kind {
				return fmt.Errorf("%s: %s across kinds or absence", p, s.Action)
			}
			var bb *Entry
			if b != nil && b.Kind == o.Kind {
				bb = b
			}
			// Each field: taken from the side that changed it, or equal.
			pickOK := func(bv, ov, tv, rv string, hasB bool) bool {
				switch {
				case ov == tv:
					return rv == ov
				case hasB && ov == bv:
					return rv == tv
				case hasB && tv == bv:
					return rv == ov
				}
				return false
			}
			bm, bid := "", ""
			if bb != nil {
				bm, bid = fmt.Sprint(bb.Mode), bb.ID
			}
			if !pickOK(bm, fmt.Sprint(o.Mode), fmt.Sprint(th.Mode), fmt.Sprint(s.Result.Mode), bb != nil) {
				return fmt.Errorf("%s: mode %o from base %s ours %o theirs %o", p, s.Result.Mode, bm, o.Mode, th.Mode)
			}
			bothContent := o.ID != th.ID && (bb == nil || (o.ID != bid && th.ID != bid))
			if (s.Action == MergeText) != bothContent || (s.Action == MergeText && o.Kind != File) {
				return fmt.Errorf("%s: %s but content changed by both is %v", p, s.Action, bothContent)
			}
			if !bothContent && !pickOK(bid, o.ID, th.ID, s.Result.ID, bb != nil) {
				return fmt.Errorf("%s: content %s", p, s.Result.ID)
			}
			names := map[string]bool{}
			for _, e := range []*Entry{bb, o, th, s.Result} {
				if e != nil {
					for n := range e.Xattrs {
						names[n] = true
					}
				}
			}
			for n := range names {
				get := func(e *Entry) string {
					if e == nil {
						return ""
					}
					if v, ok := e.Xattrs[n]; ok {
						return "=" + v
					}
					return "-"
				}
				if !pickOK(get(bb), get(o), get(th), get(s.Result), bb != nil) {
					return fmt.Errorf("%s: xattr %s", p, n)
				}
			}
		case Conflict:
			if !s.Result.Equal(favored[p]) {
				return fmt.Errorf("%s: conflict resolved to %v, not the favored side's", p, s.Result)
			}
			if o.Equal(th) || o.Equal(b) || th.Equal(b) {
				// Only a clash may overrule a rule that decides the path.
				if !strings.Contains(s.Reason, "clash") {
					return fmt.Errorf("%s: conflict %q where a rule decides", p, s.Reason)
				}
				counts["conflict:clash"]++
				continue
			}
			switch {
			case o == nil || th == nil:
				counts["conflict:delete/change"]++
			case o.Kind != th.Kind:
				counts["conflict:kind"]++
			case strings.Contains(s.Reason, "clash"):
				counts["conflict:clash"]++
			case strings.HasPrefix(s.Reason, "mode"):
				counts["conflict:mode"]++
			case strings.HasPrefix(s.Reason, "xattr"):
				counts["conflict:xattr"]++
			case strings.Contains(s.Reason, "changed by both"):
				counts["conflict:content"]++
				if o.Kind == File {
					return fmt.Errorf("%s: file content conflict before a text merge", p)
				}
			default:
				return fmt.Errorf("%s: conflict %q", p, s.Reason)
			}
		default:
			return fmt.Errorf("%s: action %d", p, s.Action)
		}
	}
	// The result must be a tree, and a clash subtree must be the favored
	// side's.
	for p := range result {
		if q := parent(p); q != "" && (result[q] == nil || result[q].Kind != Dir) {
			return fmt.Errorf("%s: result has no directory %s", p, q)
		}
	}
	for p, s := range steps {
		if strings.HasPrefix(s.Reason, "directory/file clash") {
			for q := range all {
				if strings.HasPrefix(q, p+"/") && !result[q].Equal(favored[q]) {
					return fmt.Errorf("%s: clash subtree path %s is not the favored side's", p, q)
				}
			}
		}
	}
	return nil
}

func dump(t Tree) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(t)) {
		fmt.Fprintf(&b, "%s=%v ", p, *t[p])
	}
	return b.String()
}

func dumpPlan(p *Plan) string {
	var b strings.Builder
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "%s:%s(%s)->%v ", s.Path, s.Action, s.Reason, s.Result)
	}
	return b.String()
}
