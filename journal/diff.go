package journal

import (
	"bytes"
	"context"

	"github.com/artrt/art/cas"
)

// ChangeKind classifies one difference between two states.
type ChangeKind byte

const (
	Added       ChangeKind = 'A'
	Deleted     ChangeKind = 'D'
	Modified    ChangeKind = 'M' // same kind, other content or metadata
	TypeChanged ChangeKind = 'T'
)

func (k ChangeKind) String() string { return string(k) }

// MarshalText renders the letter in JSON.
func (k ChangeKind) MarshalText() ([]byte, error) { return []byte{byte(k)}, nil }

// Change is one path that differs. Old is nil for Added, New for Deleted.
type Change struct {
	Path []byte
	Kind ChangeKind
	Old  *cas.Entry
	New  *cas.Entry
}

// ContentChanged reports whether a Modified file's bytes differ (as opposed
// to only its metadata).
func (c *Change) ContentChanged() bool {
	return c.Old != nil && c.New != nil && (c.Old.Target != c.New.Target || !bytes.Equal(c.Old.Link, c.New.Link))
}

// Diff calls fn for every path that differs between the trees a and b, in
// path order (a directory before its contents). Subtrees with equal ids are
// skipped without being read, so the cost is proportional to what changed.
// Everything below an added or deleted directory is reported too.
// Hard-link group numbers are labels local to each root and are not
// compared: a file whose content and metadata are unchanged is not reported
// because it gained, lost or changed the other names it shares a node with
// (those names are reported themselves).
func Diff(ctx context.Context, objs *cas.Store, a, b cas.ID, fn func(Change) error) error {
	if a == b {
		return nil
	}
	return diffTrees(ctx, objs, nil, a, b, fn)
}

func diffTrees(ctx context.Context, objs *cas.Store, prefix []byte, a, b cas.ID, fn func(Change) error) error {
	if a == b {
		return nil
	}
	var ta, tb *cas.Tree
	var err error
	if !a.IsZero() {
		if ta, err = objs.GetTree(ctx, a); err != nil {
			return err
		}
	} else {
		ta = &cas.Tree{}
	}
	if !b.IsZero() {
		if tb, err = objs.GetTree(ctx, b); err != nil {
			return err
		}
	} else {
		tb = &cas.Tree{}
	}
	i, j := 0, 0
	for i < len(ta.Entries) || j < len(tb.Entries) {
		if err := ctx.Err(); err != nil {
			return err
		}
		var ea, eb *cas.Entry
		switch {
		case j == len(tb.Entries):
			ea = &ta.Entries[i]
			i++
		case i == len(ta.Entries):
			eb = &tb.Entries[j]
			j++
		default:
			c := bytes.Compare(ta.Entries[i].Name, tb.Entries[j].Name)
			if c <= 0 {
				ea = &ta.Entries[i]
				i++
			}
			if c >= 0 {
				eb = &tb.Entries[j]
				j++
			}
		}
		name := eb
		if name == nil {
			name = ea
		}
		path := join(prefix, name.Name)
		switch {
		case eb == nil:
			if err := fn(Change{Path: path, Kind: Deleted, Old: ea}); err != nil {
				return err
			}
			if ea.Kind == cas.EntryDir {
				if err := diffTrees(ctx, objs, path, ea.Target, cas.ID{}, fn); err != nil {
					return err
				}
			}
		case ea == nil:
			if err := fn(Change{Path: path, Kind: Added, New: eb}); err != nil {
				return err
			}
			if eb.Kind == cas.EntryDir {
				if err := diffTrees(ctx, objs, path, cas.ID{}, eb.Target, fn); err != nil {
					return err
				}
			}
		case ea.Kind != eb.Kind:
			if err := fn(Change{Path: path, Kind: TypeChanged, Old: ea, New: eb}); err != nil {
				return err
			}
			var oldT, newT cas.ID
			if ea.Kind == cas.EntryDir {
				oldT = ea.Target
			}
			if eb.Kind == cas.EntryDir {
				newT = eb.Target
			}
			if err := diffTrees(ctx, objs, path, oldT, newT, fn); err != nil {
				return err
			}
		default:
			if !sameEntryMeta(ea, eb) || (ea.Kind != cas.EntryDir && ea.Target != eb.Target) {
				if err := fn(Change{Path: path, Kind: Modified, Old: ea, New: eb}); err != nil {
					return err
				}
			}
			if ea.Kind == cas.EntryDir {
				if err := diffTrees(ctx, objs, path, ea.Target, eb.Target, fn); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sameEntryMeta(a, b *cas.Entry) bool {
	if a.Mode != b.Mode || a.UID != b.UID || a.GID != b.GID || !bytes.Equal(a.Link, b.Link) ||
		len(a.Xattrs) != len(b.Xattrs) {
		return false
	}
	if a.Kind != cas.EntryDir && (a.MTime != b.MTime || a.Size != b.Size) {
		return false
	}
	for i := range a.Xattrs {
		if a.Xattrs[i].Name != b.Xattrs[i].Name || !bytes.Equal(a.Xattrs[i].Value, b.Xattrs[i].Value) {
			return false
		}
	}
	return true
}
