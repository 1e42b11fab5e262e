package remote

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
)

func TestDeltaRoundTrip(t *testing.T) {
	var base cas.Tree
	for i := 0; i < 300; i++ {
		var e cas.Entry
		e.Name, e.Kind, e.Mode, e.Size = []byte(fmt.Sprintf("file%03d.go", i)), cas.EntryFile, 0o644, int64(i)
		e.Target = cas.Sum([]byte(e.Name))
		base.Entries = append(base.Entries, e)
	}
	bb := mustTree(t, &base)
	base.Entries[150].Target = cas.Sum([]byte("edited"))
	base.Entries[150].Size = 7
	nb := mustTree(t, &base)
	d, err := encodeDelta(nb, bb)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) > len(nb)/10 {
		t.Fatalf("delta of a one-entry change is %d bytes, the tree %d", len(d), len(nb))
	}
	got, err := decodeDelta(cas.Sum(nb), d, bb, int64(len(nb)))
	if err != nil || !bytes.Equal(got, nb) {
		t.Fatalf("decodeDelta: %v", err)
	}
	// Against the wrong base it does not reproduce the tree.
	other := mustTree(t, &cas.Tree{})
	if got, err := decodeDelta(cas.Sum(nb), d, other, int64(len(nb))); err == nil && bytes.Equal(got, nb) {
		t.Fatal("delta decoded against the wrong base")
	}
	// A size the frame does not hold is refused.
	if _, err := decodeDelta(cas.Sum(nb), d, bb, int64(len(nb))-1); err == nil {
		t.Fatal("wrong size accepted")
	}
	t.Logf("tree %d bytes, delta %d", len(nb), len(d))
}

// TestDeltaChains: successive pushes each edit one deep file, so each tree
// on the path is a delta against the previous push's; a fresh store pulls
// the last state through the chains, which never pass maxDeltaDepth.
func TestDeltaChains(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	ws := sampleDir(t)
	for i := 0; i < 40; i++ {
		writeFile(t, filepath.Join(ws, "deep", "er", "est", fmt.Sprintf("n%02d", i)), fmt.Sprintf("file %d\n", i))
	}
	a := newStore(t)
	r, reopen := k.newRemote(t)
	var root cas.ID
	for round := 0; round < maxDeltaDepth+4; round++ {
		writeFile(t, filepath.Join(ws, "deep", "er", "est", "n07"), fmt.Sprintf("round %d\n", round))
		root = importDir(t, a, ws)
		if _, err := Push(ctx, a, r, []string{"main"}, Options{}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	s := reopen().(*S3Remote)
	if err := s.loadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for id, loc := range s.index {
		if loc.codec == codecDelta {
			deltas++
			if d := s.depth(id); d >= maxDeltaDepth {
				t.Fatalf("tree %s is %d deltas deep", id.Short(), d)
			}
		}
	}
	if deltas == 0 {
		t.Fatal("no tree was packed as a delta")
	}
	b := newStore(t)
	if _, err := Pull(ctx, b, s, []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := head(t, b, "main"); got != root {
		t.Fatalf("pulled %s, pushed %s", got.Short(), root.Short())
	}
	verifyClean(t, b)
}

// TestPullRefusesBadDeltas: deltas whose base is missing, that form a
// cycle, or that decode to the wrong bytes fail the pull, naming an object,
// and leave the store as it was.
func TestPullRefusesBadDeltas(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	leaf := func(name string) cas.Raw {
		return rawOf(cas.KindTree, symlinkTree([]byte(name)))
	}
	wrap := func(sub cas.ID) cas.Raw {
		return rawOf(cas.KindTree, mustTree(t, &cas.Tree{Entries: []cas.Entry{{Name: []byte("sub"), Kind: cas.EntryDir, Mode: 0o755, Target: sub}}}))
	}
	delta := func(obj, base cas.Raw, against []byte) cas.Raw {
		d, err := encodeDelta(obj.Data, against)
		if err != nil {
			t.Fatal(err)
		}
		return cas.Raw{ID: obj.ID, Kind: cas.KindTree, Codec: codecDelta, Size: obj.Size, Data: d}
	}
	x, y := leaf("x"), leaf("y")
	cases := []struct {
		name  string
		raws  []cas.Raw
		bases []cas.ID
		top   cas.ID
		bad   cas.ID
	}{
		{"missing base", []cas.Raw{delta(x, y, y.Data)}, []cas.ID{y.ID}, x.ID, y.ID},
		{"wrong base", []cas.Raw{y, delta(x, y, append(bytes.Repeat([]byte{0xaa}, 4000), x.Data...))}, []cas.ID{{}, y.ID}, x.ID, x.ID},
		{"cycle", []cas.Raw{delta(x, y, y.Data), delta(y, x, x.Data)}, []cas.ID{y.ID, x.ID}, x.ID, x.ID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, reopen := k.newRemote(t)
			s := r.(*S3Remote)
			if err := s.loadIndex(ctx); err != nil {
				t.Fatal(err)
			}
			root := wrap(c.top)
			if _, _, err := s.putPack(ctx, append(c.raws, root), append(c.bases, cas.ID{})); err != nil {
				t.Fatal(err)
			}
			if err := s.SetRef(ctx, Ref{Branch: "evil"}, root.ID); err != nil {
				t.Fatal(err)
			}
			b := newStore(t)
			before := snapshotOf(t, b)
			_, err := Pull(ctx, b, reopen(), []string{"evil"}, Options{})
			if err == nil {
				t.Fatal("pull succeeded")
			}
			if !strings.Contains(err.Error(), c.bad.String()) {
				t.Fatalf("error does not name %s: %v", c.bad.Short(), err)
			}
			if after := snapshotOf(t, b); after != before {
				t.Fatalf("failed pull changed the store:\nbefore %s\nafter  %s", before, after)
			}
			t.Log(err)
		})
	}
}
