package cas

import (
	"context"
	"errors"
	"fmt"
)

// Ref names an object as the object (or root) referring to it sees it.
type Ref struct {
	ID   ID
	Kind Kind
	// Size is a manifest's file size or a chunk's extent length (what a
	// tree entry or a manifest extent says); 0 for a tree.
	Size int64
}

// Walker reaches every object that a set of roots references,
// transitively: a tree's manifests and subtrees, a manifest's chunks. It is
// the one walk behind both garbage collectors (what is live), verify (what
// a state needs), push (what the other side lacks) and pull (what this side
// lacks); they differ only in where objects come from (Load) and which
// ones are descended into (Visit).
//
// The walk goes a level at a time, in batches (one Has or Fetch per batch
// on a remote), each id once. Memory is bounded by the ids reached (Seen)
// and one level; there is no recursion, so a deep tree costs no stack. The
// source is untrusted: Load must deliver objects verified (hash, bounds,
// canonical encoding: cas.Check), and the walker itself checks that each
// delivered object is one asked for in this batch, of the kind its
// referrer says, delivered once, and that every one asked for came.
// Those failures are *WalkError wrapping ErrCorrupt or ErrNotFound.
type Walker struct {
	// Load reads the trees and manifests refs names and calls got once
	// for each with its verified, decoded form. An object the caller
	// treats as absent-but-fine is delivered as a Checked with nil Tree
	// and Manifest (it references nothing).
	Load func(ctx context.Context, refs []Ref, got func(*Checked) error) error
	// Visit, when set, is called with each batch of newly reached refs
	// (chunks too), before any is loaded, and returns which of them to
	// load (a chunk only if asked: pull fetches chunks, nothing else
	// does). Without Visit, or when it returns nil, every tree and
	// manifest is loaded. An error ends the walk.
	Visit func(ctx context.Context, refs []Ref) (descend []bool, err error)
	// Refs, when set, lists what a loaded object references instead of
	// Checked.Refs (push uses it to note each tree's delta base).
	Refs func(ctx context.Context, c *Checked, ref func(Ref)) error
	// Batch is the most refs passed to Visit or Load at once (default
	// 4096). Loads are gathered across Visit batches of one level, so
	// each Load but the level's last gets a full batch.
	Batch int
	// Seen holds the ids reached so far: the walk adds every id it
	// reaches and skips those already in it, so a second Walk with more
	// roots extends the first. Nil: Walk makes a fresh set.
	Seen map[ID]struct{}
	// Progress, when set, is called after each batch with len(Seen).
	Progress func(reached int)
}

// DefaultWalkBatch is the batch size of a Walker without one.
const DefaultWalkBatch = 4096

// Walk reaches everything under roots (see Walker). Roots already in Seen
// are skipped.
func (w *Walker) Walk(ctx context.Context, roots ...Ref) error {
	if w.Seen == nil {
		w.Seen = map[ID]struct{}{}
	}
	batch := w.Batch
	if batch <= 0 {
		batch = DefaultWalkBatch
	}
	var level []Ref
	reach := func(r Ref) {
		if _, ok := w.Seen[r.ID]; !ok {
			w.Seen[r.ID] = struct{}{}
			level = append(level, r)
		}
	}
	for _, r := range roots {
		reach(r)
	}
	for len(level) > 0 {
		cur := level
		level = nil
		// Visit in batches; load in full batches across them (a remote's
		// Fetch per batch), the rest at the end of the level.
		var load []Ref
		for lo := 0; lo < len(cur); lo += batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			sel, err := w.visit(ctx, cur[lo:min(lo+batch, len(cur))])
			if err != nil {
				return err
			}
			for load = append(load, sel...); len(load) >= batch; load = load[batch:] {
				if err := w.load(ctx, load[:batch], reach); err != nil {
					return err
				}
			}
			w.progress()
		}
		if len(load) > 0 {
			if err := w.load(ctx, load, reach); err != nil {
				return err
			}
			w.progress()
		}
	}
	return nil
}

func (w *Walker) progress() {
	if w.Progress != nil {
		w.Progress(len(w.Seen))
	}
}

// visit returns the refs of one batch to load (see Walker.Visit).
func (w *Walker) visit(ctx context.Context, refs []Ref) ([]Ref, error) {
	var descend []bool
	if w.Visit != nil {
		var err error
		if descend, err = w.Visit(ctx, refs); err != nil {
			return nil, err
		}
		if descend != nil && len(descend) != len(refs) {
			return nil, fmt.Errorf("walk: visit answered %d of %d refs", len(descend), len(refs))
		}
	}
	var load []Ref
	for i, r := range refs {
		if descend == nil && r.Kind != KindChunk || descend != nil && descend[i] {
			load = append(load, r)
		}
	}
	return load, nil
}

// load reads refs (distinct ids: Seen admits each once) and reaches what
// they reference, checking that the source delivered exactly what was
// asked for.
func (w *Walker) load(ctx context.Context, refs []Ref, reach func(Ref)) error {
	asked := make(map[ID]Kind, len(refs))
	for _, r := range refs {
		asked[r.ID] = r.Kind
	}
	err := w.Load(ctx, refs, func(c *Checked) error {
		k, ok := asked[c.ID]
		if !ok {
			return &WalkError{ID: c.ID, Kind: c.Kind, Err: fmt.Errorf("%w: not the object asked for", ErrCorrupt)}
		}
		if c.Kind != k {
			return &WalkError{ID: c.ID, Kind: k, Err: fmt.Errorf("%w: is a %s", ErrCorrupt, c.Kind)}
		}
		delete(asked, c.ID)
		if w.Refs != nil {
			return w.Refs(ctx, c, reach)
		}
		return c.Refs(func(id ID, k Kind, size int64) error {
			reach(Ref{ID: id, Kind: k, Size: size})
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, r := range refs {
		if _, missing := asked[r.ID]; missing {
			return &WalkError{ID: r.ID, Kind: r.Kind, Err: fmt.Errorf("%w: asked for, not received", ErrNotFound)}
		}
	}
	return nil
}

// StoreLoader is a Walker's Load reading from s: trees and manifests are
// verified as every read is; one missing is delivered as empty (nothing
// under it is reached) when absentOK, else it is an error. Other failures
// are *WalkError naming the object.
func StoreLoader(s *Store, absentOK bool) func(ctx context.Context, refs []Ref, got func(*Checked) error) error {
	return func(ctx context.Context, refs []Ref, got func(*Checked) error) error {
		for _, r := range refs {
			c := &Checked{Raw: Raw{ID: r.ID, Kind: r.Kind}}
			var err error
			switch r.Kind {
			case KindTree:
				c.Tree, err = s.GetTree(ctx, r.ID)
			case KindManifest:
				c.Manifest, err = s.GetManifest(ctx, r.ID)
			}
			if err != nil && !(absentOK && errors.Is(err, ErrNotFound)) {
				return &WalkError{ID: r.ID, Kind: r.Kind, Err: err}
			}
			if err := got(c); err != nil {
				return err
			}
		}
		return nil
	}
}
