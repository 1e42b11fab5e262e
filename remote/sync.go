package remote

import (
	"context"
	"errors"
	"fmt"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
)

// Stats summarize a push or a pull.
type Stats struct {
	Branches []BranchResult `json:"branches"`
	// Objects and Bytes moved: objects sent (push) or received (pull), and
	// the bytes on the wire for them (stored, compressed form; pack
	// indexes included).
	Objects int64 `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// DedupObjects is how many objects the walk found already on the
	// other side (each may stand for a whole subtree); DedupBytes the file
	// content under them, which did not move.
	DedupObjects int64 `json:"dedup_objects"`
	DedupBytes   int64 `json:"dedup_bytes"`
}

// BranchResult is what happened to one branch.
type BranchResult struct {
	Branch string `json:"branch"`
	Old    cas.ID `json:"old"` // zero: the branch did not exist
	New    cas.ID `json:"new"`
	// Status: "up to date", "created", "fast-forward" or "forced".
	Status string `json:"status"`
}

// Options configure Push and Pull.
type Options struct {
	// Name describes the remote in journal op descriptions ("origin",
	// a path...).
	Name string
	// Force moves branches that are not fast-forwards.
	Force bool
	// Progress, when set, is called on the calling goroutine after each
	// batch of objects.
	Progress func(Stats)
	// MaxEntries and MaxBytes bound what a pulled state may expand to:
	// entries at every path, and file bytes, counting a subtree once per
	// place it appears (a state of shared subtrees can name billions of
	// paths in kilobytes). 0 means DefaultMaxEntries / DefaultMaxBytes;
	// a pull over either fails with ErrTooLarge before any branch moves.
	MaxEntries, MaxBytes int64
}

// Default bounds of a pulled state's expansion (Options.MaxEntries,
// MaxBytes): ten times a large monorepo, far below what would exhaust a
// host that pulls it into a directory.
const (
	DefaultMaxEntries = 10_000_000
	DefaultMaxBytes   = 1 << 40
)

// emptyTree is the id of an empty directory: replacing it loses nothing,
// so a new store's main branch takes any pull.
var emptyTree = cas.Sum([]byte("artt\x01\x00\x00"))

// fetchBatch bounds the ids asked for in one Fetch or Has.
const fetchBatch = 4096

// Push sends branches (all local branches when empty) to r. For each branch
// the local head is first recorded as a snapshot if its root is not already
// on the branch's chain (so that a later push can recognise the remote's
// root as an ancestor), then compared with the remote ref: equal roots cost
// nothing more. Otherwise the missing objects are sent children first and
// the ref is moved by compare-and-swap; a remote root that is not on the
// local branch's chain is refused with ErrNonFastForward unless
// opts.Force. Objects sent before an error stay on the remote, so a rerun
// sends only the rest.
func Push(ctx context.Context, db *journal.DB, r Remote, branches []string, opts Options) (Stats, error) {
	var st Stats
	if len(branches) == 0 {
		bs, err := db.Branches(ctx)
		if err != nil {
			return st, err
		}
		for _, b := range bs {
			branches = append(branches, b.Name)
		}
	}
	for _, name := range branches {
		var res BranchResult
		var err error
		// A gc of the remote that ran (file) or began (S3) during the
		// push makes its Has answers untrustworthy: SetRef refuses with
		// journal.ErrGCRaced, and the branch is pushed again from the
		// start, sending what the gc took or condemned.
		for try := 0; ; try++ {
			res, err = pushBranch(ctx, db, r, name, opts, &st)
			if !errors.Is(err, journal.ErrGCRaced) || try == 3 {
				break
			}
			rs, ok := r.(restarter)
			if !ok {
				break
			}
			if err = rs.restart(ctx); err != nil {
				break
			}
		}
		if err != nil {
			return st, fmt.Errorf("push %s: %w", termtext.Quote(name), err)
		}
		st.Branches = append(st.Branches, res)
	}
	return st, nil
}

// restarter is implemented by remotes whose Has answers are only good
// until a gc: restart makes them fresh for a new attempt.
type restarter interface {
	restart(ctx context.Context) error
}

func pushBranch(ctx context.Context, db *journal.DB, r Remote, name string, opts Options, st *Stats) (BranchResult, error) {
	ref, err := r.Ref(ctx, name)
	if err != nil {
		return BranchResult{}, err
	}
	head, err := db.Head(ctx, name)
	if err != nil {
		return BranchResult{}, err
	}
	root := head.Root
	res := BranchResult{Branch: name, Old: ref.Root, New: root}
	if ref.Exists() && ref.Root == root {
		res.Status = "up to date"
		return res, nil
	}
	if ok, err := db.HasRoot(ctx, name, root); err != nil {
		return res, err
	} else if !ok {
		snap, err := db.TakeSnapshot(ctx, name, "push to "+opts.Name)
		if err != nil {
			return res, err
		}
		root, res.New = snap.Root, snap.Root
	}
	res.Status = "created"
	if ref.Exists() {
		res.Status = "fast-forward"
		ok, err := db.HasRoot(ctx, name, ref.Root)
		if err != nil {
			return res, err
		}
		ok = ok || ref.Root == emptyTree // nothing to lose
		if !ok {
			if !opts.Force {
				return res, fmt.Errorf("%w: the remote's %s is at %s, which local %s never had (pull it first, or push --force to replace it)",
					ErrNonFastForward, termtext.Quote(name), ref.Root.Short(), termtext.Quote(name))
			}
			res.Status = "forced"
		}
	}
	var base cas.ID // what the remote's tree at each path was: delta bases
	if ref.Exists() {
		base = ref.Root
	}
	if err := sendState(ctx, db.Objects(), r, root, base, opts, st); err != nil {
		return res, err
	}
	if err := r.SetRef(ctx, ref, root); err != nil {
		if errors.Is(err, ErrRefChanged) {
			return res, fmt.Errorf("%w (another push won the race; the objects sent stay, rerun to retry)", err)
		}
		return res, err
	}
	return res, nil
}

// node is one object found missing on the other side during a walk.
type node struct {
	id       cas.ID
	kind     cas.Kind
	base     cas.ID   // trees: the tree at the same path in the remote's state
	children []cas.ID // the missing ones, for the post-order send
	// held: the other side has the id, but this side holds it as another
	// kind (an id names bytes: a chunk with a manifest's bytes), so it may
	// lack what the object references as this kind. The object is not
	// sent; it is descended into, and its missing children are sent before
	// the objects referring to it.
	held bool
}

// hasKinds is r.HasKinds with, beside the kinds, whether each is held.
func hasKinds(ctx context.Context, r Remote, ids []cas.ID) ([]bool, []cas.Kind, error) {
	kinds, err := r.HasKinds(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	if len(kinds) != len(ids) {
		return nil, nil, fmt.Errorf("remote answered %d of %d kinds", len(kinds), len(ids))
	}
	has := make([]bool, len(ids))
	for i, k := range kinds {
		has[i] = k != 0
	}
	return has, kinds, nil
}

// sendState sends every object under root that r lacks. It walks top-down
// one level at a time (a Has per level), skipping subtrees r holds, then
// sends children before parents in packs of about packTarget bytes. base is
// the root of the remote's current state (zero if none): each missing tree
// is offered with the tree at its path there as a delta base.
func sendState(ctx context.Context, objs *cas.Store, r Remote, root, base cas.ID, opts Options, st *Stats) error {
	missing, err := findMissing(ctx, objs, r, root, base, st)
	if err != nil {
		return err
	}
	return sendObjects(ctx, objs, r, sendOrder(missing, root), opts, st)
}

// findMissing walks from root and returns the objects r lacks, each linked
// to its missing children; it counts what r already has as dedup in st.
func findMissing(ctx context.Context, objs *cas.Store, r Remote, root, base cas.ID, st *Stats) (map[cas.ID]*node, error) {
	missing := map[cas.ID]*node{}
	sz := newSizer(objs)
	bases := map[cas.ID]cas.ID{root: base} // trees: see node.base
	parents := map[cas.ID][]*node{}        // the missing objects referring to an id not yet known missing
	w := &cas.Walker{Batch: fetchBatch, Load: cas.StoreLoader(objs, false)}
	w.Visit = func(ctx context.Context, refs []cas.Ref) ([]bool, error) {
		ids := make([]cas.ID, len(refs))
		for i, ref := range refs {
			ids[i] = ref.ID
		}
		has, kinds, err := hasKinds(ctx, r, ids)
		if err != nil {
			return nil, err
		}
		load := make([]bool, len(refs))
		for i, ref := range refs {
			// Held as another kind (an id names bytes: a chunk with a
			// manifest's bytes), it promises no closure as this one:
			// descend, sending what it lacks. Held as this kind, its
			// closure is there whatever our own row's kind.
			held := has[i] && ref.Kind != cas.KindChunk && kinds[i] != ref.Kind
			if has[i] {
				st.DedupObjects++
				n, err := sz.size(ctx, ref.ID, ref.Kind, ref.Size)
				if err != nil {
					return nil, err
				}
				st.DedupBytes += n
				if !held {
					continue
				}
			}
			// One id may be reached as a chunk and, later, as a manifest
			// or tree: one node, of the kind that has children.
			n := missing[ref.ID]
			if n == nil {
				n = &node{id: ref.ID, base: bases[ref.ID], held: held}
				missing[ref.ID] = n
			}
			if n.kind == 0 || ref.Kind != cas.KindChunk {
				n.kind = ref.Kind
			}
			for _, p := range parents[ref.ID] {
				p.children = append(p.children, ref.ID)
			}
			delete(parents, ref.ID)
			load[i] = ref.Kind != cas.KindChunk
		}
		return load, nil
	}
	w.Refs = func(ctx context.Context, c *cas.Checked, reach func(cas.Ref)) error {
		n := missing[c.ID] // a node: only missing or held objects are loaded
		return treeRefs(ctx, objs, c, bases[c.ID], func(ref cas.Ref, sub cas.ID) {
			// A missing id known as another kind (a chunk with a
			// manifest's bytes) is still reached as this one, so that
			// what it references as this kind is sent too.
			if m := missing[ref.ID]; m != nil && (ref.Kind == cas.KindChunk || m.kind == ref.Kind) {
				n.children = append(n.children, ref.ID)
				return
			}
			if _, seen := w.Seen[ref.ID]; !seen && !sub.IsZero() {
				bases[ref.ID] = sub
			}
			parents[ref.ID] = append(parents[ref.ID], n) // linked if found missing or held
			reach(ref)
		})
	}
	if err := w.Walk(ctx, cas.Ref{ID: root, Kind: cas.KindTree}); err != nil {
		return nil, objectError(err)
	}
	return missing, nil
}

// sendOrder lists the missing objects under root children first (a
// post-order from the root), so that the other side never holds an object
// whose children it lacks.
func sendOrder(missing map[cas.ID]*node, root cas.ID) []*node {
	var order []*node
	done := map[cas.ID]bool{}
	var visit func(n *node)
	visit = func(n *node) {
		done[n.id] = true
		for _, c := range n.children {
			if m := missing[c]; m != nil && !done[c] {
				visit(m)
			}
		}
		if !n.held {
			order = append(order, n)
		}
	}
	if m := missing[root]; m != nil {
		visit(m)
	}
	return order
}

// sendObjects sends the objects of order, in that order, in packs of
// about packTarget bytes, each missing tree with its delta base.
func sendObjects(ctx context.Context, objs *cas.Store, r Remote, order []*node, opts Options, st *Stats) error {
	var pack []Object
	var packBytes int64
	flush := func() error {
		n, err := r.Send(ctx, pack)
		if err != nil {
			return err
		}
		st.Objects += int64(len(pack))
		st.Bytes += n
		pack, packBytes = pack[:0], 0
		if opts.Progress != nil {
			opts.Progress(*st)
		}
		return nil
	}
	for _, n := range order {
		raw, err := objs.GetRaw(ctx, n.id)
		if err != nil {
			return &ObjectError{ID: n.id, Kind: n.kind, Err: err}
		}
		// Sent as the kind the walk checked it as, not our row's (an id
		// names bytes): the other side's entry then says what closure
		// was sent with it (a chunk row sent as a manifest with its
		// chunks, a manifest row sent as a mere chunk without them).
		raw.Kind = n.kind
		o := Object{Raw: raw}
		if n.kind == cas.KindTree && !n.base.IsZero() {
			if k, b, err := objs.Get(ctx, n.base); err == nil && k == cas.KindTree {
				o.Base, o.BaseData = n.base, b
			}
		}
		pack = append(pack, o)
		packBytes += int64(len(raw.Data))
		if packBytes >= packTarget {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if len(pack) > 0 {
		return flush()
	}
	return nil
}

// treeRefs calls ref for what c references: a manifest's chunks, or a
// tree's manifests and subtrees with, for a subtree, the tree at the same
// name in base (a tree id that may be zero or absent locally: then no
// base).
func treeRefs(ctx context.Context, objs *cas.Store, c *cas.Checked, base cas.ID, ref func(r cas.Ref, base cas.ID)) error {
	if c.Tree == nil {
		return c.Refs(func(id cas.ID, k cas.Kind, size int64) error {
			ref(cas.Ref{ID: id, Kind: k, Size: size}, cas.ID{})
			return nil
		})
	}
	var old *cas.Tree
	if !base.IsZero() {
		old, _ = objs.GetTree(ctx, base) // no base is fine: whole trees are sent
	}
	for i := range c.Tree.Entries {
		e := &c.Tree.Entries[i]
		switch e.Kind {
		case cas.EntryFile:
			ref(cas.Ref{ID: e.Target, Kind: cas.KindManifest, Size: e.Size}, cas.ID{})
		case cas.EntryDir:
			var sub cas.ID
			if old != nil {
				if oe, ok := old.Lookup(e.Name); ok && oe.Kind == cas.EntryDir {
					sub = oe.Target
				}
			}
			ref(cas.Ref{ID: e.Target, Kind: cas.KindTree}, sub)
		}
	}
	return nil
}

// sizer measures the file content under objects the other side already
// has: a cas.Sizer (each tree read once per transfer, whatever number of
// paths name it), with a failure naming the object.
type sizer struct{ z *cas.Sizer }

func newSizer(objs *cas.Store) *sizer { return &sizer{cas.NewSizer(objs)} }

// learn records the summary of tree id, decoded elsewhere.
func (z *sizer) learn(id cas.ID, t *cas.Tree) { z.z.Learn(id, t) }

// size is the content under id: an extent's or a file's size (passed in),
// or the sum of a tree's files.
func (z *sizer) size(ctx context.Context, id cas.ID, k cas.Kind, size int64) (int64, error) {
	if k != cas.KindTree {
		return size, nil
	}
	x, err := z.tree(ctx, id)
	return x.Bytes, err
}

// tree is the expanse of tree id.
func (z *sizer) tree(ctx context.Context, id cas.ID) (cas.Expanse, error) {
	x, err := z.z.Tree(ctx, id)
	var we *cas.WalkError
	if errors.As(err, &we) {
		return x, &ObjectError{ID: we.ID, Kind: cas.KindTree, Err: we.Err}
	}
	return x, err
}

// Pull fetches branches (all of the remote's when empty) from r into db.
// A branch that does not exist locally is created; one whose head is the
// remote's root or one of its earlier roots is fast-forwarded; anything else
// is refused with ErrNonFastForward unless opts.Force. The objects of each
// branch are received in one transaction, each verified, and the branch
// moves (by compare-and-swap on its head) only once the whole state is in:
// a missing, corrupt or malformed object fails the pull with an error naming
// it and leaves the store and its branches as they were.
func Pull(ctx context.Context, db *journal.DB, r Remote, branches []string, opts Options) (Stats, error) {
	var st Stats
	var refs []Ref
	if len(branches) == 0 {
		all, err := r.Refs(ctx)
		if err != nil {
			return st, err
		}
		refs = all
	} else {
		for _, name := range branches {
			ref, err := r.Ref(ctx, name)
			if err != nil {
				return st, err
			}
			if !ref.Exists() {
				return st, fmt.Errorf("pull %s: %w", termtext.Quote(name), ErrNoBranch)
			}
			refs = append(refs, ref)
		}
	}
	for _, ref := range refs {
		res, err := pullBranch(ctx, db, r, ref, opts, &st)
		if err != nil {
			return st, fmt.Errorf("pull %s: %w", termtext.Quote(ref.Branch), err)
		}
		st.Branches = append(st.Branches, res)
	}
	return st, nil
}

func pullBranch(ctx context.Context, db *journal.DB, r Remote, ref Ref, opts Options, st *Stats) (BranchResult, error) {
	if err := journal.ValidBranchName(ref.Branch); err != nil {
		return BranchResult{}, fmt.Errorf("%w: remote branch name: %v", ErrMalformed, err)
	}
	res := BranchResult{Branch: ref.Branch, New: ref.Root, Status: "created"}
	var expect cas.ID
	b, err := db.Branch(ctx, ref.Branch)
	switch {
	case errors.Is(err, journal.ErrBranchNotFound):
	case err != nil:
		return res, err
	default:
		// Before fetching anything: a branch a session holds cannot move
		// (MoveBranch would refuse it at the end).
		if err := db.BranchFree(ref.Branch); err != nil {
			return res, err
		}
		expect = b.HeadHash
		head, err := db.Head(ctx, ref.Branch)
		if err != nil {
			return res, err
		}
		res.Old = head.Root
		if head.Root == ref.Root {
			res.Status = "up to date"
			return res, nil
		}
		res.Status = "forced"
		if head.Root == emptyTree {
			res.Status = "fast-forward" // nothing to lose
		}
		for _, h := range ref.History {
			if h == head.Root {
				res.Status = "fast-forward"
				break
			}
		}
		if res.Status == "forced" && !opts.Force {
			return res, fmt.Errorf("%w: local %s is at %s, which the remote's %s never had (push it first, or pull --force to replace it)",
				ErrNonFastForward, termtext.Quote(ref.Branch), head.Root.Short(), termtext.Quote(ref.Branch))
		}
	}
	// The objects are received in one transaction and the branch moved in
	// another; a gc in between could collect an old unreferenced object
	// the receive found present. MoveBranch refuses then, and receiving
	// again stores what is missing.
	for try := 0; ; try++ {
		gen, err := db.GCGeneration(ctx)
		if err != nil {
			return res, err
		}
		err = db.ReceiveObjects(ctx, func(objs *cas.Store) error {
			if l, ok := r.(localBases); ok {
				l.SetLocal(objs)
				defer l.SetLocal(nil)
			}
			sz := newSizer(objs)
			if err := receiveState(ctx, objs, r, ref.Root, opts, st, sz); err != nil {
				return err
			}
			return checkExpanse(ctx, sz, ref.Root, opts)
		})
		if err != nil {
			return res, err
		}
		desc := fmt.Sprintf("pull %s %s: %s", opts.Name, ref.Branch, ref.Root.Short())
		_, err = db.MoveBranch(ctx, ref.Branch, expect, ref.Root, "pull", desc, gen)
		if errors.Is(err, journal.ErrGCRaced) && try < 3 {
			continue
		}
		return res, err
	}
}

// checkExpanse refuses a state that expands past opts' bounds. It reads
// each distinct tree once.
func checkExpanse(ctx context.Context, sz *sizer, root cas.ID, opts Options) error {
	maxE, maxB := opts.MaxEntries, opts.MaxBytes
	if maxE <= 0 {
		maxE = DefaultMaxEntries
	}
	if maxB <= 0 {
		maxB = DefaultMaxBytes
	}
	x, err := sz.tree(ctx, root)
	if err != nil {
		return err
	}
	if x.Entries > maxE || x.Bytes > maxB {
		return fmt.Errorf("%w: state %s expands to %d entries and %d bytes (limits %d and %d; raise them with --max-entries / --max-bytes)",
			ErrTooLarge, root.Short(), x.Entries, x.Bytes, maxE, maxB)
	}
	return nil
}

// localBases is implemented by remotes that store deltas (S3Remote): Pull
// lends them the store being received into, where the base of a delta
// usually is already.
type localBases interface{ SetLocal(objs *cas.Store) }

// receiveState fetches every object under root that objs lacks, one level
// at a time, verifying each (cas.PutRaw checks hash, bounds and encoding)
// and checking it is of the kind its parent says.
func receiveState(ctx context.Context, objs *cas.Store, r Remote, root cas.ID, opts Options, st *Stats, sz *sizer) error {
	store := func(c *cas.Checked) error {
		if _, err := objs.PutChecked(ctx, c); err != nil {
			return err
		}
		st.Objects++
		if c.Tree != nil {
			sz.learn(c.ID, c.Tree)
		}
		return nil
	}
	w := &cas.Walker{Batch: fetchBatch, Load: fetchLoader(r, store, &st.Bytes)}
	w.Visit = func(ctx context.Context, refs []cas.Ref) ([]bool, error) {
		ids := make([]cas.ID, len(refs))
		for i, ref := range refs {
			ids[i] = ref.ID
		}
		kinds, err := objs.StoredKinds(ctx, ids)
		if err != nil {
			return nil, err
		}
		load := make([]bool, len(refs))
		for i, ref := range refs {
			k := kinds[i]
			// A row of another kind (an id names bytes, see
			// cas.Store.StoredKinds) does not bring what the object
			// references as this kind: fetch and descend into it too.
			if k == 0 || ref.Kind != cas.KindChunk && k != ref.Kind {
				load[i] = true
				continue
			}
			st.DedupObjects++
			n, err := sz.size(ctx, ref.ID, ref.Kind, ref.Size)
			if err != nil {
				return nil, err
			}
			st.DedupBytes += n
		}
		return load, nil
	}
	if opts.Progress != nil {
		w.Progress = func(int) { opts.Progress(*st) }
	}
	return objectError(w.Walk(ctx, cas.Ref{ID: root, Kind: cas.KindTree}))
}
