package cas

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// TestPreparedEqualsPut: a file prepared off the writer and stored with
// PutPrepared gets the manifest id, statistics and stored rows PutSparseFile
// gives the same file, and SparseFileID that id, for every shape (holes,
// repeats within the file, chunks another file already stored, a file
// PutSparseFile cuts on its parallel path); the content reads back verified.
func TestPreparedEqualsPut(t *testing.T) {
	ctx := context.Background()
	rep := randBytes(40, 64<<10)
	for _, tc := range []struct {
		name    string
		size    int64
		regions map[int64][]byte
	}{
		{"empty", 0, nil},
		{"tiny", 10, map[int64][]byte{0: []byte("0123456789")}},
		{"compressible", 300 << 10, map[int64][]byte{0: bytes.Repeat([]byte("art prepares "), 300<<10/13+1)[:300<<10]}},
		{"random", 500 << 10, map[int64][]byte{0: randBytes(41, 500<<10)}},
		{"repeats within", 4 * 64 << 10, map[int64][]byte{0: rep, 64 << 10: rep, 128 << 10: rep, 192 << 10: rep}},
		{"holes", 3<<20 + 7000, map[int64][]byte{0: randBytes(42, 70<<10), 2 << 20: randBytes(43, 7000)}},
		{"parallel put", parallelFrom + 5000, map[int64][]byte{0: randBytes(44, parallelFrom+5000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sparseFile(t, tc.size, tc.regions)
			direct, ddb := newTestStore(t)
			prep, pdb := newTestStore(t)
			// Both stores already hold one chunk of another file.
			for _, s := range []*Store{direct, prep} {
				if _, _, err := s.PutFile(ctx, bytes.NewReader(rep)); err != nil {
					t.Fatal(err)
				}
			}
			wantID, wantSt, err := direct.PutSparseFile(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			// SparseFileID names the same content without storing it.
			if id, size, err := SparseFileID(ctx, in); err != nil || id != wantID || size != tc.size {
				t.Fatalf("SparseFileID = %s %d %v, PutSparseFile = %s (%d bytes)", id.Short(), size, err, wantID.Short(), tc.size)
			}
			p, err := prep.PrepareSparseFile(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			id, st, err := prep.PutPrepared(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if id != wantID || st != wantSt {
				t.Fatalf("PutPrepared = %s %+v, PutSparseFile = %s %+v", id.Short(), st, wantID.Short(), wantSt)
			}
			if p.Size() != tc.size {
				t.Fatalf("prepared size %d, want %d", p.Size(), tc.size)
			}
			var nd, np, bd, bp int64
			if err := ddb.QueryRow(`SELECT count(*), coalesce(sum(length(data)),0) FROM objects`).Scan(&nd, &bd); err != nil {
				t.Fatal(err)
			}
			if err := pdb.QueryRow(`SELECT count(*), coalesce(sum(length(data)),0) FROM objects`).Scan(&np, &bp); err != nil {
				t.Fatal(err)
			}
			if nd != np || bd != bp {
				t.Fatalf("stores differ: direct %d rows %d bytes, prepared %d rows %d bytes", nd, bd, np, bp)
			}
			want, err := os.ReadFile(in.Name())
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := prep.ReadFile(ctx, id, &buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatal("prepared content reads back different")
			}
			// A second PutPrepared of the same content stores nothing.
			if _, st2, err := prep.PutPrepared(ctx, p); err != nil || st2.NewBytes != 0 || st2.NewChunks != 0 {
				t.Fatalf("second PutPrepared: %+v %v", st2, err)
			}
		})
	}
}
