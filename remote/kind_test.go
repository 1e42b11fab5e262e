package remote

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/artrt/art/cas"
)

// TestPushPullSameBytesOtherKind: file a's content is exactly the encoding
// of the manifest of d/s/b or of the tree d/s (one row, an id names bytes),
// stored in either order. A push and a pull back into a fresh store must
// keep both files readable and both stores clean.
func TestPushPullSameBytesOtherKind(t *testing.T) {
	ctx := context.Background()
	hello := []byte("hello")
	for _, twin := range []string{"manifest", "tree"} {
		for _, fileFirst := range []bool{false, true} {
			name := twin + "/" + twin + "-first"
			if fileFirst {
				name = twin + "/file-first"
			}
			t.Run(name, func(t *testing.T) {
				forEachKind(t, func(t *testing.T, k *kind) {
					ws, aside := filepath.Join(t.TempDir(), "ws"), filepath.Join(t.TempDir(), "d")
					writeFile(t, filepath.Join(ws, "d", "s", "b"), string(hello))
					// The twin's bytes, from a scratch store.
					scratch := newStore(t)
					root := importDir(t, scratch, ws)
					path := "ws/d/s/b"
					if twin == "tree" {
						path = "ws/d/s"
					}
					e, err := scratch.Objects().LookupPath(ctx, root, path)
					if err != nil {
						tr, _ := scratch.Objects().GetTree(ctx, root)
						t.Fatalf("%s: %v in %+v", path, err, tr)
					}
					_, enc, err := scratch.Objects().Get(ctx, e.Target)
					if err != nil {
						t.Fatal(err)
					}
					a := newStore(t)
					if fileFirst {
						if err := os.Rename(filepath.Join(ws, "d"), aside); err != nil {
							t.Fatal(err)
						}
						writeFile(t, filepath.Join(ws, "a"), string(enc))
						importDir(t, a, ws)
						if err := os.Rename(aside, filepath.Join(ws, "d")); err != nil {
							t.Fatal(err)
						}
					} else {
						importDir(t, a, ws)
						writeFile(t, filepath.Join(ws, "a"), string(enc))
					}
					root = importDir(t, a, ws)
					if e2, err := a.Objects().LookupPath(ctx, root, path); err != nil || e2.Target != e.Target {
						t.Fatalf("%s in the store: %+v, %v; want %s", path, e2, err, e.Target.Short())
					}
					r, reopen := k.newRemote(t)
					if _, err := Push(ctx, a, r, []string{"main"}, Options{Name: "origin"}); err != nil {
						t.Fatalf("push: %v", err)
					}
					b := newStore(t)
					if _, err := Pull(ctx, b, reopen(), []string{"main"}, Options{Name: "origin"}); err != nil {
						t.Fatalf("pull: %v", err)
					}
					if got := head(t, b, "main"); got != root {
						t.Fatalf("pulled root %s, pushed %s", got.Short(), root.Short())
					}
					for _, db := range []*cas.Store{a.Objects(), b.Objects()} {
						for p, want := range map[string][]byte{"ws/a": enc, "ws/d/s/b": hello} {
							e, err := db.LookupPath(ctx, root, p)
							if err != nil {
								t.Fatal(err)
							}
							var got bytes.Buffer
							if _, err := db.ReadFile(ctx, e.Target, &got); err != nil || !bytes.Equal(got.Bytes(), want) {
								t.Fatalf("%s: %q, %v; want %q", p, got.Bytes(), err, want)
							}
						}
					}
					verifyClean(t, a)
					verifyClean(t, b)
				})
			})
		}
	}
}

// TestGCS3KeepsEntryKindClosure: the remote holds big.bin's manifest as a
// manifest (it was pushed as one), and then only as a chunk of the live
// state (file a's content is exactly those bytes: an id names bytes).
// Has offers an object with its closure as the kind its entry says, and a
// push trusts that: gc must keep the manifest's chunks, or a later push of
// big.bin by a store holding it as a manifest sends none of them and the
// state it leaves cannot be pulled.
func TestGCS3KeepsEntryKindClosure(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "ws")
	big := filepath.Join(ws, "d", "big.bin")
	randomFile(t, big, 512<<10)
	content, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	a := newStore(t)
	root := importDir(t, a, ws)
	e, err := a.Objects().LookupPath(ctx, root, "ws/d/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	_, enc, err := a.Objects().Get(ctx, e.Target)
	if err != nil {
		t.Fatal(err)
	}
	r, reopen := k.newRemote(t)
	if _, err := Push(ctx, a, r, []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	// main moves on to a state whose only file's content is big.bin's
	// manifest: the pack of the first push is dead but for that object.
	if err := os.RemoveAll(filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "a"), string(enc))
	root = importDir(t, a, ws)
	if _, err := Push(ctx, a, reopen(), []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	runGC(t, reopen(), GCOptions{Grace: 0}) // checks the closure of what Has offers
	checkPulled(t, reopen(), "main", root, ws)

	ws2 := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws2, "d", "big.bin"), string(content))
	b := newStore(t)
	root2 := importDir(t, b, ws2)
	if _, err := Push(ctx, b, reopen(), []string{"main"}, Options{Name: "origin", Force: true}); err != nil {
		t.Fatal(err)
	}
	checkPulled(t, reopen(), "main", root2, ws2)
}

// TestPushSendsUnderObjectHeldAsOtherKind: the remote holds file a's
// content, which is exactly the manifest of d/b, as a chunk (the first
// push had only a). The second push adds d/b: the remote has that id, but
// not as a manifest, so the push must descend into it and send d/b's
// chunk, or the state it leaves cannot be pulled.
func TestPushSendsUnderObjectHeldAsOtherKind(t *testing.T) {
	ctx := context.Background()
	content := "the content of d/b, whose manifest is file a's content\n"
	forEachKind(t, func(t *testing.T, k *kind) {
		scratchWS := filepath.Join(t.TempDir(), "ws")
		writeFile(t, filepath.Join(scratchWS, "d", "b"), content)
		scratch := newStore(t)
		root := importDir(t, scratch, scratchWS)
		e, err := scratch.Objects().LookupPath(ctx, root, "ws/d/b")
		if err != nil {
			t.Fatal(err)
		}
		_, enc, err := scratch.Objects().Get(ctx, e.Target)
		if err != nil {
			t.Fatal(err)
		}

		ws := filepath.Join(t.TempDir(), "ws")
		writeFile(t, filepath.Join(ws, "a"), string(enc))
		a := newStore(t)
		importDir(t, a, ws)
		r, reopen := k.newRemote(t)
		if _, err := Push(ctx, a, r, []string{"main"}, Options{Name: "origin"}); err != nil {
			t.Fatalf("first push: %v", err)
		}
		writeFile(t, filepath.Join(ws, "d", "b"), content)
		root = importDir(t, a, ws)
		if _, err := Push(ctx, a, reopen(), []string{"main"}, Options{Name: "origin"}); err != nil {
			t.Fatalf("second push: %v", err)
		}
		checkPulled(t, reopen(), "main", root, ws)
	})
}

// TestPushKindAsReferenced: store a holds d/b's manifest as a manifest,
// but pushes only a state where those bytes are file a's content (a
// chunk): the remote must not be told it holds the manifest, whose chunks
// it never got. Store b then pushes d/b: the remote's object is only a
// chunk, so b must send d/b's chunks though it holds the id as a manifest
// itself, or the state it leaves cannot be pulled.
func TestPushKindAsReferenced(t *testing.T) {
	ctx := context.Background()
	content := "the content of d/b, whose manifest is file a's content\n"
	forEachKind(t, func(t *testing.T, k *kind) {
		ws := filepath.Join(t.TempDir(), "ws")
		writeFile(t, filepath.Join(ws, "d", "b"), content)
		a := newStore(t)
		root := importDir(t, a, ws)
		e, err := a.Objects().LookupPath(ctx, root, "ws/d/b")
		if err != nil {
			t.Fatal(err)
		}
		_, enc, err := a.Objects().Get(ctx, e.Target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(ws, "d")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ws, "a"), string(enc))
		root = importDir(t, a, ws)
		r, reopen := k.newRemote(t)
		if _, err := Push(ctx, a, r, []string{"main"}, Options{Name: "origin"}); err != nil {
			t.Fatalf("push a: %v", err)
		}
		checkPulled(t, reopen(), "main", root, ws)

		ws2 := filepath.Join(t.TempDir(), "ws")
		writeFile(t, filepath.Join(ws2, "d", "b"), content)
		b := newStore(t)
		root2 := importDir(t, b, ws2)
		if _, err := Push(ctx, b, reopen(), []string{"main"}, Options{Name: "origin", Force: true}); err != nil {
			t.Fatalf("push b: %v", err)
		}
		checkPulled(t, reopen(), "main", root2, ws2)
		if s, ok := reopen().(*S3Remote); ok {
			checkClosure(t, s)
		}
	})
}
