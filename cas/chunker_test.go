package cas

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// The gear table and the cut points are part of the store format: if this
// test fails, existing stores stop deduplicating against new writes.
func TestGearPinned(t *testing.T) {
	for _, tc := range []struct {
		i    int
		want uint64
	}{
		{0, 0xa8f1f6dd732208fe},
		{1, 0x445ff29a58c85ec5},
		{2, 0x271e3479fb315f6c},
		{255, 0xca0e70c988d9fa83},
	} {
		if got, want := gear[tc.i], tc.want; got != want {
			t.Fatalf("gear[%d] = %#x, want %#x", tc.i, got, want)
		}
	}
}

func TestCutPointsPinned(t *testing.T) {
	data := randBytes(42, 256<<10)
	want := []int{10605, 27064, 45015, 66295, 83051, 101613, 116797, 126206, 143193,
		159623, 177559, 195914, 213891, 220536, 238819, 249058, 253223, 262144}
	got := cutPoints(data)
	if len(got) != len(want) {
		t.Fatalf("cut points = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("cut point %d = %d, want %d (all: %v)", i, got[i], want[i], got)
		}
	}
}

// cutPoints returns the end offsets of the chunks Cut gives for data.
func cutPoints(data []byte) []int {
	var ends []int
	for p := 0; p < len(data); {
		p += Cut(data[p:])
		ends = append(ends, p)
	}
	return ends
}

// cutRef is Cut as docs/store-format.md states it, one byte a step: the
// two-byte scan must cut exactly where it does.
func cutRef(data []byte) int {
	n := len(data)
	if n <= MinChunk {
		return n
	}
	n = min(n, MaxChunk)
	normal := min(n, AvgChunk)
	var h uint64
	for i := MinChunk; i < n; i++ {
		h = h<<1 + gear[data[i]]
		mask := uint64(maskL)
		if i < normal {
			mask = maskS
		}
		if h&mask == 0 {
			return i + 1
		}
	}
	return n
}

// Every cut of random streams (where cuts fall after odd and even
// counts of bytes in both masks' ranges), and inputs ending at and
// around the bounds, one byte past or short of a pair.
func TestCutMatchesReference(t *testing.T) {
	var odd, even, maxed int
	for seed := uint64(100); seed < 108; seed++ {
		data := randBytes(seed, 2<<20)
		for p := 0; p < len(data); {
			want := cutRef(data[p:])
			if got := Cut(data[p:]); got != want {
				t.Fatalf("seed %d: Cut at %d = %d, reference %d", seed, p, got, want)
			}
			switch {
			case want == MaxChunk:
				maxed++
			case want%2 == 1:
				odd++
			default:
				even++
			}
			p += want
		}
	}
	if odd == 0 || even == 0 {
		t.Fatalf("cuts after odd lengths %d, even %d: the test does not cover both", odd, even)
	}
	data := randBytes(7, MaxChunk+3)
	for _, n := range []int{MinChunk + 1, MinChunk + 2, MinChunk + 3, AvgChunk - 1, AvgChunk, AvgChunk + 1,
		AvgChunk + 2, MaxChunk - 1, MaxChunk, MaxChunk + 1, MaxChunk + 3} {
		for off := 0; off < 3; off++ {
			if got, want := Cut(data[off:n]), cutRef(data[off:n]); got != want {
				t.Fatalf("Cut of %d bytes = %d, reference %d", n-off, got, want)
			}
		}
	}
	// Zeros never match a mask with this gear table: a cut at the limit,
	// after an odd and an even number of scanned bytes.
	for _, n := range []int{MinChunk + 1, AvgChunk + 1, AvgChunk + 2, MaxChunk - 1} {
		if got := Cut(make([]byte, n)); got != n {
			t.Fatalf("Cut of %d zeros = %d, want %d", n, got, n)
		}
	}
}

func TestCutBounds(t *testing.T) {
	for _, n := range []int{0, 1, MinChunk - 1, MinChunk} {
		if got, want := Cut(make([]byte, n)), n; got != want {
			t.Fatalf("Cut(%d bytes) = %d, want %d", n, got, want)
		}
	}
	// With this gear table zeros never match a mask (after 64 bytes the
	// hash of a run of one byte value is constant), so a long run of zeros
	// is cut at MaxChunk exactly.
	if got, want := Cut(make([]byte, 3*MaxChunk)), MaxChunk; got != want {
		t.Fatalf("Cut(zeros) = %d, want %d", got, want)
	}
	data := randBytes(7, 8<<20)
	for p := 0; p < len(data); {
		n := Cut(data[p:])
		if n > MaxChunk || (n < MinChunk && p+n != len(data)) {
			t.Fatalf("chunk at %d has %d bytes, want %d..%d", p, n, MinChunk, MaxChunk)
		}
		p += n
	}
}

func TestChunkSizeAverage(t *testing.T) {
	data := randBytes(3, 32<<20)
	ends := cutPoints(data)
	avg := len(data) / len(ends)
	if avg < 10<<10 || avg > 24<<10 {
		t.Fatalf("average chunk size = %d bytes, want 10..24 KiB", avg)
	}
	t.Logf("%d chunks, average %d bytes", len(ends), avg)
}

// Inserting a byte at the start moves only the chunks around the edit.
func TestChunkShift(t *testing.T) {
	data := randBytes(5, 10<<20)
	shifted := append([]byte{0x5a}, data...)
	before := chunkIDs(data)
	after := chunkIDs(shifted)
	changed := 0
	for id := range after {
		if !before[id] {
			changed++
		}
	}
	if changed > 3 {
		t.Fatalf("%d of %d chunks changed after a 1-byte insert, want at most 3", changed, len(after))
	}
}

func chunkIDs(data []byte) map[ID]bool {
	ids := make(map[ID]bool)
	for p := 0; p < len(data); {
		n := Cut(data[p:])
		ids[Sum(data[p:p+n])] = true
		p += n
	}
	return ids
}

func TestChunkerMatchesCut(t *testing.T) {
	data := randBytes(11, 3<<20+12345)
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"whole", bytes.NewReader(data)},
		{"one byte reads", iotest.OneByteReader(bytes.NewReader(data[:300<<10]))},
		{"half reads", iotest.HalfReader(bytes.NewReader(data))},
		{"data with EOF", iotest.DataErrReader(bytes.NewReader(data))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []int
			input := data
			if tc.name == "one byte reads" {
				input = data[:300<<10]
			}
			want = cutPoints(input)
			c := NewChunker(tc.r)
			var got bytes.Buffer
			for i := 0; ; i++ {
				chunk, err := c.Next()
				if err == io.EOF {
					if got, want := i, len(want); got != want {
						t.Fatalf("chunks = %d, want %d", got, want)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got.Write(chunk)
				if i >= len(want) {
					t.Fatalf("more chunks than the %d Cut gives", len(want))
				}
				if got, want := got.Len(), want[i]; got != want {
					t.Fatalf("chunk %d ends at %d, want %d", i, got, want)
				}
			}
			if !bytes.Equal(got.Bytes(), input) {
				t.Fatal("chunks do not concatenate to the input")
			}
		})
	}
}

func TestChunkerEmpty(t *testing.T) {
	c := NewChunker(bytes.NewReader(nil))
	if _, err := c.Next(); err != io.EOF {
		t.Fatalf("Next on empty input = %v, want io.EOF", err)
	}
	if _, err := c.Next(); err != io.EOF {
		t.Fatalf("second Next = %v, want io.EOF", err)
	}
}

func TestChunkerReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(randBytes(1, 100<<10)), iotest.ErrReader(boom))
	c := NewChunker(r)
	var err error
	for err == nil {
		_, err = c.Next()
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Next = %v, want %v", err, boom)
	}
	// A reader's own io.ErrUnexpectedEOF is a truncation, not an end.
	c = NewChunker(io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if _, err := c.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Next = %v, want io.ErrUnexpectedEOF", err)
	}
}

func BenchmarkCut(b *testing.B) {
	data := randBytes(1, 16<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		for p := 0; p < len(data); {
			p += Cut(data[p:])
		}
	}
}

func BenchmarkChunker(b *testing.B) {
	data := randBytes(1, 16<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c := NewChunker(bytes.NewReader(data))
		for {
			if _, err := c.Next(); err != nil {
				break
			}
		}
	}
}
