package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/klauspost/compress/zstd"
)

// symlinkTree hand-encodes a root tree of one symlink named name, so names
// Tree.Encode refuses can be written.
func symlinkTree(name []byte) []byte {
	b := append([]byte("artt"), 1)
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = append(b, byte(cas.EntrySymlink))
	b = binary.AppendUvarint(b, 0o777)
	b = binary.AppendUvarint(b, 0) // uid
	b = binary.AppendUvarint(b, 0) // gid
	b = binary.AppendVarint(b, 0)  // mtime
	b = binary.AppendUvarint(b, 1)
	b = append(b, 'x')
	b = binary.AppendUvarint(b, 0) // xattrs
	b = binary.AppendUvarint(b, 0) // link groups
	return b
}

func TestSymlinkTreeEncoder(t *testing.T) {
	want := mustTree(t, &cas.Tree{Entries: []cas.Entry{{Name: []byte("ok"), Kind: cas.EntrySymlink, Mode: 0o777, Size: 1, Link: []byte("x")}}})
	if got := symlinkTree([]byte("ok")); !bytes.Equal(got, want) {
		t.Fatalf("hand encoder %x, Tree.Encode %x", got, want)
	}
}

// fileTree is a valid root tree of one file with manifest m.
func fileTree(t *testing.T, m cas.ID, size int64) cas.Raw {
	return rawOf(cas.KindTree, mustTree(t, &cas.Tree{Entries: []cas.Entry{{Name: []byte("f"), Kind: cas.EntryFile, Mode: 0o644, Size: size, Target: m}}}))
}

func manifestOf(chunks ...cas.Raw) cas.Raw {
	m := &cas.Manifest{}
	for _, c := range chunks {
		m.Extents = append(m.Extents, cas.Extent{ID: c.ID, Len: c.Size})
		m.Size += c.Size
	}
	return rawOf(cas.KindManifest, m.Encode())
}

type badCase struct {
	name string
	objs []cas.Raw
	root cas.ID
	bad  cas.ID // the object the error must name
}

func badCases(t *testing.T) []badCase {
	var cs []badCase
	// Each case's top object hangs under a valid root as dir "sub", so a
	// store file remote can record the branch (it reads the root tree).
	add := func(name string, bad cas.ID, objs ...cas.Raw) {
		top := objs[len(objs)-1].ID
		root := rawOf(cas.KindTree, mustTree(t, &cas.Tree{Entries: []cas.Entry{{Name: []byte("sub"), Kind: cas.EntryDir, Mode: 0o755, Target: top}}}))
		cs = append(cs, badCase{name: name, objs: append(objs, root), root: root.ID, bad: bad})
	}
	chunk := rawOf(cas.KindChunk, []byte(strings.Repeat("good data ", 100)))
	man := manifestOf(chunk)

	flipped := chunk
	flipped.Data = append([]byte{}, chunk.Data...)
	flipped.Data[10] ^= 1
	add("corrupt chunk", chunk.ID, flipped, man, fileTree(t, man.ID, chunk.Size))

	add("missing manifest", man.ID, fileTree(t, man.ID, chunk.Size))

	other := rawOf(cas.KindChunk, []byte(strings.Repeat("other data ", 100)))
	lying := other
	lying.ID = chunk.ID // another object's bytes under chunk's id
	add("hash lies", chunk.ID, lying, man, fileTree(t, man.ID, chunk.Size))

	// A chunk sent as a tree is no bad input: an id names bytes, and the
	// kind a row says is a hint (docs/store-format.md). The bytes are
	// checked as the kind their referrer expects (TestPushPullSameBytesOtherKind).

	huge := append([]byte("artm"), 1)
	huge = binary.AppendUvarint(huge, 1<<63)
	huge = binary.AppendUvarint(huge, 0)
	hugeM := rawOf(cas.KindManifest, huge)
	add("2^63-byte manifest", hugeM.ID, hugeM, fileTree(t, hugeM.ID, 1))

	billion := append([]byte("artt"), 1)
	billion = binary.AppendUvarint(billion, 1_000_000_000)
	billion = append(billion, make([]byte, 64)...)
	bt := rawOf(cas.KindTree, billion)
	add("billion-entry tree", bt.ID, bt)

	for _, name := range []string{"..", "/etc", "a\x00b", "."} {
		tr := rawOf(cas.KindTree, symlinkTree([]byte(name)))
		add("name "+strings.ReplaceAll(name, "\x00", `\0`), tr.ID, tr)
	}

	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 60<<20)
	bomb := cas.Raw{ID: cas.Sum(zeros[:4096]), Kind: cas.KindChunk, Codec: 1, Size: 4096, Data: enc.EncodeAll(zeros, nil)}
	enc.Close()
	bm := manifestOf(cas.Raw{ID: bomb.ID, Size: 4096})
	add("decompression bomb", bomb.ID, bomb, bm, fileTree(t, bm.ID, 4096))
	return cs
}

// snapshotOf is what a failed pull must not change: branch heads and the
// object count.
func snapshotOf(t *testing.T, db *journal.DB) string {
	t.Helper()
	ctx := context.Background()
	bs, err := db.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, b := range bs {
		sb.WriteString(b.Name + "=" + b.HeadHash.String() + " ")
	}
	n := 0
	if err := db.Objects().Each(ctx, func(cas.ID, cas.Kind) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%sobjects=%d", sb.String(), n)
}

func TestPullRefusesBadInput(t *testing.T) {
	forEachKind(t, func(t *testing.T, k *kind) {
		for _, c := range badCases(t) {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				r, reopen := k.newRemote(t)
				k.plant(t, r, c.objs, "evil", c.root)
				b := newStore(t)
				importDir(t, b, sampleDir(t))
				before := snapshotOf(t, b)
				_, err := Pull(ctx, b, reopen(), []string{"evil"}, Options{Force: true})
				if err == nil {
					t.Fatal("pull of a bad object succeeded")
				}
				if !strings.Contains(err.Error(), c.bad.String()) {
					t.Fatalf("error does not name object %s: %v", c.bad.Short(), err)
				}
				if after := snapshotOf(t, b); after != before {
					t.Fatalf("failed pull changed the store:\nbefore %s\nafter  %s", before, after)
				}
				t.Logf("%v", err)
			})
		}
	})
}
