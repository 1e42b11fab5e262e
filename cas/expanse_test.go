package cas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestSizerDAG: a tree naming one subtree 32 times per level, 8 levels
// deep, expands to 32^8 files; the Sizer says so after reading 9 trees.
func TestSizerDAG(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	m, _, err := s.PutFile(ctx, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := s.PutTree(ctx, &Tree{Entries: []Entry{{Name: []byte("f"), Kind: EntryFile, Mode: 0o644, Size: 1, Target: m}}})
	if err != nil {
		t.Fatal(err)
	}
	want := Expanse{Entries: 1, Bytes: 1, Depth: 1}
	for level := 0; level < 8; level++ {
		tr := &Tree{}
		for i := 0; i < 32; i++ {
			tr.Entries = append(tr.Entries, Entry{Name: []byte(fmt.Sprintf("d%02d", i)), Kind: EntryDir, Mode: 0o755, Target: id})
		}
		if id, _, err = s.PutTree(ctx, tr); err != nil {
			t.Fatal(err)
		}
		want = Expanse{Entries: 32 + 32*want.Entries, Bytes: 32 * want.Bytes, Depth: want.Depth + 1}
	}
	z := NewSizer(s)
	got, err := z.Tree(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("expanse %+v, want %+v", got, want)
	}
	if len(z.memo) != 9 {
		t.Fatalf("%d trees measured, want 9 (each distinct tree once)", len(z.memo))
	}
	z = NewSizer(s)
	z.MaxDepth = 5
	if _, err := z.Tree(ctx, id); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("MaxDepth 5 on a tree 9 deep: %v, want ErrTooDeep", err)
	}
	z = NewSizer(s)
	z.MaxDepth = 9
	if _, err := z.Tree(ctx, id); err != nil {
		t.Fatalf("MaxDepth 9 on a tree 9 deep: %v", err)
	}
}

// TestSizerSaturates: sums past MaxInt64 stay at MaxInt64 (a tree
// decoded elsewhere, as a remote's, may claim any sizes).
func TestSizerSaturates(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	id := Sum([]byte("a tree learned, not stored"))
	z := NewSizer(s)
	z.Learn(id, &Tree{Entries: []Entry{
		{Name: []byte("a"), Kind: EntryFile, Size: math.MaxInt64 - 1},
		{Name: []byte("b"), Kind: EntryFile, Size: math.MaxInt64 - 1}}})
	x, err := z.Tree(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Bytes != math.MaxInt64 || x.Entries != 2 {
		t.Fatalf("expanse %+v, want 2 entries and MaxInt64 bytes", x)
	}
}

// TestSizerMissingTree names the tree it could not read.
func TestSizerMissingTree(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	gone := Sum([]byte("no such tree"))
	id, _, err := s.PutTree(ctx, &Tree{Entries: []Entry{{Name: []byte("d"), Kind: EntryDir, Mode: 0o755, Target: gone}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewSizer(s).Tree(ctx, id)
	var we *WalkError
	if !errors.As(err, &we) || we.ID != gone || !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want a WalkError naming %s wrapping ErrNotFound", err, gone.Short())
	}
}
