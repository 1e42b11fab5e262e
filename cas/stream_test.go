package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A file stored by a Stream while it grows - advanced at uneven points,
// rows flushed in several transactions, a chunk repeated - gets the
// manifest PutSparseFile gives the finished file, its large chunks packed,
// and reads back verified. Finishing with nothing advanced is PutSparseFile.
func TestStreamMatchesPutSparseFile(t *testing.T) {
	ctx := context.Background()
	a := randBytes(31, 3<<20)
	data := append(append(append([]byte{}, a...), randBytes(32, 9<<20+12345)...), a...)
	data = append(data, make([]byte, 2<<20)...) // zeros: tiny stored forms stay inline
	for _, tc := range []struct {
		name  string
		steps []int64 // written ends at which Advance runs
	}{
		{"none", nil},
		{"uneven", []int64{100, 70 << 10, 1 << 20, 5<<20 + 7, 5<<20 + 8, 11 << 20, int64(len(data)) - 1000}},
		{"all", []int64{int64(len(data))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "grows")
			w, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()

			db := openDB(t)
			packs := OpenPacks(filepath.Join(t.TempDir(), "store.packs"), false)
			t.Cleanup(func() { packs.Close() })
			s := NewPackedStore(db, packs)
			st := s.NewStream(f)
			written := int64(0)
			flushes := 0
			for _, end := range tc.steps {
				if _, err := w.Write(data[written:end]); err != nil {
					t.Fatal(err)
				}
				written = end
				if err := st.Advance(ctx, written); err != nil {
					t.Fatal(err)
				}
				if st.Pos() > written || written-st.Pos() > 2*MaxChunk {
					t.Fatalf("written %d, streamed to %d", written, st.Pos())
				}
				if n, _ := st.Rows(); n > 0 {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := st.Flush(ctx, NewPackedStore(tx, packs)); err != nil {
						t.Fatal(err)
					}
					if err := packs.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					flushes++
				}
			}
			if _, err := w.Write(data[written:]); err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, fst, err := st.Finish(ctx, NewPackedStore(tx, packs))
			if err != nil {
				t.Fatal(err)
			}
			if err := packs.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if len(tc.steps) > 1 && flushes < 2 {
				t.Fatalf("%d flushes", flushes)
			}

			ref, _ := newTestStore(t)
			g, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			wantID, wantSt, err := ref.PutSparseFile(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if id != wantID || fst.Size != wantSt.Size || fst.Chunks != wantSt.Chunks || fst.NewChunks != wantSt.NewChunks {
				t.Fatalf("stream = %s %+v, PutSparseFile = %s %+v", id.Short(), fst, wantID.Short(), wantSt)
			}
			var packed, dups int
			if err := db.QueryRow(`SELECT count(*) FROM objects WHERE pack != 0`).Scan(&packed); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRow(`SELECT count(*) - count(DISTINCT id) FROM objects`).Scan(&dups); err != nil {
				t.Fatal(err)
			}
			if packed < 100 || dups != 0 {
				t.Fatalf("%d objects packed, %d duplicate rows", packed, dups)
			}
			// Chunks found present (the repeated third, after a flush)
			// were not appended again: the pack holds exactly the rows'
			// bytes.
			var rowBytes int64
			if err := db.QueryRow(`SELECT coalesce(sum(pack_len), 0) FROM objects WHERE pack != 0`).Scan(&rowBytes); err != nil {
				t.Fatal(err)
			}
			if err := packs.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.name == "uneven" {
				nums, err := packs.List()
				if err != nil || len(nums) != 1 {
					t.Fatalf("packs %v: %v", nums, err)
				}
				fi, err := os.Stat(filepath.Join(packs.Dir(), packName(nums[0])))
				if err != nil || fi.Size() != rowBytes {
					t.Fatalf("pack holds %d bytes, rows name %d (%v)", fi.Size(), rowBytes, err)
				}
			}
			packs = OpenPacks(packs.Dir(), true)
			defer packs.Close()
			s = NewPackedStore(db, packs)
			var out bytes.Buffer
			if _, err := s.ReadFile(ctx, id, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("read back: %v (equal %v)", err, bytes.Equal(out.Bytes(), data))
			}
			if err := s.Each(ctx, func(id ID, _ Kind) error { return s.Verify(ctx, id) }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Finish refuses a file that shrank below what the stream chunked: the
// caller must drop such a stream, never store a manifest of bytes gone.
func TestStreamFinishRefusesShrunkFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, randBytes(41, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, _ := newTestStore(t)
	st := s.NewStream(f)
	if err := st.Advance(ctx, 1<<20); err != nil || st.Pos() == 0 {
		t.Fatalf("advance: %v, pos %d", err, st.Pos())
	}
	if err := os.Truncate(path, 1000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Finish(ctx, s); err == nil {
		t.Fatal("finished a stream whose file shrank")
	}
}

// After a run of incompressible chunks a Stream stops trying to compress,
// but probes again: compressible data after random data ends up
// compressed but for at most rawRunProbe chunks.
func TestStreamSkipsCompressionOfIncompressibleRuns(t *testing.T) {
	ctx := context.Background()
	var text bytes.Buffer
	for i := 0; text.Len() < 6<<20; i++ {
		fmt.Fprintf(&text, "line %d of a compressible log, with some words to repeat\n", i)
	}
	data := append(randBytes(51, 6<<20), text.Bytes()...)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	db := openDB(t)
	packs := OpenPacks(filepath.Join(t.TempDir(), "store.packs"), false)
	t.Cleanup(func() { packs.Close() })
	s := NewPackedStore(db, packs)
	st := s.NewStream(f)
	if err := st.Advance(ctx, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	id, _, err := st.Finish(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	rawText, zText, zRandom := 0, 0, 0
	for _, e := range m.Extents {
		var codec int
		if err := db.QueryRow(`SELECT codec FROM objects WHERE id = ?`, e.ID[:]).Scan(&codec); err != nil {
			t.Fatal(err)
		}
		switch {
		case off >= 6<<20 && codec == 0:
			rawText++
		case off >= 6<<20:
			zText++
		case codec != 0:
			zRandom++
		}
		off += e.Len
	}
	if zRandom != 0 || zText == 0 || rawText > rawRunProbe {
		t.Fatalf("random chunks compressed %d; text chunks compressed %d, raw %d (want at most %d)", zRandom, zText, rawText, rawRunProbe)
	}
	var out bytes.Buffer
	if _, err := s.ReadFile(ctx, id, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("read back: %v", err)
	}
}

// AdvanceLooking asks the caller's lookup, not the store: chunks it
// reports present are neither packed nor kept as rows, and its error
// stops the stream.
func TestStreamAdvanceLooking(t *testing.T) {
	ctx := context.Background()
	data := randBytes(61, 2<<20)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, _ := newTestStore(t)
	asked := 0
	all := func(_ context.Context, ids []ID) ([]bool, error) {
		asked += len(ids)
		out := make([]bool, len(ids))
		for i := range out {
			out[i] = true
		}
		return out, nil
	}
	st := s.NewStream(f)
	if err := st.AdvanceLooking(ctx, int64(len(data)), all); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.Rows(); n != 0 || asked == 0 || st.Pos() == 0 {
		t.Fatalf("%d rows kept, %d ids asked, at %d: the lookup was not the one used", n, asked, st.Pos())
	}
	boom := fmt.Errorf("boom")
	st = s.NewStream(f)
	err = st.AdvanceLooking(ctx, int64(len(data)), func(context.Context, []ID) ([]bool, error) { return nil, boom })
	if !errors.Is(err, boom) || st.Pos() != 0 {
		t.Fatalf("AdvanceLooking = %v at %d, want boom at 0", err, st.Pos())
	}
}
