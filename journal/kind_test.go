package journal_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestGCSameBytesOtherKind: file a's content is exactly the encoding of
// the manifest of d/b (or of the tree d/s), so the two share one object row
// (an id names bytes, not a kind). A branch whose state reaches them only
// through trees (as a pull or checkout makes one) must keep both readable
// through gc, and verify must find nothing wrong.
func TestGCSameBytesOtherKind(t *testing.T) {
	ctx := context.Background()
	hello := []byte("hello")
	for _, twinKind := range []cas.Kind{cas.KindManifest, cas.KindTree} {
		t.Run(twinKind.String(), func(t *testing.T) {
			db := openStore(t)
			var root, a cas.ID
			var enc []byte
			mustDo(t, db, "main", func(tx *journal.Tx) error {
				objs := tx.Objects()
				helloM, _, err := objs.PutFile(ctx, bytes.NewReader(hello))
				if err != nil {
					return err
				}
				twin, under := helloM, cas.Entry{Name: []byte("b"), Kind: cas.EntryFile, Mode: 0o644, Size: 5, Target: helloM}
				if twinKind == cas.KindTree {
					if twin, _, err = objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{under}}); err != nil {
						return err
					}
					under = cas.Entry{Name: []byte("s"), Kind: cas.EntryDir, Mode: 0o755, Target: twin}
				}
				_, enc, err = objs.Get(ctx, twin)
				if err != nil {
					return err
				}
				a, _, err = objs.PutFile(ctx, bytes.NewReader(enc)) // a chunk of twin's id: the row stays the first's
				if err != nil {
					return err
				}
				d, _, err := objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{under}})
				if err != nil {
					return err
				}
				root, _, err = objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{
					{Name: []byte("a"), Kind: cas.EntryFile, Mode: 0o644, Size: int64(len(enc)), Target: a},
					{Name: []byte("d"), Kind: cas.EntryDir, Mode: 0o755, Target: d}}})
				if err != nil {
					return err
				}
				return nil
			})
			objs := db.Objects()
			if _, err := db.CreateBranch(ctx, "twins", journal.State{Root: root}); err != nil {
				t.Fatal(err)
			}
			want := treeMap(t, objs, root, true)
			if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
				t.Fatalf("gc: %v", err)
			}
			if got := treeMap(t, objs, root, true); mapDiff(want, got) != "" {
				t.Fatalf("after gc: %s", mapDiff(want, got))
			}
			var b bytes.Buffer
			if _, err := objs.ReadFile(ctx, a, &b); err != nil || !bytes.Equal(b.Bytes(), enc) {
				t.Fatalf("file a after gc: %q, %v; want %q", b.Bytes(), err, enc)
			}
			mustVerify(t, db)

			// Verify walks the twin as its kind too: with the chunk under
			// it gone, it must say so (it reached the id as a chunk first).
			gone := cas.Sum(hello)
			if _, err := rawSQL(t, db.Path()).Exec(`DELETE FROM objects WHERE id = ?`, gone[:]); err != nil {
				t.Fatal(err)
			}
			rep, err := db.Verify(ctx, journal.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatalf("verify with the chunk of %q gone: OK", hello)
			}
		})
	}
}

// TestGCKeepsRowKindClosure: a live row whose kind column says manifest,
// reached only as a chunk (file a's content is the manifest's bytes; the
// manifest's own file is gone), keeps the manifest's chunks: a pull trusts
// a row of a kind to hold its references as that kind and would not fetch
// them again.
func TestGCKeepsRowKindClosure(t *testing.T) {
	ctx := context.Background()
	hello := []byte("hello")
	db := openStore(t)
	var enc []byte
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		m, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(hello)) // the manifest row first, referenced by nothing
		if err != nil {
			return err
		}
		if _, enc, err = tx.Objects().Get(ctx, m); err != nil {
			return err
		}
		return writeFile(tx, "a", string(enc), 1)
	})
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatalf("gc: %v", err)
	}
	if ok, err := db.Objects().Has(ctx, cas.Sum(hello)); err != nil || !ok {
		t.Fatalf("gc removed the chunk under a live row of kind manifest: has %v, %v", ok, err)
	}
	mustVerify(t, db)
}
