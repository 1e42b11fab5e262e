package remote

import (
	"context"
	"errors"

	"github.com/artrt/art/cas"
)

// fetchLoader is a cas.Walker's Load reading from r: each object is
// verified (cas.Check: hash, bounds, canonical encoding) and, once the
// walker has accepted it as one asked for, handed to received when set
// (pull stores it there). bytes, when set, adds up what Fetch transferred.
func fetchLoader(r Remote, received func(*cas.Checked) error, bytes *int64) func(context.Context, []cas.Ref, func(*cas.Checked) error) error {
	return fetchLoaderLenient(r, received, bytes, nil)
}

// fetchLoaderLenient is fetchLoader where an object for which corruptOK
// holds, asked for as that kind, that does not check as it is delivered as
// referencing nothing instead of failing the walk.
func fetchLoaderLenient(r Remote, received func(*cas.Checked) error, bytes *int64, corruptOK func(cas.Ref) bool) func(context.Context, []cas.Ref, func(*cas.Checked) error) error {
	return func(ctx context.Context, refs []cas.Ref, got func(*cas.Checked) error) error {
		ids := make([]cas.ID, len(refs))
		kinds := make(map[cas.ID]cas.Kind, len(refs))
		for i, ref := range refs {
			ids[i], kinds[ref.ID] = ref.ID, ref.Kind
		}
		n, err := r.Fetch(ctx, ids, func(raw cas.Raw) error {
			// The other side may hold the bytes under another kind (an id
			// names bytes, see cas.Store.StoredKinds): they are checked,
			// walked and stored as the kind their referrer expects, so a
			// row of a kind here always has what it references as that
			// kind.
			// An unknown kind stays refused, as a local read refuses it.
			if k, ok := kinds[raw.ID]; ok && raw.Kind >= cas.KindChunk && raw.Kind <= cas.KindTree {
				raw.Kind = k
			}
			c, err := cas.Check(raw)
			if err != nil && corruptOK != nil && corruptOK(cas.Ref{ID: raw.ID, Kind: raw.Kind}) {
				return got(&cas.Checked{Raw: cas.Raw{ID: raw.ID, Kind: raw.Kind}})
			}
			if err != nil {
				return &ObjectError{ID: raw.ID, Kind: raw.Kind, Err: err}
			}
			if err := got(c); err != nil || received == nil {
				return err // got refused it (not asked for) or follows it
			}
			if err := received(c); err != nil {
				return &ObjectError{ID: raw.ID, Kind: raw.Kind, Err: err}
			}
			return nil
		})
		if bytes != nil {
			*bytes += n
		}
		var oe *ObjectError
		if errors.As(err, &oe) && oe.Kind == 0 {
			oe.Kind = kinds[oe.ID]
		}
		return err
	}
}

// objectError turns a walk's *cas.WalkError into the *ObjectError remote
// callers report; other errors pass through.
func objectError(err error) error {
	var we *cas.WalkError
	if errors.As(err, &we) {
		return &ObjectError{ID: we.ID, Kind: we.Kind, Err: we.Err}
	}
	return err
}
