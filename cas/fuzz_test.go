package cas

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

func FuzzDecodeTree(f *testing.F) {
	for _, tr := range []*Tree{{}, sampleTree()} {
		b, err := tr.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(rawTree(rawEntry("a", byte(EntryFifo), []byte{0})))
	f.Add(rawTree(rawEntry("s", byte(EntrySymlink), appendBytes(nil, []byte("t")), []byte{0})))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := DecodeTree(b)
		if err != nil {
			return
		}
		again, err := tr.Encode()
		if err != nil {
			t.Fatalf("decoded tree does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, again)
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	a := Sum([]byte("a"))
	for _, m := range []*Manifest{
		{},
		{Size: 5, Extents: []Extent{{ID: a, Len: 5}}},
		{Size: 1<<40 + 2, Extents: []Extent{{Len: 1 << 40}, {ID: a, Len: 1}, {ID: a, Len: 1}, {Len: 3}}},
	} {
		f.Add(m.Encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded manifest is invalid: %v", err)
		}
		if again := m.Encode(); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, again)
		}
	})
}

// FuzzChunker builds an input from a pseudo-random stream (so chunks reach
// past MinChunk) with the fuzzed bytes spliced in, reads it in fuzzed read
// sizes, and checks the chunks against Cut and the bounds.
func FuzzChunker(f *testing.F) {
	f.Add(uint64(1), uint32(300<<10), uint32(0), []byte("hello"))
	f.Add(uint64(2), uint32(0), uint32(0), []byte{})
	f.Add(uint64(3), uint32(MinChunk), uint32(17), bytes.Repeat([]byte{0}, 5000))
	f.Fuzz(func(t *testing.T, seed uint64, n, at uint32, splice []byte) {
		base := randBytes(seed, int(n%(1<<20)))
		pos := 0
		if len(base) > 0 {
			pos = int(at) % (len(base) + 1)
		}
		input := append(append(append([]byte{}, base[:pos]...), splice...), base[pos:]...)
		var r io.Reader = bytes.NewReader(input)
		switch seed % 3 {
		case 1:
			r = iotest.HalfReader(r)
		case 2:
			r = iotest.DataErrReader(r)
		}
		c := NewChunker(r)
		var got []byte
		p := 0
		for {
			chunk, err := c.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(chunk) == 0 || len(chunk) > MaxChunk {
				t.Fatalf("chunk of %d bytes", len(chunk))
			}
			if len(chunk) < MinChunk && p+len(chunk) != len(input) {
				t.Fatalf("short chunk of %d bytes at %d before the end", len(chunk), p)
			}
			if want := Cut(input[p:]); len(chunk) != want {
				t.Fatalf("chunk at %d has %d bytes, Cut says %d", p, len(chunk), want)
			}
			got = append(got, chunk...)
			p += len(chunk)
		}
		if !bytes.Equal(got, input) {
			t.Fatal("chunks do not concatenate to the input")
		}
	})
}
