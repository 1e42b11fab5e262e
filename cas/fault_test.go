package cas

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// failingDB fails every ExecContext from the nth on.
type failingDB struct {
	DBTX
	n     int64
	execs atomic.Int64
}

var errInjected = errors.New("injected write failure")

func (f *failingDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if f.execs.Add(1) >= f.n {
		return nil, errInjected
	}
	return f.DBTX.ExecContext(ctx, q, args...)
}

// checkGoroutines fails if goroutines started during the test outlive it.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines running, %d before the test", runtime.NumGoroutine(), before)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestPutFileWriteFailure(t *testing.T) {
	ctx := context.Background()
	_, db := newTestStore(t)
	checkGoroutines(t)
	for _, n := range []int64{1, 2, 5, 40} {
		s := NewStore(&failingDB{DBTX: db, n: n})
		_, _, err := s.PutFile(ctx, bytes.NewReader(randBytes(uint64(n), 2<<20)))
		if !errors.Is(err, errInjected) {
			t.Fatalf("PutFile failing at exec %d = %v, want %v", n, err, errInjected)
		}
	}
}

func TestPutFileReadFailure(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	checkGoroutines(t)
	boom := errors.New("disk on fire")
	r := io.MultiReader(bytes.NewReader(randBytes(1, 3<<20)), iotest.ErrReader(boom))
	if _, _, err := s.PutFile(ctx, r); !errors.Is(err, boom) {
		t.Fatalf("PutFile = %v, want %v", err, boom)
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n--; w.n < 0 {
		return 0, errInjected
	}
	return len(p), nil
}

func TestReadFileWriterFailure(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	id, _, err := s.PutFile(ctx, bytes.NewReader(randBytes(2, 3<<20)))
	if err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t)
	for _, n := range []int{0, 1, 10} {
		if _, err := s.ReadFile(ctx, id, &failingWriter{n: n}); !errors.Is(err, errInjected) {
			t.Fatalf("ReadFile with a writer failing after %d writes = %v, want %v", n, err, errInjected)
		}
	}
}

func TestReadFileCanceled(t *testing.T) {
	s, _ := newTestStore(t)
	id, _, err := s.PutFile(context.Background(), bytes.NewReader(randBytes(3, 3<<20)))
	if err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t)
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelingWriter{cancel: cancel}
	if _, err := s.ReadFile(ctx, id, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadFile after cancel = %v, want context.Canceled", err)
	}
}

type cancelingWriter struct{ cancel func() }

func (w *cancelingWriter) Write(p []byte) (int, error) {
	w.cancel()
	return len(p), nil
}

// Tree counts are checked against the input before allocating for them.
func TestDecodeTreeBoundedAllocation(t *testing.T) {
	b := append([]byte("artt\x01"), appendUvarint(nil, 1<<20/minEntrySize)...)
	b = append(b, make([]byte, 1<<20)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeTree(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeTree = %v, want ErrMalformed", err)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4<<20); got > limit {
		t.Fatalf("DecodeTree allocated %d bytes, want at most %d", got, limit)
	}
}
