package journal

import (
	"context"
	"fmt"

	"github.com/artrt/art/cas"
)

// Footprint is the file content a state references: what art du shows, to
// find which branch or state made a store big.
type Footprint struct {
	Files  int64 `json:"files"`        // distinct file contents (manifests)
	Chunks int64 `json:"chunks"`       // distinct chunks
	Bytes  int64 `json:"bytes"`        // the chunks' size
	Stored int64 `json:"stored_bytes"` // what the chunks occupy in the store (compressed where it pays)
	// Exclusive is the stored bytes of the chunks no other measured state
	// references: what the store would lose if only this state went.
	Exclusive int64 `json:"exclusive_bytes"`
}

// MaxFootprintStates bounds how many states one Footprints call compares.
const MaxFootprintStates = 64

// Footprints measures the content each of roots references and, in total,
// all of them together (whose Exclusive is zero). Each distinct tree and manifest is read once per
// root (verified, as every read), each chunk's stored size looked up once.
func (db *DB) Footprints(ctx context.Context, roots []cas.ID) ([]Footprint, Footprint, error) {
	if len(roots) > MaxFootprintStates {
		return nil, Footprint{}, fmt.Errorf("footprints: %d states, at most %d", len(roots), MaxFootprintStates)
	}
	type chunk struct {
		len    int64
		owners uint64 // bit i: roots[i] references it
	}
	chunks := map[cas.ID]*chunk{}
	allFiles := map[cas.ID]bool{}
	out := make([]Footprint, len(roots))
	for i, root := range roots {
		bit := uint64(1) << i
		trees := map[cas.ID]bool{}
		files := map[cas.ID]bool{}
		var walk func(id cas.ID) error
		walk = func(id cas.ID) error {
			if trees[id] {
				return nil
			}
			trees[id] = true
			if err := ctx.Err(); err != nil {
				return err
			}
			t, err := db.objs.GetTree(ctx, id)
			if err != nil {
				return err
			}
			for j := range t.Entries {
				e := &t.Entries[j]
				switch e.Kind {
				case cas.EntryDir:
					if err := walk(e.Target); err != nil {
						return err
					}
				case cas.EntryFile:
					if files[e.Target] {
						continue
					}
					files[e.Target] = true
					allFiles[e.Target] = true
					m, err := db.objs.GetManifest(ctx, e.Target)
					if err != nil {
						return err
					}
					for _, x := range m.Extents {
						if x.IsHole() {
							continue
						}
						c := chunks[x.ID]
						if c == nil {
							c = &chunk{len: x.Len}
							chunks[x.ID] = c
						}
						c.owners |= bit
					}
				}
			}
			return nil
		}
		if err := walk(root); err != nil {
			return nil, Footprint{}, fmt.Errorf("measure %s: %w", root.Short(), err)
		}
		out[i].Files = int64(len(files))
	}
	var total Footprint
	for id, c := range chunks {
		stored, err := db.objs.StoredSize(ctx, id)
		if err != nil {
			return nil, Footprint{}, err
		}
		total.Chunks++
		total.Bytes += c.len
		total.Stored += stored
		for i := range roots {
			if c.owners&(1<<i) == 0 {
				continue
			}
			out[i].Chunks++
			out[i].Bytes += c.len
			out[i].Stored += stored
			if c.owners == 1<<i {
				out[i].Exclusive += stored
			}
		}
	}
	total.Files = int64(len(allFiles))
	return out, total, nil
}
