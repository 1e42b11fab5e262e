package cas

import (
	"context"
	"fmt"
	"math"

	"github.com/artrt/art/internal/errclass"
)

// Expanse is what a tree expands to once written out: every entry at
// every path that names it, the bytes of its files, and its nesting
// (1 for a tree without subdirectories).
type Expanse struct {
	Entries, Bytes int64
	Depth          int
}

// Sizer measures trees. A tree is named by the hash of its entries, so
// trees form a DAG: a few kilobytes can name one subtree at billions of
// paths. Sizer reads each distinct tree once (memoized by id, for its
// whole life) and walks with an explicit stack, so its work is
// proportional to the trees stored, not to the paths they name.
type Sizer struct {
	objs *Store
	// MaxDepth, if positive, refuses a tree nested deeper (ErrTooDeep)
	// as soon as the walk gets there.
	MaxDepth int
	memo     map[ID]Expanse
	// known summarizes trees already decoded elsewhere (Learn), so
	// measuring them reads nothing.
	known map[ID]summary
}

// ErrTooDeep reports a tree nested deeper than a Sizer's MaxDepth.
var ErrTooDeep = errclass.New(errclass.Invalid, "directories nested too deep")

// WalkError names the object a Sizer or a Walker could not read.
type WalkError struct {
	ID   ID
	Kind Kind // 0: a tree (a Sizer's)
	Err  error
}

func (e *WalkError) Error() string {
	k := KindTree
	if e.Kind != 0 {
		k = e.Kind
	}
	return fmt.Sprintf("%s %s: %v", k, e.ID, e.Err)
}
func (e *WalkError) Unwrap() error { return e.Err }

// summary is one tree's own entries and file bytes, and its subtrees.
type summary struct {
	own  Expanse
	dirs []ID
}

func summarize(t *Tree) summary {
	s := summary{own: Expanse{Depth: 1}}
	for i := range t.Entries {
		e := &t.Entries[i]
		s.own.Entries++
		switch e.Kind {
		case EntryFile:
			s.own.Bytes = addSat(s.own.Bytes, e.Size)
		case EntryDir:
			s.dirs = append(s.dirs, e.Target)
		}
	}
	return s
}

// NewSizer returns a Sizer reading trees from objs.
func NewSizer(objs *Store) *Sizer {
	return &Sizer{objs: objs, memo: map[ID]Expanse{}, known: map[ID]summary{}}
}

// Learn records the summary of tree id, decoded elsewhere.
func (z *Sizer) Learn(id ID, t *Tree) { z.known[id] = summarize(t) }

// Tree returns the expanse of tree id. Sums saturate at MaxInt64.
func (z *Sizer) Tree(ctx context.Context, id ID) (Expanse, error) {
	if x, ok := z.memo[id]; ok {
		return x, nil
	}
	type frame struct {
		id   ID
		s    summary
		next int // s.dirs[next] is the next subtree to add
		sum  Expanse
	}
	var stack []*frame
	push := func(id ID) error {
		if z.MaxDepth > 0 && len(stack) >= z.MaxDepth {
			return fmt.Errorf("%w (more than %d)", ErrTooDeep, z.MaxDepth)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s, ok := z.known[id]
		if !ok {
			t, err := z.objs.GetTree(ctx, id)
			if err != nil {
				return &WalkError{ID: id, Err: err}
			}
			s = summarize(t)
		}
		stack = append(stack, &frame{id: id, s: s, sum: s.own})
		return nil
	}
	if err := push(id); err != nil {
		return Expanse{}, err
	}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		if f.next < len(f.s.dirs) {
			x, ok := z.memo[f.s.dirs[f.next]]
			if !ok {
				// A child is never on the stack: its id is the hash of
				// entries that would have to contain its own hash.
				if err := push(f.s.dirs[f.next]); err != nil {
					return Expanse{}, err
				}
				continue // back to this subtree once it is measured
			}
			f.sum.Entries = addSat(f.sum.Entries, x.Entries)
			f.sum.Bytes = addSat(f.sum.Bytes, x.Bytes)
			f.sum.Depth = max(f.sum.Depth, x.Depth+1)
			f.next++
			continue
		}
		z.memo[f.id] = f.sum
		delete(z.known, f.id)
		stack = stack[:len(stack)-1]
	}
	return z.memo[id], nil
}

func addSat(a, b int64) int64 {
	if b < 0 || a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
