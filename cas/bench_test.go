package cas

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// semiCompressible returns n bytes of text-like data, words from a random
// vocabulary with a skewed (roughly Zipf) frequency and now and then a run
// of random bytes: zstd's fastest level shrinks it to about half.
func semiCompressible(n int) []byte {
	rnd := randBytes(99, n+1<<20)
	vocab := make([][]byte, 2048)
	for i := range vocab {
		w := rnd[i*8 : i*8+2+int(rnd[i*8+7]%7)]
		for j := range w {
			w[j] = 'a' + w[j]%26
		}
		vocab[i] = w
	}
	r := rnd[len(vocab)*8:]
	var b bytes.Buffer
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i += 3 {
		x, y, z := int(r[i%len(r)]), int(r[(i+1)%len(r)]), int(r[(i+2)%len(r)])
		if x < 12 { // about one token in 20 is 24 random bytes
			b.Write(r[(i*7)%(len(r)-24):][:24])
			continue
		}
		b.Write(vocab[(y*z*z)>>(24-11)]) // skewed towards the first words
		if z%8 == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:n]
}

// BenchmarkPutFile ingests 64 MiB of fresh semi-compressible data into an
// empty store inside one transaction, at each candidate zstd level.
func BenchmarkPutFile(b *testing.B) {
	data := semiCompressible(64 << 20)
	ctx := context.Background()
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		b.Run(level.String(), func(b *testing.B) {
			c := newCodecs(level)
			b.SetBytes(int64(len(data)))
			var stored int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db := openDB(b)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				s := &Store{db: tx, c: c}
				b.StartTimer()
				_, st, err := s.PutFile(ctx, bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				stored = st.NewBytes
			}
			b.ReportMetric(float64(stored)/float64(len(data)), "ratio")
		})
	}
}

// BenchmarkPutFileDedup ingests 64 MiB the store already holds: the hash
// and index lookup path.
func BenchmarkPutFileDedup(b *testing.B) {
	data := semiCompressible(64 << 20)
	ctx := context.Background()
	s, _ := newTestStore(b)
	if _, _, err := s.PutFile(ctx, bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := s.PutFile(ctx, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadFile(b *testing.B) {
	data := semiCompressible(64 << 20)
	ctx := context.Background()
	s, _ := newTestStore(b)
	id, _, err := s.PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var w discard
		if _, err := s.ReadFile(ctx, id, &w); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkPutSmallFiles is the many-small-files side of ingest.
func BenchmarkPutSmallFiles(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{100, 3000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			db := openDB(b)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Rollback()
			s := NewStore(tx)
			data := semiCompressible(size + 1<<20)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				i++
				if _, _, err := s.PutFile(ctx, bytes.NewReader(data[i%(1<<20):][:size])); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutFileRandom ingests 64 MiB of fresh incompressible data (a
// download, an archive, a model's weights) into an empty store inside one
// transaction: the path that should cost hashing and writing, not zstd.
func BenchmarkPutFileRandom(b *testing.B) {
	data := randBytes(7, 64<<20)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	var stored int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db := openDB(b)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		s := NewStore(tx)
		b.StartTimer()
		_, st, err := s.PutFile(ctx, bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		stored = st.NewBytes
	}
	b.ReportMetric(float64(stored)/float64(len(data)), "ratio")
}

// BenchmarkWriteSparse copies 64 MiB of incompressible content out of the
// store into a file, reading through one transaction: an overlay's
// copy-out of a file at its first open.
func BenchmarkWriteSparse(b *testing.B) {
	data := randBytes(7, 64<<20)
	ctx := context.Background()
	db := openDB(b)
	id, _, err := NewStore(db).PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	s := NewStore(tx)
	dir := b.TempDir()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f, err := os.CreateTemp(dir, "out-")
		if err != nil {
			b.Fatal(err)
		}
		if err := s.WriteSparse(ctx, id, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		os.Remove(f.Name())
	}
}
