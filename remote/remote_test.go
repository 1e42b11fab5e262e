package remote

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/artrt/art/cas"
)

// rawOf builds a valid stored-form object (uncompressed) of kind k.
func rawOf(k cas.Kind, b []byte) cas.Raw {
	return cas.Raw{ID: cas.Sum(b), Kind: k, Codec: 0, Size: int64(len(b)), Data: b}
}

// TestConformance is the contract every Remote keeps.
func TestConformance(t *testing.T) {
	forEachKind(t, func(t *testing.T, k *kind) {
		ctx := context.Background()
		r, reopen := k.newRemote(t)

		chunk := rawOf(cas.KindChunk, []byte("hello, remote"))
		tree := rawOf(cas.KindTree, mustTree(t, &cas.Tree{Entries: []cas.Entry{{Name: []byte("l"), Kind: cas.EntrySymlink, Mode: 0o777, Size: 1, Link: []byte("x")}}}))
		has, err := r.Has(ctx, []cas.ID{chunk.ID, tree.ID})
		if err != nil {
			t.Fatal(err)
		}
		if has[0] || has[1] {
			t.Fatalf("empty remote has %v", has)
		}
		n, err := r.Send(ctx, objects([]cas.Raw{chunk, tree}))
		if err != nil {
			t.Fatal(err)
		}
		if n < int64(len(chunk.Data)+len(tree.Data)) {
			t.Fatalf("Send reported %d bytes, the objects alone are %d", n, len(chunk.Data)+len(tree.Data))
		}
		// Idempotent.
		if _, err := r.Send(ctx, objects([]cas.Raw{chunk})); err != nil {
			t.Fatal(err)
		}
		// A reopened remote (a new process) sees what was sent.
		r2 := reopen()
		has, err = r2.Has(ctx, []cas.ID{chunk.ID, tree.ID, cas.Sum([]byte("absent"))})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := has, []bool{true, true, false}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("Has = %v, want %v", got, want)
		}
		got := map[cas.ID]cas.Raw{}
		if _, err := r2.Fetch(ctx, []cas.ID{tree.ID, chunk.ID}, func(o cas.Raw) error {
			o.Data = append([]byte{}, o.Data...)
			got[o.ID] = o
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []cas.Raw{chunk, tree} {
			o := got[want.ID]
			if o.Kind != want.Kind || o.Size != want.Size || !bytes.Equal(o.Data, want.Data) {
				t.Fatalf("Fetch %s = %+v, want %+v", want.ID.Short(), o, want)
			}
		}
		absent := cas.Sum([]byte("absent"))
		_, err = r2.Fetch(ctx, []cas.ID{absent}, func(cas.Raw) error { return nil })
		var oe *ObjectError
		if !errors.As(err, &oe) || oe.ID != absent || !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("Fetch of an absent object: %v, want an ObjectError naming it wrapping ErrNotFound", err)
		}

		// Refs: absent, created, moved by CAS, stale CAS refused.
		ref, err := r.Ref(ctx, "feature")
		if err != nil {
			t.Fatal(err)
		}
		if ref.Exists() {
			t.Fatalf("empty remote has ref %+v", ref)
		}
		if err := r.SetRef(ctx, ref, tree.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.SetRef(ctx, ref, tree.ID); !errors.Is(err, ErrRefChanged) {
			t.Fatalf("second create of feature: %v, want ErrRefChanged", err)
		}
		cur, err := r2.Ref(ctx, "feature")
		if err != nil {
			t.Fatal(err)
		}
		if !cur.Exists() || cur.Root != tree.ID {
			t.Fatalf("ref after create = %+v, want root %s", cur, tree.ID.Short())
		}
		other := rawOf(cas.KindTree, mustTree(t, &cas.Tree{Entries: []cas.Entry{{Name: []byte("d"), Kind: cas.EntryDir, Mode: 0o755, Target: tree.ID}}}))
		if _, err := r.Send(ctx, objects([]cas.Raw{other})); err != nil {
			t.Fatal(err)
		}
		if err := r2.SetRef(ctx, cur, other.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.SetRef(ctx, cur, tree.ID); !errors.Is(err, ErrRefChanged) {
			t.Fatalf("stale SetRef: %v, want ErrRefChanged", err)
		}
		moved, err := r.Ref(ctx, "feature")
		if err != nil {
			t.Fatal(err)
		}
		if moved.Root != other.ID || len(moved.History) == 0 || moved.History[0] != tree.ID {
			t.Fatalf("ref after move = %+v, want root %s with %s in its history", moved, other.ID.Short(), tree.ID.Short())
		}
		refs, err := r.Refs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range refs {
			found = found || (r.Branch == "feature" && r.Root == other.ID)
		}
		if !found {
			t.Fatalf("Refs = %+v, want feature at %s", refs, other.ID.Short())
		}
	})
}

func mustTree(t *testing.T, tr *cas.Tree) []byte {
	t.Helper()
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
