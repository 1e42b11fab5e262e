package cas

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// ReadAt returns exactly the bytes ReadFile does at every range: holes as
// zeros, ranges across chunk and hole boundaries, past the end, and with
// enough extents to use the read-ahead.
func TestReadAtMatchesReadFile(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	const hole = 1 << 20
	head, tail := randBytes(30, 700<<10), randBytes(31, 90<<10)
	size := int64(len(head) + hole + len(tail) + hole)
	in := sparseFile(t, size, map[int64][]byte{0: head, int64(len(head) + hole): tail})
	id, _, err := s.PutSparseFile(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := s.ReadFile(ctx, id, &want); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Extents) < 2*readAtAhead {
		t.Fatalf("%d extents: too few to test the read-ahead", len(m.Extents))
	}
	l := NewLayout(id, m)
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	ranges := [][2]int64{{0, size}, {0, 1}, {size - 1, 10}, {size, 5}, {size + 100, 5}, {int64(len(head)) - 3, 10}, {int64(len(head)) + hole - 2, 4}}
	for range 200 {
		off := rng.Int64N(size)
		ranges = append(ranges, [2]int64{off, rng.Int64N(300 << 10)})
	}
	for _, r := range ranges {
		off, n := r[0], r[1]
		p := bytes.Repeat([]byte{0xee}, int(n)) // holes must be written as zeros, not left
		got, err := s.ReadAt(ctx, l, p, off)
		if err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		wantN := max(min(n, size-off), 0)
		if int64(got) != wantN {
			t.Fatalf("ReadAt(%d, %d) = %d bytes, want %d", off, n, got, wantN)
		}
		if got > 0 && !bytes.Equal(p[:got], want.Bytes()[off:off+int64(got)]) {
			t.Fatalf("ReadAt(%d, %d): bytes differ from ReadFile's", off, n)
		}
	}
}

// A damaged chunk fails the read that needs it (and only that read) with
// ErrCorrupt.
func TestReadAtCorruptChunk(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	data := randBytes(32, 300<<10)
	id, _, err := s.PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Extents) < 2 {
		t.Fatalf("%d extents, want several", len(m.Extents))
	}
	last := m.Extents[len(m.Extents)-1]
	if _, err := db.Exec(`UPDATE objects SET data = ? WHERE id = ?`, flipBit(readRow(t, db, last.ID)), last.ID[:]); err != nil {
		t.Fatal(err)
	}
	l := NewLayout(id, m)
	p := make([]byte, 100)
	if _, err := s.ReadAt(ctx, l, p, 0); err != nil {
		t.Fatalf("read of an intact chunk: %v", err)
	}
	if _, err := s.ReadAt(ctx, l, p, m.Size-50); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of the damaged chunk: %v, want ErrCorrupt", err)
	}
	big := make([]byte, m.Size) // through the read-ahead
	if _, err := s.ReadAt(ctx, l, big, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of the whole file: %v, want ErrCorrupt", err)
	}
}
