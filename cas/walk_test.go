package cas

import (
	"context"
	"errors"
	"sort"
	"testing"
)

// walkFixture stores root{f1 -> m1 (c1, hole, c2), sub/ -> {f2 -> m2 (c2)}}.
type walkFixture struct {
	s                         *Store
	root, sub, m1, m2, c1, c2 ID
}

func newWalkFixture(t *testing.T) walkFixture {
	t.Helper()
	ctx := context.Background()
	s, _ := newTestStore(t)
	var f walkFixture
	f.s = s
	put := func(k Kind, b []byte) ID {
		id, _, err := s.Put(ctx, k, b)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	f.c1, f.c2 = put(KindChunk, []byte("one")), put(KindChunk, []byte("two"))
	f.m1 = put(KindManifest, (&Manifest{Size: 10, Extents: []Extent{{ID: f.c1, Len: 3}, {Len: 4}, {ID: f.c2, Len: 3}}}).Encode())
	f.m2 = put(KindManifest, (&Manifest{Size: 3, Extents: []Extent{{ID: f.c2, Len: 3}}}).Encode())
	var err error
	if f.sub, _, err = s.PutTree(ctx, &Tree{Entries: []Entry{{Name: []byte("f2"), Kind: EntryFile, Mode: 0o644, Size: 3, Target: f.m2}}}); err != nil {
		t.Fatal(err)
	}
	if f.root, _, err = s.PutTree(ctx, &Tree{Entries: []Entry{
		{Name: []byte("f1"), Kind: EntryFile, Mode: 0o644, Size: 10, Target: f.m1},
		{Name: []byte("sub"), Kind: EntryDir, Mode: 0o755, Target: f.sub},
	}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func sortedIDs(m map[ID]struct{}) []string {
	var out []string
	for id := range m {
		out = append(out, id.Short())
	}
	sort.Strings(out)
	return out
}

func idSet(ids ...ID) []string {
	m := map[ID]struct{}{}
	for _, id := range ids {
		m[id] = struct{}{}
	}
	return sortedIDs(m)
}

func sameList(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWalkerReachesEverythingOnce(t *testing.T) {
	f := newWalkFixture(t)
	for _, batch := range []int{0, 1, 2} {
		loads := map[ID]int{}
		load := StoreLoader(f.s, false)
		w := &Walker{Batch: batch, Load: func(ctx context.Context, refs []Ref, got func(*Checked) error) error {
			if batch > 0 && len(refs) > batch {
				t.Fatalf("batch %d: load of %d refs", batch, len(refs))
			}
			for _, r := range refs {
				loads[r.ID]++
			}
			return load(ctx, refs, got)
		}}
		if err := w.Walk(context.Background(), Ref{ID: f.root, Kind: KindTree}); err != nil {
			t.Fatal(err)
		}
		if got, want := sortedIDs(w.Seen), idSet(f.root, f.sub, f.m1, f.m2, f.c1, f.c2); !sameList(got, want) {
			t.Fatalf("batch %d: reached %v, want %v", batch, got, want)
		}
		for id, n := range loads {
			if n != 1 || id == f.c1 || id == f.c2 {
				t.Fatalf("batch %d: %s loaded %d times", batch, id.Short(), n)
			}
		}
		if len(loads) != 4 {
			t.Fatalf("batch %d: %d objects loaded, want 4 (2 trees, 2 manifests)", batch, len(loads))
		}
	}
}

func TestWalkerVisitPrunesAndSeenExtends(t *testing.T) {
	f := newWalkFixture(t)
	var visited []Ref
	w := &Walker{Load: StoreLoader(f.s, false), Visit: func(_ context.Context, refs []Ref) ([]bool, error) {
		out := make([]bool, len(refs))
		for i, r := range refs {
			visited = append(visited, r)
			out[i] = r.Kind != KindChunk && r.ID != f.sub // the other side has sub: do not descend
		}
		return out, nil
	}}
	if err := w.Walk(context.Background(), Ref{ID: f.root, Kind: KindTree}); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedIDs(w.Seen), idSet(f.root, f.sub, f.m1, f.c1, f.c2); !sameList(got, want) {
		t.Fatalf("reached %v, want %v (m2 is only under sub)", got, want)
	}
	for _, r := range visited {
		if r.ID == f.m1 && (r.Kind != KindManifest || r.Size != 10) {
			t.Fatalf("m1 visited as %+v, want a manifest of size 10", r)
		}
		if r.ID == f.c2 && (r.Kind != KindChunk || r.Size != 3) {
			t.Fatalf("c2 visited as %+v, want a chunk of 3 bytes", r)
		}
	}
	// A second walk with the same Seen reaches only what is new.
	visited = nil
	if err := w.Walk(context.Background(), Ref{ID: f.sub, Kind: KindTree}, Ref{ID: f.m2, Kind: KindManifest}); err != nil {
		t.Fatal(err)
	}
	if len(visited) != 1 || visited[0].ID != f.m2 {
		t.Fatalf("second walk visited %v, want only m2", visited)
	}
}

func TestWalkerAbsentObjects(t *testing.T) {
	f := newWalkFixture(t)
	gone := Sum([]byte("not stored"))
	roots := []Ref{{ID: f.root, Kind: KindTree}, {ID: gone, Kind: KindManifest}}
	w := &Walker{Load: StoreLoader(f.s, true)}
	if err := w.Walk(context.Background(), roots...); err != nil {
		t.Fatalf("absentOK walk: %v", err)
	}
	if _, ok := w.Seen[gone]; !ok || len(w.Seen) != 7 {
		t.Fatalf("absentOK walk reached %d objects, want 7 with the absent one", len(w.Seen))
	}
	w = &Walker{Load: StoreLoader(f.s, false)}
	err := w.Walk(context.Background(), roots...)
	var we *WalkError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &we) || we.ID != gone || we.Kind != KindManifest {
		t.Fatalf("walk with a missing manifest = %v, want a WalkError naming it wrapping ErrNotFound", err)
	}
}

// A hostile source: each case delivers something other than what was
// asked for.
func TestWalkerRefusesWhatWasNotAskedFor(t *testing.T) {
	f := newWalkFixture(t)
	other := &Checked{Raw: Raw{ID: f.sub, Kind: KindTree}, Tree: &Tree{}}
	for _, c := range []struct {
		name string
		load func(refs []Ref, got func(*Checked) error) error
		want error
	}{
		{"nothing", func([]Ref, func(*Checked) error) error { return nil }, ErrNotFound},
		{"another object", func(_ []Ref, got func(*Checked) error) error { return got(other) }, ErrCorrupt},
		{"another kind", func(refs []Ref, got func(*Checked) error) error {
			return got(&Checked{Raw: Raw{ID: refs[0].ID, Kind: KindManifest}, Manifest: &Manifest{}})
		}, ErrCorrupt},
		{"twice", func(refs []Ref, got func(*Checked) error) error {
			c := &Checked{Raw: Raw{ID: refs[0].ID, Kind: KindTree}, Tree: &Tree{}}
			if err := got(c); err != nil {
				return err
			}
			return got(c)
		}, ErrCorrupt},
	} {
		w := &Walker{Load: func(_ context.Context, refs []Ref, got func(*Checked) error) error { return c.load(refs, got) }}
		err := w.Walk(context.Background(), Ref{ID: f.root, Kind: KindTree})
		var we *WalkError
		if !errors.Is(err, c.want) || !errors.As(err, &we) {
			t.Errorf("%s: walk = %v, want a WalkError wrapping %v", c.name, err, c.want)
		}
	}
}
