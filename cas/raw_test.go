package cas

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRawRoundTrip: an object read in stored form and put into another
// store arrives identical, compressed as it was, and only once.
func TestRawRoundTrip(t *testing.T) {
	ctx := context.Background()
	a, b := NewStore(openDB(t)), NewStore(openDB(t))
	data := bytes.Repeat([]byte("compressible "), 1000)
	id, _, err := a.Put(ctx, KindChunk, data)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := a.GetRaw(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Codec != codecZstd || int64(len(raw.Data)) >= raw.Size {
		t.Fatalf("raw form: codec %d, %d stored bytes for %d", raw.Codec, len(raw.Data), raw.Size)
	}
	n, err := b.PutRaw(ctx, raw)
	if err != nil || n != int64(len(raw.Data)) {
		t.Fatalf("PutRaw = %d, %v; want %d", n, err, len(raw.Data))
	}
	if n, err := b.PutRaw(ctx, raw); err != nil || n != 0 {
		t.Fatalf("second PutRaw = %d, %v; want 0, nil", n, err)
	}
	_, got, err := b.Get(ctx, id)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after PutRaw: %v", err)
	}
	if _, err := a.GetRaw(ctx, Sum([]byte("absent"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRaw of an absent object: %v", err)
	}
}

// TestPutRawRefuses: nothing unverified is inserted.
func TestPutRawRefuses(t *testing.T) {
	ctx := context.Background()
	s := NewStore(openDB(t))
	good := []byte("artt\x01\x00\x00")
	cases := map[string]Raw{
		"hash":     {ID: Sum([]byte("other")), Kind: KindChunk, Size: 5, Data: []byte("hello")},
		"kind":     {ID: Sum([]byte("x")), Kind: 9, Size: 1, Data: []byte("x")},
		"size":     {ID: Sum([]byte("x")), Kind: KindChunk, Size: 2, Data: []byte("x")},
		"tree":     {ID: Sum([]byte("artt\x01\x05")), Kind: KindTree, Size: 6, Data: []byte("artt\x01\x05")},
		"codec":    {ID: Sum(good), Kind: KindTree, Codec: 7, Size: int64(len(good)), Data: good},
		"manifest": {ID: Sum(good), Kind: KindManifest, Size: int64(len(good)), Data: good},
	}
	for name, r := range cases {
		_, err := s.PutRaw(ctx, r)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.ID != r.ID {
			t.Errorf("%s: PutRaw = %v, want a CorruptError naming %s", name, err, r.ID.Short())
		}
		if ok, _ := s.Has(ctx, r.ID); ok {
			t.Errorf("%s: the refused object was stored", name)
		}
	}
}

// A row whose stored bytes are over its kind's bound (a foreign store can
// hold any blob) is refused before the blob is read.
func TestOversizedRowRefused(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	s := NewStore(db)
	id := Sum([]byte("x"))
	if _, err := db.ExecContext(ctx, `INSERT INTO objects (id, kind, codec, size, data) VALUES (?, 1, 0, 1, zeroblob(?))`,
		id[:], KindChunk.maxStored()+1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, id); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Get: %v, want a corrupt object over its limit", err)
	}
	if _, err := s.GetRaw(ctx, id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetRaw: %v, want ErrCorrupt", err)
	}
	if _, err := CheckRaw(Raw{ID: id, Kind: KindChunk, Size: 1, Data: make([]byte, KindChunk.maxStored()+1)}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("CheckRaw: %v, want ErrCorrupt", err)
	}
}
