package remote

import (
	"context"
	"errors"
	"fmt"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
)

// FileRemote is another store file used as a remote. Its refs are that
// store's branches, so art log and art verify work on it directly.
type FileRemote struct {
	db *journal.DB
	// gcGen is the remote store's gc generation when it was opened,
	// before any Has: SetRef refuses to publish a state if a gc ran on
	// the remote since (journal.ErrGCRaced).
	gcGen int64
}

// OpenFile opens the store at path as a remote: with opts.Create it is
// made when missing; with opts.ReadOnly (the source of a pull) it is opened
// read-only and never written (see journal.Options.ReadOnly). Either way
// its schema is checked before anything is read (journal.Open).
func OpenFile(ctx context.Context, path string, opts OpenOptions) (*FileRemote, error) {
	db, err := journal.Open(ctx, path, journal.Options{Create: opts.Create && !opts.ReadOnly, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("open remote: %w", err)
	}
	gen, err := db.GCGeneration(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open remote: %w", err)
	}
	return &FileRemote{db: db, gcGen: gen}, nil
}

// restart implements restarter: Has answers from now on are checked
// against the current gc generation.
func (f *FileRemote) restart(ctx context.Context) error {
	gen, err := f.db.GCGeneration(ctx)
	if err != nil {
		return fmt.Errorf("open remote: %w", err)
	}
	f.gcGen = gen
	return nil
}

// DB is the remote's store.
func (f *FileRemote) DB() *journal.DB { return f.db }

// Ref implements Remote.
func (f *FileRemote) Ref(ctx context.Context, branch string) (Ref, error) {
	b, err := f.db.Branch(ctx, branch)
	if errors.Is(err, journal.ErrBranchNotFound) {
		return Ref{Branch: branch}, nil
	}
	if err != nil {
		return Ref{}, fmt.Errorf("read remote branch %s: %w", termtext.Quote(branch), err)
	}
	st, err := f.db.Head(ctx, branch)
	if err != nil {
		return Ref{}, fmt.Errorf("read remote branch %s: %w", termtext.Quote(branch), err)
	}
	hist, err := f.db.BranchRoots(ctx, branch, maxHistory)
	if err != nil {
		return Ref{}, fmt.Errorf("read remote branch %s: %w", termtext.Quote(branch), err)
	}
	earlier := hist[:0]
	for _, h := range hist {
		if h != st.Root {
			earlier = append(earlier, h)
		}
	}
	return Ref{Branch: branch, Root: st.Root, Version: b.HeadHash.String(), History: earlier}, nil
}

// Refs implements Remote.
func (f *FileRemote) Refs(ctx context.Context) ([]Ref, error) {
	bs, err := f.db.Branches(ctx)
	if err != nil {
		return nil, fmt.Errorf("list remote branches: %w", err)
	}
	var out []Ref
	for _, b := range bs {
		r, err := f.Ref(ctx, b.Name)
		if err != nil {
			return nil, err
		}
		if r.Exists() {
			out = append(out, r)
		}
	}
	return out, nil
}

// Has implements Remote.
func (f *FileRemote) Has(ctx context.Context, ids []cas.ID) ([]bool, error) {
	return f.db.Objects().HasMany(ctx, ids)
}

// HasKinds implements Remote from the kind column of each object's row.
func (f *FileRemote) HasKinds(ctx context.Context, ids []cas.ID) ([]cas.Kind, error) {
	return f.db.Objects().StoredKinds(ctx, ids)
}

// Send implements Remote: the objects are verified and stored in one
// transaction of the remote store.
func (f *FileRemote) Send(ctx context.Context, objs []Object) (int64, error) {
	var n int64
	err := f.db.ReceiveObjects(ctx, func(s *cas.Store) error {
		for _, o := range objs {
			if _, err := s.PutRaw(ctx, o.Raw); err != nil {
				return &ObjectError{ID: o.ID, Kind: o.Kind, Err: err}
			}
			n += int64(len(o.Data))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("send to %s: %w", f.db.Path(), err)
	}
	return n, nil
}

// Fetch implements Remote.
func (f *FileRemote) Fetch(ctx context.Context, ids []cas.ID, fn func(cas.Raw) error) (int64, error) {
	var n int64
	for _, id := range ids {
		r, err := f.db.Objects().GetRaw(ctx, id)
		if errors.Is(err, cas.ErrNotFound) {
			err = fmt.Errorf("%w on the remote", cas.ErrNotFound)
		}
		if err != nil {
			return n, &ObjectError{ID: id, Err: err}
		}
		n += int64(len(r.Data))
		if err := fn(r); err != nil {
			return n, err
		}
	}
	return n, nil
}

// SetRef implements Remote with journal.MoveBranch: the head hash is
// compared inside the remote store's write transaction.
func (f *FileRemote) SetRef(ctx context.Context, old Ref, root cas.ID) error {
	var expect cas.ID
	if old.Exists() {
		var err error
		if expect, err = cas.ParseID(old.Version); err != nil {
			return fmt.Errorf("set remote branch %s: %w", termtext.Quote(old.Branch), err)
		}
	}
	_, err := f.db.MoveBranch(ctx, old.Branch, expect, root, "receive", "receive push of "+root.Short(), f.gcGen)
	if errors.Is(err, journal.ErrHeadMoved) {
		return fmt.Errorf("set remote branch %s: %w: %v", termtext.Quote(old.Branch), ErrRefChanged, err)
	}
	if err != nil {
		return fmt.Errorf("set remote branch %s: %w", termtext.Quote(old.Branch), err)
	}
	return nil
}

// Close implements Remote.
func (f *FileRemote) Close() error {
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}
