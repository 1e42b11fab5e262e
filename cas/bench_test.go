package cas

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

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

// BenchmarkPutSourceTree stores the files of Go's own source tree that a
// close stores from memory (up to 128 KiB: the tar x workload's files,
// docs/benchmarks.md "Small files' content") into an empty store, one
// transaction a file as the overlay's closes do (without their fsyncs),
// with PutFile over a
// bytes.Reader (as closes did) and with PutBytes. cpu-us/file is the
// process's CPU time (workers and the garbage collector included) per
// file, less noisy than the wall time on a shared machine.
func BenchmarkPutSourceTree(b *testing.B) {
	root := filepath.Join(runtime.GOROOT(), "src")
	var files [][]byte
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if info, err := d.Info(); err != nil || info.Size() > 128<<10 {
			return err
		}
		data, err := os.ReadFile(p)
		files = append(files, data)
		total += int64(len(data))
		return err
	})
	if err != nil || len(files) == 0 {
		b.Skipf("no source tree at %s: %v", root, err)
	}
	ctx := context.Background()
	puts := map[string]func(s *Store, data []byte) error{
		"PutFile": func(s *Store, data []byte) error {
			_, _, err := s.PutFile(ctx, bytes.NewReader(data))
			return err
		},
		"PutBytes": func(s *Store, data []byte) error {
			_, _, err := s.PutBytes(ctx, data)
			return err
		},
	}
	for _, name := range []string{"PutFile", "PutBytes"} {
		put := puts[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(total)
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db := openDB(b)
				// The commits' fsyncs are not the content's cost.
				db.SetMaxOpenConns(1)
				if _, err := db.Exec(`PRAGMA synchronous=OFF`); err != nil {
					b.Fatal(err)
				}
				s := NewStore(db)
				runtime.GC()
				start := processCPU(b)
				b.StartTimer()
				for _, data := range files {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := put(s.With(tx), data); err != nil {
						tx.Rollback()
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu += processCPU(b) - start
				db.Close()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*len(files)), "cpu-us/file")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
