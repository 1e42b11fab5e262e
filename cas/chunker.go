package cas

import "io"

// Chunk size bounds. Every chunk of a stream is MinChunk..MaxChunk bytes
// except a stream's last, which may be shorter than MinChunk. These numbers,
// the gear table and the masks below are part of the store format: changing
// any of them changes every file's chunk ids and loses deduplication against
// existing stores.
const (
	MinChunk = 4 << 10
	AvgChunk = 16 << 10
	MaxChunk = 64 << 10
)

// gearSeed seeds the splitmix64 generator that fills the gear table. It is
// the ASCII bytes "art-gear" read as a big-endian integer.
const gearSeed = 0x6172742d67656172

// Normalized chunking: before AvgChunk bytes a cut needs the top maskSBits
// bits of the rolling hash to be zero (less likely), after it only the top
// maskLBits (more likely), which pulls chunk sizes towards AvgChunk. Testing
// the top bits makes every cut decision depend on the last 64 bytes (each
// shift moves older bytes' contributions out of the word).
const (
	maskSBits = 15
	maskLBits = 11
	maskS     = (1<<maskSBits - 1) << (64 - maskSBits)
	maskL     = (1<<maskLBits - 1) << (64 - maskLBits)
)

// gear maps each byte value to a pseudo-random 64-bit word.
var gear = makeGear(gearSeed)

// makeGear fills a gear table with successive splitmix64 outputs.
func makeGear(seed uint64) (g [256]uint64) {
	s := seed
	for i := range g {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		g[i] = z ^ (z >> 31)
	}
	return g
}

// Cut returns the length of the first chunk of data: len(data) if that is at
// most MinChunk, else the first position p in MinChunk+1..MaxChunk where the
// gear hash of data[MinChunk:p] satisfies the mask in force at p, or
// min(len(data), MaxChunk) if there is none. Cut looks at no more than
// MaxChunk bytes, so cutting a stream needs only that much lookahead.
func Cut(data []byte) int {
	n := len(data)
	if n <= MinChunk {
		return n
	}
	if n > MaxChunk {
		n = MaxChunk
	}
	normal := min(n, AvgChunk)
	h, i := scan(0, data[MinChunk:normal], maskS)
	if i > 0 {
		return MinChunk + i
	}
	if _, i = scan(h, data[normal:n], maskL); i > 0 {
		return normal + i
	}
	return n
}

// scan rolls the gear hash h over p and returns it with the length of
// p's prefix after which it first satisfies mask, or 0 if none does.
//
// Two bytes a step: the hash after the second byte is h<<2 plus a term
// of the two bytes alone, so the chain from one step's h to the next is
// one shift-and-add (an LEA), and the lookups of both bytes run beside
// it. One byte a step, every byte waited for the previous one's add:
// 1.6x the time (the stream's cutting was 1.26 s of a 2 GiB dd's 12 s
// of CPU).
func scan(h uint64, p []byte, mask uint64) (uint64, int) {
	i := 0
	for ; i+2 <= len(p); i += 2 {
		g0, g1 := gear[p[i]], gear[p[i+1]]
		h1 := h<<1 + g0
		h = h<<2 + (g0<<1 + g1)
		if h1&mask == 0 {
			return h1, i + 1
		}
		if h&mask == 0 {
			return h, i + 2
		}
	}
	if i < len(p) {
		h = h<<1 + gear[p[i]]
		if h&mask == 0 {
			return h, i + 1
		}
	}
	return h, 0
}

// chunkerBufSize is the read buffer of a Chunker: large enough that the
// copy of the unconsumed tail (less than MaxChunk) on each refill is cheap.
const chunkerBufSize = 8 * MaxChunk

// Chunker cuts a stream into content-defined chunks: the chunks are what Cut
// applied repeatedly to the whole stream would give. A Chunker is not safe
// for concurrent use.
type Chunker struct {
	r        io.Reader
	buf      []byte
	pos, end int
	eof      bool
	err      error
}

// NewChunker returns a Chunker reading r.
func NewChunker(r io.Reader) *Chunker {
	return newChunkerBuf(r, nil)
}

// newChunkerBuf returns a Chunker that reads into buf (which should have
// capacity chunkerBufSize) or a fresh buffer if buf is too small.
func newChunkerBuf(r io.Reader, buf []byte) *Chunker {
	if cap(buf) < 2*MaxChunk {
		buf = make([]byte, chunkerBufSize)
	}
	return &Chunker{r: r, buf: buf[:cap(buf)]}
}

// Next returns the next chunk, or io.EOF after the last one. An empty
// stream has no chunks. The slice is valid until the next call. A read error
// other than io.EOF is returned as is, and again by every later call.
func (c *Chunker) Next() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.end-c.pos < MaxChunk && !c.eof {
		c.fill()
		if c.err != nil {
			return nil, c.err
		}
	}
	if c.pos == c.end {
		return nil, io.EOF
	}
	n := Cut(c.buf[c.pos:c.end])
	chunk := c.buf[c.pos : c.pos+n : c.pos+n]
	c.pos += n
	return chunk, nil
}

// fill moves the unconsumed bytes to the front of the buffer and reads until
// it is full or the stream ends. Only io.EOF itself ends the stream: a
// reader's io.ErrUnexpectedEOF (a truncated input) is an error.
func (c *Chunker) fill() {
	c.end = copy(c.buf, c.buf[c.pos:c.end])
	c.pos = 0
	for c.end < len(c.buf) {
		n, err := c.r.Read(c.buf[c.end:])
		c.end += n
		if err == io.EOF {
			c.eof = true
			return
		}
		if err != nil {
			c.err = err
			return
		}
	}
}
