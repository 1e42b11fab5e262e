package cas

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/artrt/art/internal/termtext"
)

// LookupPath walks path (slash-separated, relative) from the tree root,
// returning its entry (nil for the root itself); a missing name wraps
// fs.ErrNotExist.
func (s *Store) LookupPath(ctx context.Context, root ID, path string) (*Entry, error) {
	if path == "" {
		return nil, nil
	}
	cur := root
	var ent *Entry
	for i, comp := range strings.Split(path, "/") {
		t, err := s.GetTree(ctx, cur)
		if err != nil {
			return nil, err
		}
		e, ok := t.Lookup([]byte(comp))
		if !ok {
			return nil, fmt.Errorf("%s: %w", termtext.Quote(path), fs.ErrNotExist)
		}
		ent = e
		if i < strings.Count(path, "/") {
			if e.Kind != EntryDir {
				return nil, fmt.Errorf("%s: not a directory", termtext.Quote(path))
			}
			cur = e.Target
		}
	}
	return ent, nil
}
