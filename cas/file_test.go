package cas

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestManifestRoundTrip(t *testing.T) {
	a, b := Sum([]byte("a")), Sum([]byte("b"))
	for _, m := range []*Manifest{
		{},
		{Size: 5, Extents: []Extent{{ID: a, Len: 5}}},
		{Size: MaxChunk + 10, Extents: []Extent{{ID: a, Len: MaxChunk}, {Len: 10}}},
		{Size: 1<<40 + 2, Extents: []Extent{{Len: 1 << 40}, {ID: b, Len: 1}, {ID: b, Len: 1}}},
		{Size: MaxFileSize, Extents: []Extent{{Len: MaxFileSize}}},
	} {
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate(%+v) = %v", m, err)
		}
		enc := m.Encode()
		got, err := DecodeManifest(enc)
		if err != nil {
			t.Fatalf("DecodeManifest(Encode(%+v)) = %v", m, err)
		}
		if !manifestsEqual(got, m) {
			t.Fatalf("round trip = %+v, want %+v", got, m)
		}
		if !bytes.Equal(got.Encode(), enc) {
			t.Fatal("re-encoding differs")
		}
	}
}

func manifestsEqual(a, b *Manifest) bool {
	if a.Size != b.Size || len(a.Extents) != len(b.Extents) {
		return false
	}
	for i := range a.Extents {
		if a.Extents[i] != b.Extents[i] {
			return false
		}
	}
	return true
}

func TestManifestNormalize(t *testing.T) {
	a := Sum([]byte("a"))
	m := &Manifest{Size: 12, Extents: []Extent{{Len: 2}, {Len: 0}, {Len: 3}, {ID: a, Len: 4}, {ID: a, Len: 0}, {Len: 1}, {Len: 2}}}
	want := &Manifest{Size: 12, Extents: []Extent{{Len: 5}, {ID: a, Len: 4}, {Len: 3}}}
	enc := m.Encode()
	if got, want := len(m.Extents), 7; got != want {
		t.Fatalf("Encode modified the manifest: %d extents, want %d", got, want)
	}
	got, err := DecodeManifest(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !manifestsEqual(got, want) {
		t.Fatalf("decoded = %+v, want %+v", got, want)
	}
	m.Normalize()
	if !manifestsEqual(m, want) {
		t.Fatalf("Normalize = %+v, want %+v", m, want)
	}
}

func TestManifestValidate(t *testing.T) {
	a := Sum([]byte("a"))
	for _, m := range []*Manifest{
		{Size: 1, Extents: []Extent{{ID: a, Len: -1}, {ID: a, Len: 2}}},
		{Size: MaxChunk + 1, Extents: []Extent{{ID: a, Len: MaxChunk + 1}}},
		{Size: 4, Extents: []Extent{{ID: a, Len: 5}}},
		{Size: MaxFileSize + 1, Extents: []Extent{{Len: MaxFileSize}, {ID: a, Len: 1}}},
		{Size: 1 << 62, Extents: []Extent{{Len: 1 << 62}}},
	} {
		if err := m.Validate(); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Validate(%+v) = %v, want ErrMalformed", m, err)
		}
		if _, _, err := (&Store{}).PutManifest(context.Background(), m); !errors.Is(err, ErrMalformed) {
			t.Fatalf("PutManifest(%+v) = %v, want ErrMalformed", m, err)
		}
	}
}

func TestDecodeManifestRejects(t *testing.T) {
	a := Sum([]byte("a"))
	hdr := []byte("artm\x01")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	u := func(v uint64) []byte { return appendUvarint(nil, v) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", []byte("artx\x01\x00\x00")},
		{"bad version", []byte("artm\x02\x00\x00")},
		{"truncated", []byte("artm\x01\x00")},
		{"trailing", []byte("artm\x01\x00\x00\x00")},
		{"non-minimal size", cat(hdr, []byte{0x80, 0x00}, u(0))},
		{"non-minimal count", cat(hdr, u(0), []byte{0x80, 0x00})},
		{"varint overflow", cat(hdr, bytes.Repeat([]byte{0xff}, 10), []byte{0x01}, u(0))},
		{"size mismatch", cat(hdr, u(6), u(1), u(5<<1), a[:])},
		{"zero-length data", cat(hdr, u(0), u(1), u(0), a[:])},
		{"zero-length hole", cat(hdr, u(0), u(1), u(1))},
		{"adjacent holes", cat(hdr, u(3), u(2), u(1<<1|1), u(2<<1|1))},
		{"zero id data", cat(hdr, u(5), u(1), u(5<<1), make([]byte, 32))},
		{"chunk too long", cat(hdr, u(MaxChunk+1), u(1), u((MaxChunk+1)<<1), a[:])},
		{"size over max", cat(hdr, u(MaxFileSize+1), u(1), u((MaxFileSize+1)<<1|1))},
		{"2^63 bytes", cat(hdr, u(1<<63), u(1), u(1<<63|1))},
		{"huge hole", cat(hdr, u(1<<62), u(1), u(1<<63|1))},
		{"billion extents", cat(hdr, u(1<<30), u(1_000_000_000), u(5<<1), a[:])},
		{"count 2^64-1", cat(hdr, u(0), u(1<<64-1))},
		{"truncated id", cat(hdr, u(5), u(1), u(5<<1), a[:10])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := DecodeManifest(tc.b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeManifest = %+v, %v; want ErrMalformed", m, err)
			}
		})
	}
}

// Counts in a manifest are checked against the input's length before
// anything is allocated for them.
func TestDecodeManifestBoundedAllocation(t *testing.T) {
	for _, count := range []uint64{900, 1 << 40} {
		b := append([]byte("artm\x01\x00"), appendUvarint(nil, count)...)
		b = append(b, make([]byte, 1000)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeManifest(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeManifest(count %d) = %v, want ErrMalformed", count, err)
		}
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(16<<10); got > limit {
			t.Fatalf("DecodeManifest(count %d) allocated %d bytes, want at most %d", count, got, limit)
		}
	}
}

func TestPutFileRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	for _, n := range []int{0, 1, MinChunk, MinChunk + 1, MaxChunk, 3<<20 + 7} {
		data := randBytes(uint64(n), n)
		id, st, err := s.PutFile(ctx, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := st.Bytes, int64(n); got != want {
			t.Fatalf("Bytes = %d, want %d", got, want)
		}
		if got, want := st.Chunks, len(cutPoints(data)); got != want {
			t.Fatalf("Chunks = %d, want %d", got, want)
		}
		var out bytes.Buffer
		written, err := s.ReadFile(ctx, id, &out)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := written, int64(n); got != want {
			t.Fatalf("ReadFile wrote %d bytes, want %d", got, want)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("ReadFile of %d bytes returned other bytes", n)
		}
		m, err := s.GetManifest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m.Size, int64(n); got != want {
			t.Fatalf("manifest size = %d, want %d", got, want)
		}
	}
}

func TestPutFileDedup(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	data := randBytes(9, 10<<20)
	_, st, err := s.PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.NewChunks, st.Chunks; got != want {
		t.Fatalf("first PutFile: %d new chunks of %d, want all", got, want)
	}
	edited := bytes.Clone(data)
	edited[len(edited)/2] ^= 1
	id, st, err := s.PutFile(ctx, bytes.NewReader(edited))
	if err != nil {
		t.Fatal(err)
	}
	if st.NewChunks >= 3 {
		t.Fatalf("1-byte edit stored %d new chunks, want fewer than 3", st.NewChunks)
	}
	var out bytes.Buffer
	if _, err := s.ReadFile(ctx, id, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), edited) {
		t.Fatal("edited file reads back differently")
	}
	// The same content again adds nothing.
	_, st, err = s.PutFile(ctx, bytes.NewReader(edited))
	if err != nil {
		t.Fatal(err)
	}
	if st.NewChunks != 0 || st.NewBytes != 0 {
		t.Fatalf("identical PutFile: %+v, want nothing new", st)
	}
}

func TestReadFileCorruptChunk(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	data := randBytes(10, 200<<10)
	id, _, err := s.PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	bad := m.Extents[1].ID
	if _, err := db.Exec(`UPDATE objects SET data = ? WHERE id = ?`, flipBit(readRow(t, db, bad)), bad[:]); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadFile(ctx, id, io.Discard)
	wantCorrupt(t, err, bad)
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantCorrupt(t, s.WriteSparse(ctx, id, f), bad)
}

// sparseFile writes data regions at the given offsets into a new file of
// the given size and returns it, reopened for reading.
func sparseFile(t *testing.T, size int64, regions map[int64][]byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for off, b := range regions {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// allocated returns the bytes f occupies on disk.
func allocated(t *testing.T, f *os.File) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestSparseRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	const hole = 1 << 20
	head, tail := randBytes(20, 100<<10), randBytes(21, 70<<10)
	size := int64(len(head) + hole + len(tail) + hole) // a hole at the end too
	in := sparseFile(t, size, map[int64][]byte{0: head, int64(len(head) + hole): tail})
	if allocated(t, in) > size/2 {
		t.Skipf("file system does not keep holes (%d bytes allocated for %d)", allocated(t, in), size)
	}
	id, st, err := s.PutSparseFile(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Size, size; got != want {
		t.Fatalf("manifest size = %d, want %d", got, want)
	}
	var holes int64
	for _, e := range m.Extents {
		if e.IsHole() {
			holes += e.Len
		}
	}
	// File systems report holes at their block granularity.
	if holes < 2*hole-2*64<<10 {
		t.Fatalf("manifest has %d bytes of holes, want about %d", holes, 2*hole)
	}
	if got, want := st.Bytes, size-holes; got != want {
		t.Fatalf("Bytes = %d, want %d", got, want)
	}

	outPath := filepath.Join(t.TempDir(), "out")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := s.WriteSparse(ctx, id, out); err != nil {
		t.Fatal(err)
	}
	if fi, err := out.Stat(); err != nil || fi.Size() != size {
		t.Fatalf("written size = %v, %v; want %d", fi.Size(), err, size)
	}
	if got, limit := allocated(t, out), int64(len(head)+len(tail))+256<<10; got > limit {
		t.Fatalf("written file occupies %d bytes, want at most %d (holes kept)", got, limit)
	}
	want, err := os.ReadFile(in.Name())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("WriteSparse content differs from the input file")
	}
	var buf bytes.Buffer
	if _, err := s.ReadFile(ctx, id, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("ReadFile content differs from the input file")
	}
}

func TestSparseEdgeCases(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	for _, tc := range []struct {
		name    string
		size    int64
		regions map[int64][]byte
	}{
		{"empty", 0, nil},
		{"all hole", 3 << 20, nil},
		{"all data", 300 << 10, map[int64][]byte{0: randBytes(30, 300<<10)}},
		{"zeros stay data", 200 << 10, map[int64][]byte{0: make([]byte, 200<<10)}},
		{"leading hole", 2<<20 + 5000, map[int64][]byte{2 << 20: randBytes(31, 5000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sparseFile(t, tc.size, tc.regions)
			id, _, err := s.PutSparseFile(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(in.Name())
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := s.ReadFile(ctx, id, &buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatal("content differs")
			}
			if tc.name == "zeros stay data" {
				m, err := s.GetManifest(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range m.Extents {
					if e.IsHole() {
						t.Fatal("written zeros became a hole")
					}
				}
			}
		})
	}
}

// TestReadAheadBatches reads files of many chunks - more than one batch
// of the read-ahead, with chunks repeated within and across batches,
// holes between them - back through a transaction, and then with a
// chunk gone, with and with a chunk stored as another kind: each fails, naming what is wrong.
func TestReadAheadBatches(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	block := randBytes(20, 40<<10)
	var data []byte
	for i := range 3 * raBatch {
		data = append(data, block...)
		data = append(data, randBytes(uint64(100+i), 5<<10)...)
	}
	id, _, err := s.PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[ID]bool{}
	for _, e := range m.Extents {
		distinct[e.ID] = true
	}
	if len(m.Extents) < 2*raBatch || len(distinct) == len(m.Extents) {
		t.Fatalf("%d extents, %d distinct: want several batches with repeats", len(m.Extents), len(distinct))
	}
	// With holes: every other extent's span left out.
	holed := &Manifest{Size: m.Size}
	var want []byte
	var off int64
	for i, e := range m.Extents {
		if i%5 == 3 {
			holed.Extents = append(holed.Extents, Extent{Len: e.Len})
			want = append(want, make([]byte, e.Len)...)
		} else {
			holed.Extents = append(holed.Extents, e)
			want = append(want, data[off:off+e.Len]...)
		}
		off += e.Len
	}
	holedID, _, err := s.PutManifest(ctx, holed)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ts := NewStore(tx)
	for _, c := range []struct {
		id   ID
		want []byte
	}{{id, data}, {holedID, want}} {
		var b bytes.Buffer
		if _, err := ts.ReadFile(ctx, c.id, &b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), c.want) {
			t.Fatalf("ReadFile of %d bytes returned %d, not equal", len(c.want), b.Len())
		}
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.WriteSparse(ctx, c.id, f); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f.Name())
		f.Close()
		if err != nil || !bytes.Equal(got, c.want) {
			t.Fatalf("WriteSparse wrote %d bytes (%v), want the %d read", len(got), err, len(c.want))
		}
	}
	tx.Rollback()

	// A chunk in the last batch gone, then one in the first stored as
	// another kind.
	last, first := m.Extents[len(m.Extents)-2].ID, m.Extents[1].ID
	if _, err := db.Exec(`DELETE FROM objects WHERE id = ?`, last[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(ctx, id, io.Discard); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), last.String()) {
		t.Fatalf("ReadFile with chunk %s gone: %v, want not found naming it", last.Short(), err)
	}
	// The kind column is a hint (an id names bytes): a chunk whose row says
	// tree is still read as the chunk, and the read goes on to the gone one.
	if _, err := db.Exec(`UPDATE objects SET kind = ? WHERE id = ?`, int(KindTree), first[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(ctx, id, io.Discard); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), last.String()) {
		t.Fatalf("ReadFile with chunk %s stored as a tree and %s gone: %v, want not found naming the gone one", first.Short(), last.Short(), err)
	}
}
