package cas

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestIDStringParse(t *testing.T) {
	id := Sum([]byte("hello"))
	s := id.String()
	if got, want := len(s), 64; got != want {
		t.Fatalf("len(String()) = %d, want %d", got, want)
	}
	if got, want := s, strings.ToLower(s); got != want {
		t.Fatalf("String() = %q, want lowercase", got)
	}
	if got, want := id.Short(), s[:12]; got != want {
		t.Fatalf("Short() = %q, want %q", got, want)
	}
	back, err := ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back, id; got != want {
		t.Fatalf("ParseID(String()) = %v, want %v", got, want)
	}
	if back, err := ParseID(strings.ToUpper(s)); err != nil || back != id {
		t.Fatalf("ParseID(upper) = %v, %v; want %v", back, err, id)
	}
	for _, bad := range []string{"", s[:63], s + "0", s[:63] + "g", " " + s[1:]} {
		if _, err := ParseID(bad); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("ParseID(%q) = %v, want ErrInvalidID", bad, err)
		}
	}
	if got, want := id.IsZero(), false; got != want {
		t.Fatalf("IsZero() = %v, want %v", got, want)
	}
	if got, want := (ID{}).IsZero(), true; got != want {
		t.Fatalf("ID{}.IsZero() = %v, want %v", got, want)
	}
	// BLAKE3 of "" is a published test vector.
	if got, want := Sum(nil).String(), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"; got != want {
		t.Fatalf("Sum(nil) = %s, want %s", got, want)
	}
}

func TestIDJSON(t *testing.T) {
	type doc struct {
		ID ID `json:"id"`
	}
	in := doc{ID: Sum([]byte("x"))}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"id":"`+in.ID.String()+`"}`; got != want {
		t.Fatalf("json = %s, want %s", got, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.ID, in.ID; got != want {
		t.Fatalf("round trip = %v, want %v", got, want)
	}
	if err := json.Unmarshal([]byte(`{"id":"abc"}`), &out); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("unmarshal short id = %v, want ErrInvalidID", err)
	}
}

func TestKindStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{KindChunk.String(), "chunk"}, {KindManifest.String(), "manifest"}, {KindTree.String(), "tree"},
		{Kind(9).String(), "kind(9)"},
		{EntryFile.String(), "file"}, {EntryDir.String(), "dir"}, {EntrySymlink.String(), "symlink"},
		{EntryFifo.String(), "fifo"}, {EntryKind(0).String(), "entrykind(0)"},
	} {
		if tc.got != tc.want {
			t.Fatalf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}

// compressible returns n bytes of text-like data zstd shrinks a lot.
func compressible(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("ab", i%7))
		b.WriteString(" of some log output\n")
	}
	return b.Bytes()[:n]
}

type row struct {
	kind, codec, size int64
	data              []byte
}

func readRow(t *testing.T, db *sql.DB, id ID) row {
	t.Helper()
	var r row
	err := db.QueryRow(`SELECT kind, codec, size, data FROM objects WHERE id = ?`, id[:]).Scan(&r.kind, &r.codec, &r.size, &r.data)
	if err != nil {
		t.Fatalf("read row %s: %v", id.Short(), err)
	}
	return r
}

func countRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM objects`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPutTwiceStoresOnce(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	data := randBytes(1, 10000)
	id, n, err := s.Put(ctx, KindChunk, data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id, Sum(data); got != want {
		t.Fatalf("id = %v, want %v", got, want)
	}
	if got, want := n, int64(len(data)); got != want {
		t.Fatalf("new bytes = %d, want %d", got, want)
	}
	id2, n2, err := s.Put(ctx, KindChunk, data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id2, id; got != want {
		t.Fatalf("second id = %v, want %v", got, want)
	}
	if got, want := n2, int64(0); got != want {
		t.Fatalf("second new bytes = %d, want %d", got, want)
	}
	if got, want := countRows(t, db), 1; got != want {
		t.Fatalf("rows = %d, want %d", got, want)
	}
	if ok, err := s.Has(ctx, id); err != nil || !ok {
		t.Fatalf("Has = %v, %v; want true", ok, err)
	}
	if ok, err := s.Has(ctx, Sum([]byte("other"))); err != nil || ok {
		t.Fatalf("Has(absent) = %v, %v; want false", ok, err)
	}
}

func TestPutCodec(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)

	text := compressible(MaxChunk)
	id, n, err := s.Put(ctx, KindChunk, text)
	if err != nil {
		t.Fatal(err)
	}
	r := readRow(t, db, id)
	if got, want := r.codec, int64(codecZstd); got != want {
		t.Fatalf("codec of text = %d, want %d", got, want)
	}
	if got, want := r.size, int64(len(text)); got != want {
		t.Fatalf("size = %d, want %d", got, want)
	}
	if len(r.data) >= len(text)/2 {
		t.Fatalf("stored %d bytes for %d bytes of text, want much less", len(r.data), len(text))
	}
	if got, want := n, int64(len(r.data)); got != want {
		t.Fatalf("new bytes = %d, want stored length %d", got, want)
	}

	random := randBytes(2, MaxChunk)
	id, _, err = s.Put(ctx, KindChunk, random)
	if err != nil {
		t.Fatal(err)
	}
	r = readRow(t, db, id)
	if got, want := r.codec, int64(codecRaw); got != want {
		t.Fatalf("codec of random data = %d, want %d", got, want)
	}
	if !bytes.Equal(r.data, random) {
		t.Fatal("raw object not stored as is")
	}
}

func TestGetRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	for _, tc := range []struct {
		name string
		kind Kind
		data []byte
	}{
		{"empty", KindChunk, []byte{}},
		{"tiny", KindChunk, []byte("x")},
		{"random", KindChunk, randBytes(3, 50000)},
		{"text", KindChunk, compressible(MaxChunk)},
		{"big manifest", KindManifest, compressible(3 << 20)},
		{"tree", KindTree, compressible(1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, _, err := s.Put(ctx, tc.kind, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			k, b, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := k, tc.kind; got != want {
				t.Fatalf("kind = %v, want %v", got, want)
			}
			if !bytes.Equal(b, tc.data) {
				t.Fatal("Get returned other bytes than Put stored")
			}
			if err := s.Verify(ctx, id); err != nil && tc.kind == KindChunk {
				t.Fatalf("Verify = %v", err)
			}
		})
	}
}

func TestPutLimits(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	if _, _, err := s.Put(ctx, KindChunk, make([]byte, MaxChunk+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put(chunk of MaxChunk+1) = %v, want ErrTooLarge", err)
	}
	if _, _, err := s.Put(ctx, KindTree, make([]byte, MaxObjectSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put(tree of MaxObjectSize+1) = %v, want ErrTooLarge", err)
	}
	if _, _, err := s.Put(ctx, Kind(0), []byte("x")); err == nil {
		t.Fatal("Put(kind 0) succeeded")
	}
}

func TestGetMissing(t *testing.T) {
	s, _ := newTestStore(t)
	id := Sum([]byte("nowhere"))
	_, _, err := s.Get(context.Background(), id)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("error %q does not name the id %s", err, id)
	}
	if err := s.Verify(context.Background(), id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Verify(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetTree(context.Background(), id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetTree(missing) = %v, want ErrNotFound", err)
	}
}

// wantCorrupt checks that err is a *CorruptError naming id.
func wantCorrupt(t *testing.T, err error, id ID) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error = %v, want ErrCorrupt", err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *CorruptError", err)
	}
	if got, want := ce.ID, id; got != want {
		t.Fatalf("CorruptError.ID = %v, want %v", got, want)
	}
	if !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("error %q does not name the id", err)
	}
}

func TestCorruption(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		data   []byte
		update string
		arg    func(r row) any
	}{
		{"bit flip raw", randBytes(4, 20000), `UPDATE objects SET data = ? WHERE id = ?`, flipBit},
		{"bit flip zstd", compressible(20000), `UPDATE objects SET data = ? WHERE id = ?`, flipBit},
		{"truncated zstd", compressible(20000), `UPDATE objects SET data = ? WHERE id = ?`,
			func(r row) any { return r.data[:len(r.data)/2] }},
		{"size raw", randBytes(5, 20000), `UPDATE objects SET size = ? WHERE id = ?`,
			func(r row) any { return r.size - 1 }},
		{"size zstd smaller", compressible(20000), `UPDATE objects SET size = ? WHERE id = ?`,
			func(r row) any { return r.size - 1 }},
		{"size zstd larger", compressible(20000), `UPDATE objects SET size = ? WHERE id = ?`,
			func(r row) any { return r.size + 1 }},
		{"size negative", randBytes(5, 20000), `UPDATE objects SET size = ? WHERE id = ?`,
			func(r row) any { return -1 }},
		{"size over cap", randBytes(5, 20000), `UPDATE objects SET size = ? WHERE id = ?`,
			func(r row) any { return MaxChunk + 1 }},
		{"codec raw to zstd", randBytes(6, 20000), `UPDATE objects SET codec = ? WHERE id = ?`,
			func(r row) any { return codecZstd }},
		{"codec zstd to raw", compressible(20000), `UPDATE objects SET codec = ? WHERE id = ?`,
			func(r row) any { return codecRaw }},
		{"codec unknown", randBytes(6, 20000), `UPDATE objects SET codec = ? WHERE id = ?`,
			func(r row) any { return 7 }},
		{"kind unknown", randBytes(6, 20000), `UPDATE objects SET kind = ? WHERE id = ?`,
			func(r row) any { return 9 }},
		{"size text", randBytes(6, 20000), `UPDATE objects SET size = ? WHERE id = ?`,
			func(r row) any { return "big" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, db := newTestStore(t)
			id, _, err := s.Put(ctx, KindChunk, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			r := readRow(t, db, id)
			if _, err := db.Exec(tc.update, tc.arg(r), id[:]); err != nil {
				t.Fatal(err)
			}
			_, b, err := s.Get(ctx, id)
			if b != nil {
				t.Fatal("Get returned bytes for a corrupt object")
			}
			wantCorrupt(t, err, id)
			wantCorrupt(t, s.Verify(ctx, id), id)
		})
	}
}

func flipBit(r row) any {
	b := bytes.Clone(r.data)
	b[len(b)/2] ^= 0x10
	return b
}

// rleBomb returns a zstd frame without a content size that inflates to n
// bytes (a multiple of 128 KiB) of 'A' from 4 bytes per 128 KiB block.
func rleBomb(n int) []byte {
	const block = 128 << 10
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3} // magic, no FCS, 128 KiB window
	for i := 0; i < n/block; i++ {
		last := 0
		if i == n/block-1 {
			last = 1
		}
		h := uint32(block)<<3 | 1<<1 | uint32(last) // RLE block
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'A')
	}
	return b
}

func TestDecompressionBomb(t *testing.T) {
	ctx := context.Background()
	// The bomb is a valid frame: check that first, on a small one.
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	small, err := dec.DecodeAll(rleBomb(256<<10), nil)
	if err != nil || len(small) != 256<<10 {
		t.Fatalf("small bomb decodes to %d bytes, %v; want %d", len(small), err, 256<<10)
	}
	for _, tc := range []struct {
		name string
		kind Kind
		size int64
		data []byte
	}{
		{"chunk lying size", KindChunk, 16 << 10, rleBomb(1 << 30)},
		{"chunk at cap", KindChunk, MaxChunk, rleBomb(1 << 30)},
		{"manifest lying size", KindManifest, 100, rleBomb(1 << 30)},
		{"tree at cap", KindTree, MaxObjectSize, rleBomb(1 << 30)},
		{"declared size", KindChunk, 16 << 10, declaredBomb()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, db := newTestStore(t)
			id := Sum([]byte(tc.name))
			if _, err := db.Exec(`INSERT INTO objects (id, kind, codec, size, data) VALUES (?, ?, 1, ?, ?)`,
				id[:], int(tc.kind), tc.size, tc.data); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _, err := s.Get(ctx, id)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			wantCorrupt(t, err, id)
			// Bounded by the size column: a chunk is refused at once, a
			// 64 MiB tree after inflating 64 MiB (slow under -race).
			limit := 2 * time.Second
			if tc.size > MaxChunk {
				limit = 30 * time.Second
			}
			if elapsed > limit {
				t.Fatalf("refusing the bomb took %v, want at most %v", elapsed, limit)
			}
			// The decoder appends the block that overflows the capacity
			// before it notices, so the output buffer may double once.
			allocated := after.TotalAlloc - before.TotalAlloc
			if limit := 3*uint64(tc.size) + 8<<20; allocated > limit {
				t.Fatalf("refusing the bomb allocated %d bytes, want at most %d", allocated, limit)
			}
		})
	}
}

// declaredBomb is a frame header declaring 1 GiB of content.
func declaredBomb() []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic, 8-byte FCS, single segment
	b = binary.LittleEndian.AppendUint64(b, 1<<30)
	h := uint32(128<<10)<<3 | 1<<1 | 1
	return append(b, byte(h), byte(h>>8), byte(h>>16), 'A')
}

func TestTypedGetKindMismatch(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid, _, err := s.PutTree(ctx, &Tree{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetManifest(ctx, tid)
	wantCorrupt(t, err, tid)
	mid, _, err := s.PutManifest(ctx, &Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetTree(ctx, mid)
	wantCorrupt(t, err, mid)
	// A stored manifest that does not decode is corrupt too.
	bad, _, err := s.Put(ctx, KindManifest, []byte("artm\x01\x05\x00"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetManifest(ctx, bad)
	wantCorrupt(t, err, bad)
	wantCorrupt(t, s.Verify(ctx, bad), bad)
	if err := s.Verify(ctx, mid); err != nil {
		t.Fatalf("Verify(manifest) = %v", err)
	}
	if err := s.Verify(ctx, tid); err != nil {
		t.Fatalf("Verify(tree) = %v", err)
	}
}

func TestEach(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	var want []ID
	for i := 0; i < 2*eachBatch+3; i++ {
		k := KindChunk
		if i%3 == 1 {
			k = KindTree
		}
		id, _, err := s.Put(ctx, k, binary.AppendUvarint(nil, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	var got []ID
	err := s.Each(ctx, func(id ID, k Kind) error {
		if wk := KindChunk; len(got)%3 == 1 && k != KindTree || len(got)%3 != 1 && k != wk {
			t.Fatalf("object %d has kind %v", len(got), k)
		}
		got = append(got, id)
		// The handle is free while fn runs.
		_, _, err := s.Get(ctx, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(got), len(want); got != want {
		t.Fatalf("Each visited %d objects, want %d", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("object %d = %v, want %v (rowid order)", i, got[i], want[i])
		}
	}
	stop := errors.New("stop")
	n := 0
	err = s.Each(ctx, func(ID, Kind) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Each = %v after %d calls, want %v after 1", err, n, stop)
	}
}

func TestWithTx(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := s.With(tx).Put(ctx, KindChunk, []byte("in a transaction"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.With(tx).Get(ctx, id); err != nil {
		t.Fatalf("Get inside the transaction = %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after rollback = %v, want ErrNotFound", err)
	}
}

// Writers racing on the same objects store each once, and exactly one of
// them reports the bytes as new.
func TestConcurrentPut(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	const objects, writers = 50, 4
	var mu sync.Mutex
	var newBytes int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < objects; i++ {
				_, n, err := s.Put(ctx, KindChunk, randBytes(uint64(i), 5000))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				newBytes += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := countRows(t, db), objects; got != want {
		t.Fatalf("rows = %d, want %d", got, want)
	}
	if got, want := newBytes, int64(objects*5000); got != want {
		t.Fatalf("new bytes reported = %d, want %d", got, want)
	}
}

// TestStoredKinds: the batched look-up answers, for every id asked, what
// the object's row says (its kind column, even one a row was rewritten
// to), 0 for an absent id, across statements (more ids than lookupBatch)
// and for an id asked twice.
func TestStoredKinds(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	var ids []ID
	want := map[ID]Kind{}
	for i := range lookupBatch + 40 {
		k := []Kind{KindChunk, KindManifest, KindTree}[i%3]
		id, _, err := s.Put(ctx, k, randBytes(uint64(i), 64+i))
		if err != nil {
			t.Fatal(err)
		}
		ids, want[id] = append(ids, id), k
	}
	// A row whose kind column was written as another kind: the answer is
	// the column's.
	if _, err := db.Exec(`UPDATE objects SET kind = ? WHERE id = ?`, int(KindTree), ids[0][:]); err != nil {
		t.Fatal(err)
	}
	want[ids[0]] = KindTree
	absent := Sum([]byte("never stored"))
	ask := append([]ID{absent}, ids...)
	ask = append(ask, ids[lookupBatch+7], absent, ids[1])
	got, err := s.StoredKinds(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ask) {
		t.Fatalf("%d answers for %d ids", len(got), len(ask))
	}
	for i, id := range ask {
		if got[i] != want[id] {
			t.Errorf("id %d (%s): kind %v, want %v", i, id.Short(), got[i], want[id])
		}
	}
	if got, err := s.StoredKinds(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no ids: %v, %v", got, err)
	}
}
