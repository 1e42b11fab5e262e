package merge

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Side names one of the two sides of a merge.
type Side uint8

const (
	Ours   Side = 1
	Theirs Side = 2
)

func (s Side) String() string {
	switch s {
	case Ours:
		return "ours"
	case Theirs:
		return "theirs"
	}
	return fmt.Sprintf("side(%d)", uint8(s))
}

// Kind is an entry's type.
type Kind uint8

const (
	File Kind = iota + 1
	Dir
	Symlink
	Special // a fifo or other node without content
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "directory"
	case Symlink:
		return "symlink"
	case Special:
		return "special file"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is what a merge compares at one path. ID stands for the content
// (a file's content id, a symlink's target; empty for directories): equal
// IDs mean equal content. Times, sizes and owners are not compared: a side
// that only touched a file has not changed it.
type Entry struct {
	Kind   Kind
	Mode   uint32
	ID     string
	Xattrs map[string]string
}

// Equal reports whether a and b are the same entry (nil is absence).
func (a *Entry) Equal(b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && a.Mode == b.Mode && a.ID == b.ID && maps.Equal(a.Xattrs, b.Xattrs)
}

// Tree maps '/'-separated paths (no leading slash; the root is not a path)
// to entries. A path missing from all three trees of a merge is the same
// on all sides: callers may pass only the paths a diff reported, and a
// parent of a listed path that none lists is a directory on all sides.
type Tree map[string]*Entry

// Action is what a merge does at one path of ours.
type Action uint8

const (
	Take      Action = iota + 1 // theirs' entry replaces ours' (Result nil: delete)
	SetMeta                     // ours' content stays, mode and xattrs become Result's
	MergeText                   // both changed a file's content: text-merge the three contents into a file with Result's mode and xattrs
	Conflict                    // no rule decides; Result is the favored side's entry
)

func (a Action) String() string {
	switch a {
	case Take:
		return "take"
	case SetMeta:
		return "meta"
	case MergeText:
		return "text"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Step is the plan for one path. Base, Ours and Theirs are the path's
// entries (nil: absent). Result is the entry the path ends with; for
// MergeText its ID is ours' until the contents are merged.
type Step struct {
	Path               string
	Action             Action
	Base, Ours, Theirs *Entry
	Result             *Entry
	Reason             string // Conflict: why no rule applies
}

// Plan is a three-way tree merge: the steps that change ours or conflict,
// in path order (a directory before its contents). Paths ours keeps as
// they are have no step.
type Plan struct {
	Steps []Step
}

// Conflicts is the number of conflicting steps.
func (p *Plan) Conflicts() int {
	n := 0
	for i := range p.Steps {
		if p.Steps[i].Action == Conflict {
			n++
		}
	}
	return n
}

// PlanTrees merges theirs into ours against base, path by path:
//   - a path one side left as in base takes the other side's entry;
//   - both sides the same: kept once;
//   - both changed a file's content (base a file or absent): MergeText,
//     the caller then merges the contents with Text when all are text;
//   - mode and each xattr merge the same way, independently of content;
//   - deleted on one side and changed on the other, a kind changed on one
//     side and not the same on the other, a symlink retargeted both ways,
//     a mode or xattr changed both ways: Conflict;
//   - a path whose result lies below a path that is no longer a directory
//     (one side deleted or replaced a directory, the other added or changed
//     something inside): that directory and everything below it conflict
//     and take the favored side's subtree.
//
// A rename is a delete and an add. favor (Ours or Theirs) is the side a
// conflicting path resolves to in Result.
func PlanTrees(base, ours, theirs Tree, favor Side) *Plan {
	paths := map[string]bool{}
	for _, t := range []Tree{base, ours, theirs} {
		for p := range t {
			paths[p] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(paths))
	steps := make(map[string]*Step, len(sorted))
	result := make(map[string]*Entry, len(sorted))
	for _, p := range sorted {
		s := planPath(p, base[p], ours[p], theirs[p], favor)
		if s != nil {
			steps[p] = s
			result[p] = s.Result
		} else {
			result[p] = ours[p]
		}
	}
	resolveClashes(sorted, steps, result, base, ours, theirs, favor)
	plan := &Plan{}
	for _, p := range sortedTreeOrder(sorted) {
		if s := steps[p]; s != nil {
			plan.Steps = append(plan.Steps, *s)
		}
	}
	return plan
}

func planPath(p string, b, o, t *Entry, favor Side) *Step {
	s := &Step{Path: p, Base: b, Ours: o, Theirs: t}
	switch {
	case o.Equal(t), t.Equal(b):
		return nil
	case o.Equal(b):
		s.Action, s.Result = Take, t
		return s
	}
	conflict := func(reason string) *Step {
		s.Action, s.Reason = Conflict, reason
		s.Result = o
		if favor == Theirs {
			s.Result = t
		}
		return s
	}
	switch {
	case o == nil:
		return conflict("deleted by ours, changed by theirs")
	case t == nil:
		return conflict("changed by ours, deleted by theirs")
	case o.Kind != t.Kind:
		return conflict(fmt.Sprintf("%s in ours, %s in theirs", o.Kind, t.Kind))
	}
	bm := b // the base entry for content and metadata: same kind or none
	if b != nil && b.Kind != o.Kind {
		bm = nil
	}
	res := &Entry{Kind: o.Kind, ID: o.ID}
	text := false
	switch {
	case o.ID == t.ID:
	case bm != nil && o.ID == bm.ID:
		res.ID = t.ID
	case bm != nil && t.ID == bm.ID:
	case o.Kind == File:
		text = true
	default:
		return conflict(fmt.Sprintf("%s changed by both", o.Kind))
	}
	var bMode *uint32
	var bX map[string]string
	if bm != nil {
		bMode, bX = &bm.Mode, bm.Xattrs
	}
	mode, ok := merge3(bMode, o.Mode, t.Mode)
	if !ok {
		return conflict(fmt.Sprintf("mode changed by both (%04o, %04o)", o.Mode, t.Mode))
	}
	res.Mode = mode
	xs, bad := mergeXattrs(bm != nil, bX, o.Xattrs, t.Xattrs)
	if bad != "" {
		return conflict("xattr " + bad + " changed by both")
	}
	res.Xattrs = xs
	s.Result = res
	switch {
	case text:
		s.Action = MergeText
	case res.Equal(t):
		s.Action = Take
		s.Result = t
	default:
		s.Action = SetMeta
	}
	return s
}

// merge3 merges one value: base nil means the value is new on both sides.
func merge3[T comparable](b *T, o, t T) (T, bool) {
	switch {
	case o == t:
		return o, true
	case b != nil && o == *b:
		return t, true
	case b != nil && t == *b:
		return o, true
	}
	return o, false
}

// mergeXattrs merges extended attributes name by name; bad names the
// first attribute both sides changed differently.
func mergeXattrs(hasBase bool, b, o, t map[string]string) (map[string]string, string) {
	names := map[string]bool{}
	for _, m := range []map[string]string{b, o, t} {
		for n := range m {
			names[n] = true
		}
	}
	var out map[string]string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		bv, bok := b[n]
		ov, ook := o[n]
		tv, tok := t[n]
		type val struct {
			v  string
			ok bool
		}
		var bp *val
		if hasBase {
			bp = &val{bv, bok}
		}
		v, ok := merge3(bp, val{ov, ook}, val{tv, tok})
		if !ok {
			return nil, n
		}
		if v.ok {
			if out == nil {
				out = map[string]string{}
			}
			out[n] = v.v
		}
	}
	return out, ""
}

func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// resolveClashes finds result paths whose parent is not a directory in
// the result and turns the parent's whole subtree into a conflict resolved
// to the favored side, until the result is a tree again. A side's subtree
// is consistent in itself, so each round can only move a clash upwards.
func resolveClashes(sorted []string, steps map[string]*Step, result map[string]*Entry, base, ours, theirs Tree, favor Side) {
	side := ours
	if favor == Theirs {
		side = theirs
	}
	isDir := func(p string) bool {
		if p == "" {
			return true
		}
		e, listed := result[p]
		if !listed {
			return true // unchanged on all sides (see Tree)
		}
		return e != nil && e.Kind == Dir
	}
	for {
		root, found := "", false
		for _, p := range sorted {
			if result[p] != nil && !isDir(parent(p)) {
				root, found = parent(p), true
				break
			}
		}
		if !found {
			return
		}
		lo := sort.SearchStrings(sorted, root)
		for i := lo; i < len(sorted); i++ {
			p := sorted[i]
			if p != root && !strings.HasPrefix(p, root+"/") {
				if p > root+"/" {
					break
				}
				continue
			}
			s := steps[p]
			if s == nil {
				s = &Step{Path: p, Base: base[p], Ours: ours[p], Theirs: theirs[p]}
				steps[p] = s
			}
			if s.Action != Conflict {
				s.Action = Conflict
				if p == root {
					s.Reason = "directory/file clash: one side replaced or deleted it, the other changed what is inside"
				} else {
					s.Reason = "inside a directory/file clash"
				}
			}
			s.Result = side[p]
			result[p] = side[p]
		}
	}
}

// sortedTreeOrder orders paths as a tree walk does: a directory, then its
// contents, then its next sibling ("a", "a/b", "a.c" - plain byte order
// would put "a.c" before "a/b").
func sortedTreeOrder(paths []string) []string {
	out := slices.Clone(paths)
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(strings.ReplaceAll(a, "/", "\x00"), strings.ReplaceAll(b, "/", "\x00"))
	})
	return out
}
