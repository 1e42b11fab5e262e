package cas

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// objectRows returns every row of db's objects table, one string each,
// sorted by id (PutFile's workers insert a file's chunks in any order).
func objectRows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT id, kind, codec, size, data, pack != 0, pack_len FROM objects ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, data []byte
		var kind, codec, size, packed, packLen int64
		if err := rows.Scan(&id, &kind, &codec, &size, &data, &packed, &packLen); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%x kind %d codec %d size %d packed %d/%d data %x", id, kind, codec, size, packed, packLen, data))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// contents are the kinds of content a small file's close stores.
func contents(n int) map[string][]byte {
	var text strings.Builder
	for i := 0; text.Len() < n; i++ {
		fmt.Fprintf(&text, "\tx%d := f(%d) // line %d of some source\n", i%97, i*7, i)
	}
	half := randBytes(uint64(n)+1, n/2)
	halves := append(append(bytes.Clone(half), half...), make([]byte, n%2)...)
	return map[string][]byte{
		"random": randBytes(uint64(n), n),   // incompressible
		"text":   []byte(text.String()[:n]), // compressible
		"zeros":  make([]byte, n),           // the same chunk over and over
		"halves": halves,                    // a repeat in the file
	}
}

// putBytesSizes are file sizes around every boundary of the chunker and
// of compression.
var putBytesSizes = []int{0, 1, 2, minCompress - 1, minCompress, minCompress + 1, 100, 1000,
	MinChunk - 1, MinChunk, MinChunk + 1, 2 * MinChunk, lookupFrom - 1, lookupFrom, lookupFrom + 1,
	AvgChunk, MaxChunk - 1, MaxChunk, MaxChunk + 1, 2*MaxChunk - 1, 2 * MaxChunk, 2*MaxChunk + 1,
	128 << 10, 300 << 10, packFrom}

// TestPutBytesMatchesPutFile: PutBytes stores exactly the rows PutFile
// stores, returns the same id and statistics, reads back, and content
// stored by either is known to the other.
func TestPutBytesMatchesPutFile(t *testing.T) {
	ctx := context.Background()
	for _, n := range putBytesSizes {
		for kind, data := range contents(n) {
			t.Run(fmt.Sprintf("%s-%d", kind, n), func(t *testing.T) {
				sf, dbf := newTestStore(t)
				sb, dbb := newTestStore(t)
				idf, stf, err := sf.PutFile(ctx, bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				idb, stb, err := sb.PutBytes(ctx, data)
				if err != nil {
					t.Fatal(err)
				}
				if idb != idf || stb != stf {
					t.Fatalf("PutBytes = %s %+v, PutFile = %s %+v", idb.Short(), stb, idf.Short(), stf)
				}
				if stb.Size != int64(n) || stb.Bytes != int64(n) || stb.NewChunks == 0 && n > 0 {
					t.Fatalf("PutBytes of %d bytes: %+v", n, stb)
				}
				if got, want := objectRows(t, dbb), objectRows(t, dbf); !slicesEqual(got, want) {
					t.Fatalf("PutBytes stored %d rows, PutFile %d, not the same:\n%s\n---\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				var out bytes.Buffer
				if _, err := sb.ReadFile(ctx, idb, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
					t.Fatalf("read back: %v (equal %v)", err, bytes.Equal(out.Bytes(), data))
				}
				// Again, and across: nothing new either way.
				for name, put := range map[string]func() (ID, FileStats, error){
					"PutBytes again":      func() (ID, FileStats, error) { return sb.PutBytes(ctx, data) },
					"PutBytes after file": func() (ID, FileStats, error) { return sf.PutBytes(ctx, data) },
					"PutFile after bytes": func() (ID, FileStats, error) { return sb.PutFile(ctx, bytes.NewReader(data)) },
				} {
					id, st, err := put()
					if err != nil {
						t.Fatal(err)
					}
					if id != idf || st.NewChunks != 0 || st.NewBytes != 0 || st.Chunks != stf.Chunks {
						t.Fatalf("%s: %s %+v, want %s with nothing new", name, id.Short(), st, idf.Short())
					}
				}
				if got, want := objectRows(t, dbb), objectRows(t, dbf); !slicesEqual(got, want) {
					t.Fatal("the stores differ after putting the content again")
				}
			})
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPutBytesKnownChunk: a file whose one chunk is stored already, as
// the first chunk of a bigger file, adds its manifest only, and says so as
// PutFile does; a prefix that is a chunk of its own adds both.
func TestPutBytesKnownChunk(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"text", "random"} {
		big := contents(200 << 10)[kind]
		for _, small := range [][]byte{big[:Cut(big)], big[:MinChunk-10]} {
			sf, dbf := newTestStore(t)
			sb, dbb := newTestStore(t)
			for _, s := range []*Store{sf, sb} {
				if _, _, err := s.PutFile(ctx, bytes.NewReader(big)); err != nil {
					t.Fatal(err)
				}
			}
			idf, stf, err := sf.PutFile(ctx, bytes.NewReader(small))
			if err != nil {
				t.Fatal(err)
			}
			idb, stb, err := sb.PutBytes(ctx, small)
			if err != nil {
				t.Fatal(err)
			}
			if idb != idf || stb != stf {
				t.Fatalf("%s %d: PutBytes = %s %+v, PutFile = %s %+v", kind, len(small), idb.Short(), stb, idf.Short(), stf)
			}
			if !slicesEqual(objectRows(t, dbb), objectRows(t, dbf)) {
				t.Fatalf("%s %d: the stores differ", kind, len(small))
			}
		}
	}
}

// TestPutBytesKnownChunkSizes: PutBytes of a file that is one already
// stored chunk, below and above lookupFrom: only the manifest is new.
func TestPutBytesKnownChunkSizes(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{MinChunk, lookupFrom, lookupFrom + 1, AvgChunk} {
		// Random bytes of n that are one chunk.
		var data []byte
		for seed := uint64(0); data == nil || Cut(data) != n; seed++ {
			data = randBytes(seed, n)
		}
		s, db := newTestStore(t)
		// The chunk alone, as another file's chunk would be.
		if _, _, err := s.Put(ctx, KindChunk, data); err != nil {
			t.Fatal(err)
		}
		id, st, err := s.PutBytes(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		if st.Chunks != 1 || st.NewChunks != 0 || st.NewBytes == 0 {
			t.Fatalf("%d bytes: %+v, want one known chunk and a new manifest", n, st)
		}
		if got, err := s.StoredSize(ctx, id); err != nil || got != st.NewBytes {
			t.Fatalf("%d bytes: manifest stored as %d bytes (%v), NewBytes %d", n, got, err, st.NewBytes)
		}
		var rows int
		if err := db.QueryRow(`SELECT count(*) FROM objects`).Scan(&rows); err != nil || rows != 2 {
			t.Fatalf("%d bytes: %d rows (%v), want the chunk and the manifest", n, rows, err)
		}
	}
}

// TestPutBytesPacked: in a store with packs, PutBytes keeps content of up
// to packFrom bytes inline as PutFile does, and hands bigger content to
// PutFile (which packs what lies past packFrom).
func TestPutBytesPacked(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{MaxChunk, packFrom, packFrom + 1, 3 << 20} {
		data := contents(n)["random"]
		var rows [2][]string
		for i, bytesPut := range []bool{false, true} {
			db := openDB(t)
			packs := OpenPacks(filepath.Join(t.TempDir(), "store.packs"), false)
			t.Cleanup(func() { packs.Close() })
			s := NewPackedStore(db, packs)
			var id ID
			var err error
			if bytesPut {
				id, _, err = s.PutBytes(ctx, data)
			} else {
				id, _, err = s.PutFile(ctx, bytes.NewReader(data))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := packs.Sync(); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := s.ReadFile(ctx, id, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("%d bytes: read back: %v", n, err)
			}
			// Which objects are packed and how long; not where (the
			// workers of PutFile append in any order).
			r, err := db.Query(`SELECT id, kind, codec, size, length(data), pack != 0, pack_len FROM objects ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			for r.Next() {
				var id []byte
				var a, b, c, d, e, f int64
				if err := r.Scan(&id, &a, &b, &c, &d, &e, &f); err != nil {
					t.Fatal(err)
				}
				rows[i] = append(rows[i], fmt.Sprintf("%x %d %d %d %d %d %d", id, a, b, c, d, e, f))
			}
			r.Close()
		}
		if !slicesEqual(rows[0], rows[1]) {
			t.Fatalf("%d bytes: PutBytes and PutFile stored different rows:\n%s\n---\n%s", n, strings.Join(rows[1], "\n"), strings.Join(rows[0], "\n"))
		}
	}
}

// TestPutBytesInTx: PutBytes inside a transaction (as a close stores a
// file) is undone with it, and a store that committed it reads it back.
func TestPutBytesInTx(t *testing.T) {
	ctx := context.Background()
	s, db := newTestStore(t)
	data := contents(10 << 10)["text"]
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _, err := s.With(tx).PutBytes(ctx, data)
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		has, err := s.Has(ctx, id)
		if err != nil || has != commit {
			t.Fatalf("committed %v: manifest present %v (%v)", commit, has, err)
		}
	}
}

// TestPutBytesCancelled: a cancelled context stores nothing.
func TestPutBytesCancelled(t *testing.T) {
	s, db := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.PutBytes(ctx, contents(MaxChunk)["text"]); err == nil {
		t.Fatal("PutBytes with a cancelled context succeeded")
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM objects`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows (%v) after a cancelled PutBytes", rows, err)
	}
}
