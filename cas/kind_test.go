package cas

import (
	"bytes"
	"context"
	"testing"
)

// An id names bytes, not a kind: a file whose content is exactly another
// object's encoding shares that object's row, whose kind column is that of
// whichever was stored first. Both must read back, in both orders.

// twin is an object of kind k whose bytes are also a file's content.
type twin struct {
	name string
	k    Kind
	enc  []byte                              // the object's bytes
	put  func(t *testing.T, s *Store) ID     // stores the object
	read func(t *testing.T, s *Store, id ID) // reads it back as kind k
}

func kindTwins(t *testing.T) []twin {
	hello := []byte("hello")
	m := &Manifest{Size: int64(len(hello)), Extents: []Extent{{ID: Sum(hello), Len: int64(len(hello))}}}
	tr := &Tree{Entries: []Entry{{Name: []byte("f"), Kind: EntryFile, Mode: 0o644, Size: 5, Target: Sum(m.Encode())}}}
	tenc, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return []twin{
		{name: "manifest", k: KindManifest, enc: m.Encode(),
			put: func(t *testing.T, s *Store) ID {
				id, _, err := s.PutFile(context.Background(), bytes.NewReader(hello))
				if err != nil {
					t.Fatal(err)
				}
				return id
			},
			read: func(t *testing.T, s *Store, id ID) {
				var b bytes.Buffer
				if _, err := s.ReadFile(context.Background(), id, &b); err != nil {
					t.Fatalf("read the manifest's file: %v", err)
				}
				if !bytes.Equal(b.Bytes(), hello) {
					t.Fatalf("the manifest's file reads %q, want %q", b.Bytes(), hello)
				}
			}},
		{name: "tree", k: KindTree, enc: tenc,
			put: func(t *testing.T, s *Store) ID {
				if _, _, err := s.PutFile(context.Background(), bytes.NewReader(hello)); err != nil {
					t.Fatal(err)
				}
				id, _, err := s.PutTree(context.Background(), tr)
				if err != nil {
					t.Fatal(err)
				}
				return id
			},
			read: func(t *testing.T, s *Store, id ID) {
				got, err := s.GetTree(context.Background(), id)
				if err != nil {
					t.Fatalf("get the tree: %v", err)
				}
				if len(got.Entries) != 1 || string(got.Entries[0].Name) != "f" || got.Entries[0].Target != tr.Entries[0].Target {
					t.Fatalf("the tree reads %+v", got)
				}
			}},
	}
}

func TestSameBytesOtherKind(t *testing.T) {
	ctx := context.Background()
	for _, tw := range kindTwins(t) {
		for _, objFirst := range []bool{false, true} {
			name := tw.name + "/file-first"
			if objFirst {
				name = tw.name + "/" + tw.name + "-first"
			}
			t.Run(name, func(t *testing.T) {
				s, _ := newTestStore(t)
				var obj, file ID
				putFile := func() {
					var err error
					if file, _, err = s.PutFile(ctx, bytes.NewReader(tw.enc)); err != nil {
						t.Fatal(err)
					}
				}
				if objFirst {
					obj = tw.put(t, s)
					putFile()
				} else {
					putFile()
					obj = tw.put(t, s)
				}
				if obj != Sum(tw.enc) {
					t.Fatalf("the %s is %s, want %s", tw.name, obj.Short(), Sum(tw.enc).Short())
				}
				tw.read(t, s, obj)
				var b bytes.Buffer
				if _, err := s.ReadFile(ctx, file, &b); err != nil {
					t.Fatalf("read the file: %v", err)
				}
				if !bytes.Equal(b.Bytes(), tw.enc) {
					t.Fatalf("the file reads %q, want %q", b.Bytes(), tw.enc)
				}
				// Two extents of the twin: the read-ahead path.
				two, _, err := s.PutManifest(ctx, &Manifest{Size: 2 * int64(len(tw.enc)), Extents: []Extent{
					{ID: obj, Len: int64(len(tw.enc))}, {ID: obj, Len: int64(len(tw.enc))}}})
				if err != nil {
					t.Fatal(err)
				}
				b.Reset()
				if _, err := s.ReadFile(ctx, two, &b); err != nil {
					t.Fatalf("read the two-extent file: %v", err)
				}
				if want := append(bytes.Clone(tw.enc), tw.enc...); !bytes.Equal(b.Bytes(), want) {
					t.Fatalf("the two-extent file reads %q, want %q", b.Bytes(), want)
				}
				if err := s.Verify(ctx, obj); err != nil {
					t.Fatalf("verify: %v", err)
				}
			})
		}
	}
}

// TestWalkSameBytesOtherKind: a walk follows a reference as the kind its
// referrer expects, even when the id was reached before as another kind:
// here the chunk of file a (reached first, a level up) has the bytes of the
// object under d, whose own references must still be reached (gc keeps
// what a walk reaches).
func TestWalkSameBytesOtherKind(t *testing.T) {
	ctx := context.Background()
	hello := []byte("hello")
	for _, tw := range kindTwins(t) {
		t.Run(tw.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			obj := tw.put(t, s)
			a, _, err := s.PutFile(ctx, bytes.NewReader(tw.enc))
			if err != nil {
				t.Fatal(err)
			}
			under := Entry{Name: []byte("b"), Kind: EntryFile, Mode: 0o644, Size: 5, Target: obj}
			if tw.k == KindTree {
				under = Entry{Name: []byte("s"), Kind: EntryDir, Mode: 0o755, Target: obj}
			}
			d, _, err := s.PutTree(ctx, &Tree{Entries: []Entry{under}})
			if err != nil {
				t.Fatal(err)
			}
			root, _, err := s.PutTree(ctx, &Tree{Entries: []Entry{
				{Name: []byte("a"), Kind: EntryFile, Mode: 0o644, Size: int64(len(tw.enc)), Target: a},
				{Name: []byte("d"), Kind: EntryDir, Mode: 0o755, Target: d}}})
			if err != nil {
				t.Fatal(err)
			}
			w := &Walker{Load: StoreLoader(s, false)}
			if err := w.Walk(ctx, Ref{ID: root, Kind: KindTree}); err != nil {
				t.Fatalf("walk: %v", err)
			}
			if _, ok := w.Seen[Sum(hello)]; !ok {
				t.Fatalf("the walk did not reach the chunk of %q under the %s that shares a chunk's id", hello, tw.name)
			}
		})
	}
}
