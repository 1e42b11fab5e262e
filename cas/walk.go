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

	// kinds holds, for each id this walker reached, the kinds it was
	// reached as (a bit per Kind). One id may be referenced as a chunk and
	// as a manifest or tree: the same bytes (an id names bytes, not a
	// kind). Each must be followed as its referrer expects, or a manifest
	// first reached as a chunk would never be loaded and its chunks would
	// not be live. A chunk is followed once whatever else its id was
	// reached as (it references nothing).
	kinds map[ID]uint8
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
	if w.kinds == nil {
		w.kinds = map[ID]uint8{}
	}
	var level []Ref
	reach := func(r Ref) {
		bits, mine := w.kinds[r.ID]
		if _, ok := w.Seen[r.ID]; ok && (!mine || r.Kind == KindChunk || bits&kindBit(r.Kind) != 0) {
			return // reached already as this kind, a chunk, or put in Seen by the caller
		}
		w.Seen[r.ID] = struct{}{}
		w.kinds[r.ID] = bits | kindBit(r.Kind)
		level = append(level, r)
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

// ReachedAs reports whether this walker reached id as kind k.
func (w *Walker) ReachedAs(id ID, k Kind) bool {
	return w.kinds[id]&kindBit(k) != 0
}

// CopyReached makes what w has reached a copy of what from has: Seen and
// the kinds each id was reached as. A walk from more roots then extends
// from's without changing it. Copying Seen alone would lose the kinds: an
// id put in Seen by the caller counts as reached as every kind, so one
// from reached only as a chunk would be skipped when reached again as a
// manifest or tree.
func (w *Walker) CopyReached(from *Walker) {
	w.Seen = make(map[ID]struct{}, len(from.Seen))
	for id := range from.Seen {
		w.Seen[id] = struct{}{}
	}
	w.kinds = make(map[ID]uint8, len(from.kinds))
	for id, b := range from.kinds {
		w.kinds[id] = b
	}
}

// kindBit is k's bit in Walker.kinds.
func kindBit(k Kind) uint8 { return 1 << (k & 7) }

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
	var again []Ref // an id asked for as a second kind: loaded after
	for _, r := range refs {
		if _, dup := asked[r.ID]; dup {
			again = append(again, r)
			continue
		}
		asked[r.ID] = r.Kind
	}
	if len(again) > 0 {
		first := make([]Ref, 0, len(asked))
		for _, r := range refs {
			if k, ok := asked[r.ID]; ok && k == r.Kind {
				first = append(first, r)
			}
		}
		if err := w.load(ctx, first, reach); err != nil {
			return err
		}
		return w.load(ctx, again, reach)
	}
	err := w.Load(ctx, refs, func(c *Checked) error {
		k, ok := asked[c.ID]
		if !ok {
			return &WalkError{ID: c.ID, Kind: c.Kind, Err: fmt.Errorf("%w: not the object asked for", ErrCorrupt)}
		}
		if c.Kind != k {
			// The source holds the bytes under another kind (an id names
			// bytes, not a kind: see Store.getKind): they are the object
			// asked for if they are valid as that kind.
			r := c.Raw
			r.Kind = k
			var err error
			if c, err = Check(r); err != nil {
				return &WalkError{ID: r.ID, Kind: k, Err: err}
			}
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
