package cas

import (
	"context"
	"fmt"
	"sort"
)

// Layout is a file's manifest with the offset of each extent, so a read
// at any offset finds its extents by binary search instead of walking a
// big file's manifest (a 2 GiB file has about 130,000 extents).
type Layout struct {
	ID       ID // the manifest's id
	Manifest *Manifest
	starts   []int64 // starts[i] is the offset of extent i
}

// NewLayout indexes manifest m, whose id is id.
func NewLayout(id ID, m *Manifest) *Layout {
	l := &Layout{ID: id, Manifest: m, starts: make([]int64, len(m.Extents))}
	var off int64
	for i, e := range m.Extents {
		l.starts[i] = off
		off += e.Len
	}
	return l
}

// readAtAhead is how many data extents a ReadAt must cover before it
// fetches them with a read-ahead (one query per batch, inflated on all
// cores) rather than one by one.
const readAtAhead = 4

// ReadAt reads the file's bytes at [off, off+len(p)) into p - holes as
// zeros, every chunk verified against its id - and returns how many it
// read: fewer than len(p) only where the file ends. Only the extents the
// range touches are read.
func (s *Store) ReadAt(ctx context.Context, l *Layout, p []byte, off int64) (int, error) {
	m := l.Manifest
	if off < 0 {
		return 0, fmt.Errorf("read file %s at %d: negative offset", l.ID.Short(), off)
	}
	if off >= m.Size || len(p) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(p)), m.Size)
	first := sort.Search(len(l.starts), func(i int) bool { return l.starts[i]+m.Extents[i].Len > off })
	last := first // one past the last extent the range touches
	data := 0
	for last < len(m.Extents) && l.starts[last] < end {
		if !m.Extents[last].IsHole() {
			data++
		}
		last++
	}
	next := func(i int, e Extent) ([]byte, error) { return s.getChunk(ctx, l.ID, i, e) }
	if data >= readAtAhead {
		ra := startReadAhead(ctx, s, l.ID, m.Extents[first:last])
		defer ra.close()
		next = func(int, Extent) ([]byte, error) { return ra.next() }
	}
	for i := first; i < last; i++ {
		e, start := m.Extents[i], l.starts[i]
		from, to := max(off, start), min(end, start+e.Len) // the part of e read, as file offsets
		dst := p[from-off : to-off]
		if e.IsHole() {
			clear(dst)
			continue
		}
		b, err := next(i, e)
		if err != nil {
			return 0, fmt.Errorf("read file %s at %d: %w", l.ID.Short(), off, err)
		}
		copy(dst, b[from-start:to-start])
	}
	return int(end - off), nil
}
