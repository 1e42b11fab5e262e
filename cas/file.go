package cas

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/artrt/art/internal/procs"
)

// MaxFileSize bounds a manifest's size (1 PiB).
const MaxFileSize = 1 << 50

// manifestMagic and manifestVersion start every encoded manifest.
const (
	manifestMagic   = "artm"
	manifestVersion = 1
)

// Extent is a run of a file's content: Len bytes of chunk ID, or, when ID is
// zero, a hole of Len bytes that reads as zeros.
type Extent struct {
	ID  ID
	Len int64
}

// IsHole reports whether e is a hole.
func (e Extent) IsHole() bool { return e.ID.IsZero() }

// Manifest is the content of one file: its extents in order. Size is the sum
// of the extents' lengths. A valid manifest has data extents of 1..MaxChunk
// bytes, holes of at least one byte, no two holes in a row, and Size at most
// MaxFileSize.
type Manifest struct {
	Size    int64
	Extents []Extent
}

// Normalize drops zero-length extents and merges adjacent holes, in place.
// It does not touch Size.
func (m *Manifest) Normalize() {
	out := m.Extents[:0]
	for _, e := range m.Extents {
		if e.Len == 0 {
			continue
		}
		if e.IsHole() && len(out) > 0 && out[len(out)-1].IsHole() {
			out[len(out)-1].Len += e.Len
			continue
		}
		out = append(out, e)
	}
	clear(m.Extents[len(out):])
	m.Extents = out
}

// Validate reports whether m is valid (see Manifest) after normalization,
// with an error wrapping ErrMalformed if not.
func (m *Manifest) Validate() error {
	var sum int64
	for i, e := range m.Extents {
		if e.Len < 0 {
			return malformed("manifest extent %d has length %d", i, e.Len)
		}
		if e.Len == 0 {
			continue
		}
		if e.IsHole() {
			if e.Len > MaxFileSize {
				return malformed("manifest extent %d: hole of %d bytes exceeds MaxFileSize", i, e.Len)
			}
		} else if e.Len > MaxChunk {
			return malformed("manifest extent %d: chunk of %d bytes exceeds MaxChunk", i, e.Len)
		}
		sum += e.Len
		if sum > MaxFileSize {
			return malformed("manifest exceeds MaxFileSize")
		}
	}
	if sum != m.Size {
		return malformed("manifest size %d, extents add up to %d", m.Size, sum)
	}
	return nil
}

// Encode returns the canonical bytes of m's normalized form without
// modifying m. m should be valid (see Validate): the encoding of an invalid
// manifest is rejected by DecodeManifest.
//
// Format: "artm" 0x01, uvarint Size, uvarint extent count, then per extent
// uvarint(Len<<1 | hole) followed, for a data extent, by the 32-byte chunk
// id. docs/store-format.md has the details.
func (m *Manifest) Encode() []byte {
	n := &Manifest{Size: m.Size, Extents: append([]Extent(nil), m.Extents...)}
	n.Normalize()
	b := make([]byte, 0, 5+2*binaryMaxVarint+len(n.Extents)*(3+len(ID{})))
	b = append(b, manifestMagic...)
	b = append(b, manifestVersion)
	b = appendUvarint(b, uint64(n.Size))
	b = appendUvarint(b, uint64(len(n.Extents)))
	for _, e := range n.Extents {
		if e.IsHole() {
			b = appendUvarint(b, uint64(e.Len)<<1|1)
			continue
		}
		b = appendUvarint(b, uint64(e.Len)<<1)
		b = append(b, e.ID[:]...)
	}
	return b
}

const binaryMaxVarint = 10

// minDataExtent is the encoded size of the smallest data extent.
const minDataExtent = 1 + len(ID{})

// DecodeManifest decodes b, accepting only what Encode produces for a valid
// manifest. Any other input is an error wrapping ErrMalformed; it never
// allocates more than a small multiple of len(b).
func DecodeManifest(b []byte) (*Manifest, error) {
	d := decoder{b: b}
	d.header(manifestMagic, manifestVersion)
	size := d.uvarint()
	n := d.count("extents", 1)
	if d.err != nil {
		return nil, fmt.Errorf("decode manifest: %w", d.err)
	}
	if size > MaxFileSize {
		return nil, fmt.Errorf("decode manifest: %w", malformed("size %d exceeds MaxFileSize", size))
	}
	// No two holes are adjacent, so n extents need about n/2 data extents'
	// bytes; a count beyond that is refused before allocating for it.
	if n > 1 && (n-1)/2 > len(d.b)/minDataExtent {
		return nil, fmt.Errorf("decode manifest: %w", malformed("%d extents cannot fit in %d bytes", n, len(d.b)))
	}
	m := &Manifest{Size: int64(size), Extents: make([]Extent, 0, n)}
	var sum uint64
	for i := 0; i < n; i++ {
		v := d.uvarint()
		if d.err != nil {
			break
		}
		l, hole := v>>1, v&1 == 1
		var e Extent
		if hole {
			if l == 0 {
				d.fail("extent %d: empty hole", i)
				break
			}
			if l > MaxFileSize {
				d.fail("extent %d: hole of %d bytes exceeds MaxFileSize", i, l)
				break
			}
			if i > 0 && m.Extents[i-1].IsHole() {
				d.fail("extent %d: adjacent holes", i)
				break
			}
		} else {
			if l == 0 || l > MaxChunk {
				d.fail("extent %d: chunk length %d outside 1..%d", i, l, MaxChunk)
				break
			}
			e.ID = d.id()
			if d.err == nil && e.ID.IsZero() {
				d.fail("extent %d: data extent with zero id", i)
			}
			if d.err != nil {
				break
			}
		}
		e.Len = int64(l)
		sum += l
		if sum > MaxFileSize {
			d.fail("extents exceed MaxFileSize")
			break
		}
		m.Extents = append(m.Extents, e)
	}
	d.end()
	if d.err == nil && sum != size {
		d.fail("size %d, extents add up to %d", size, sum)
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode manifest: %w", d.err)
	}
	return m, nil
}

// FileStats counts what PutFile did. Chunks and Bytes count the file's data
// (holes excluded); NewChunks and NewBytes what was not yet stored. NewBytes
// is what the data column grew by, after compression, including the
// manifest.
type FileStats struct {
	Chunks, NewChunks int
	Bytes, NewBytes   int64
	Size              int64 // the file's length, holes included (the manifest's Size)
}

// chunkBufs recycles Chunker buffers across PutFile calls: ingesting a tree
// of small files would otherwise allocate one per file.
var chunkBufs = sync.Pool{New: func() any {
	b := make([]byte, chunkerBufSize)
	return &b
}}

// PutFile chunks r, stores the chunks that are new and the manifest, and
// returns the manifest's id. An empty r gives a manifest with no extents.
//
// Once a file has a second new chunk, PutFile compresses and inserts new
// chunks on GOMAXPROCS worker goroutines while it goes on reading and
// hashing, so s's handle sees concurrent statements (a *sql.Tx serializes
// them; a *sql.DB spreads them over connections). All of them have
// finished when PutFile returns; the manifest is inserted last. Nothing is
// deleted on error: chunks already stored are simply unreferenced.
func (s *Store) PutFile(ctx context.Context, r io.Reader) (ID, FileStats, error) {
	var m Manifest
	var st FileStats
	if err := s.putData(ctx, r, &m, &st); err != nil {
		return ID{}, st, fmt.Errorf("put file: %w", err)
	}
	return s.putManifest(ctx, &m, &st)
}

// chunkCopies hold new chunks on their way to the workers.
var chunkCopies = sync.Pool{New: func() any {
	b := make([]byte, 0, MaxChunk)
	return &b
}}

// putData chunks r, appends its chunks to m and stores the new ones.
func (s *Store) putData(ctx context.Context, r io.Reader, m *Manifest, st *FileStats) (err error) {
	buf := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(buf)

	// The first new chunk waits in pending: a file with only one (most
	// small files) is stored on this goroutine without starting workers.
	var (
		pending     *[]byte
		pendingID   ID
		pendingPack bool
		p           *pipeline
		sent        = make(map[ID]struct{}) // new chunks already handed on
	)
	defer func() {
		if pending != nil {
			if err == nil {
				err = s.storeChunk(ctx, pendingID, *pending, pendingPack, st)
			}
			chunkCopies.Put(pending)
		}
		if p != nil {
			chunks, bytes, perr := p.wait()
			st.NewChunks += chunks
			st.NewBytes += bytes
			if err == nil {
				err = perr
			}
		}
	}()
	return eachChunk(ctx, r, *buf, m, st, func(id ID, chunk []byte) error {
		if _, ok := sent[id]; ok {
			return nil
		}
		if ok, err := s.has(ctx, id); err != nil {
			return fmt.Errorf("look up chunk %s: %w", id.Short(), err)
		} else if ok {
			return nil
		}
		sent[id] = struct{}{}
		// Large content goes to a pack, from packFrom bytes into the
		// file (st.Bytes already counts this chunk).
		pack := st.Bytes > packFrom
		cp := chunkCopies.Get().(*[]byte)
		*cp = append((*cp)[:0], chunk...)
		if p == nil {
			if pending == nil {
				pending, pendingID, pendingPack = cp, id, pack
				return nil
			}
			p = startPipeline(ctx, s)
			if err := p.submit(pendingID, pending, pendingPack); err != nil {
				pending = nil
				chunkCopies.Put(cp)
				return err
			}
			pending = nil
		}
		return p.submit(id, cp, pack)
	})
}

// eachChunk cuts r into chunks with buf as the chunker's buffer, appends
// each to m, counts it in st and calls fn with its id and bytes (valid
// only until fn returns).
func eachChunk(ctx context.Context, r io.Reader, buf []byte, m *Manifest, st *FileStats, fn func(id ID, chunk []byte) error) error {
	c := newChunkerBuf(r, buf)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := c.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		id := Sum(chunk)
		m.Extents = append(m.Extents, Extent{ID: id, Len: int64(len(chunk))})
		m.Size += int64(len(chunk))
		st.Chunks++
		st.Bytes += int64(len(chunk))
		if err := fn(id, chunk); err != nil {
			return err
		}
	}
}

// storeChunk inserts a chunk known to be absent (a concurrent writer may
// have added it since) and counts it in st.
func (s *Store) storeChunk(ctx context.Context, id ID, data []byte, pack bool, st *FileStats) error {
	n, err := s.insert(ctx, id, KindChunk, data, pack)
	if err != nil {
		return fmt.Errorf("put chunk %s: %w", id.Short(), err)
	}
	if n > 0 {
		st.NewChunks++
		st.NewBytes += n
	}
	return nil
}

// pipeline compresses and inserts chunks on worker goroutines. After the
// first error the workers drop the remaining jobs; statements in flight are
// not interrupted (interrupting an INSERT would roll back the caller's whole
// transaction).
type pipeline struct {
	s    *Store
	ctx  context.Context
	jobs chan pipelineJob
	stop chan struct{} // closed at the first error
	wg   sync.WaitGroup

	mu        sync.Mutex
	err       error
	newChunks int
	newBytes  int64
}

type pipelineJob struct {
	id   ID
	data *[]byte // from chunkCopies; the worker returns it
	pack bool
}

func startPipeline(ctx context.Context, s *Store) *pipeline {
	n := procs.Workers()
	p := &pipeline{s: s, ctx: ctx, jobs: make(chan pipelineJob, 2*n), stop: make(chan struct{})}
	p.wg.Add(n)
	for range n {
		go p.work()
	}
	return p
}

func (p *pipeline) work() {
	defer p.wg.Done()
	var st FileStats
	for j := range p.jobs {
		select {
		case <-p.stop:
		default:
			if err := p.s.storeChunk(p.ctx, j.id, *j.data, j.pack, &st); err != nil {
				p.fail(err)
			}
		}
		chunkCopies.Put(j.data)
	}
	p.mu.Lock()
	p.newChunks += st.NewChunks
	p.newBytes += st.NewBytes
	p.mu.Unlock()
}

func (p *pipeline) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
		close(p.stop)
	}
}

// submit hands data (from chunkCopies) to a worker, which returns it to the
// pool. After a worker's error it returns that error instead.
func (p *pipeline) submit(id ID, data *[]byte, pack bool) error {
	select {
	case p.jobs <- pipelineJob{id: id, data: data, pack: pack}:
		return nil
	case <-p.stop:
		chunkCopies.Put(data)
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	}
}

// wait lets the workers finish and returns what they stored.
func (p *pipeline) wait() (int, int64, error) {
	close(p.jobs)
	p.wg.Wait()
	return p.newChunks, p.newBytes, p.err
}

func (s *Store) putManifest(ctx context.Context, m *Manifest, st *FileStats) (ID, FileStats, error) {
	if m.Size > MaxFileSize {
		return ID{}, *st, fmt.Errorf("put file: %d bytes: %w", m.Size, ErrTooLarge)
	}
	m.Normalize()
	id, n, err := s.Put(ctx, KindManifest, m.Encode())
	if err != nil {
		return ID{}, *st, fmt.Errorf("put file: %w", err)
	}
	st.NewBytes += n
	st.Size = m.Size
	return id, *st, nil
}

// PutSparseFile is PutFile for a regular file that keeps its holes: it
// walks f's data regions with SEEK_DATA/SEEK_HOLE, chunks each region on its
// own and records the gaps as hole extents. Data that happens to be zeros
// stays data. It reads with pread, from offset 0 regardless of f's offset,
// up to the size f had when the call began, and leaves f's offset
// unspecified. Where the file system cannot
// report holes (or f is not a regular file) it behaves as PutFile.
func (s *Store) PutSparseFile(ctx context.Context, f *os.File) (ID, FileStats, error) {
	var m Manifest
	var st FileStats
	err := sparseData(f, &m, func(r io.Reader) error {
		if sr, ok := r.(*io.SectionReader); ok && sr.Size() >= parallelFrom {
			return s.putDataParallel(ctx, r, &m, &st)
		}
		return s.putData(ctx, r, &m, &st)
	})
	if err != nil {
		return ID{}, st, fmt.Errorf("put file %s: %w", f.Name(), err)
	}
	return s.putManifest(ctx, &m, &st)
}

// sparseData walks f's data regions as PutSparseFile describes: it
// appends a hole extent to m for each gap and calls data with a reader of
// each region, which must append the region's extents to m. Where f cannot
// report holes it calls data once with all of f.
func sparseData(f *os.File, m *Manifest, data func(r io.Reader) error) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return data(f)
	}
	size := fi.Size()
	for off := int64(0); off < size; {
		start, err := seekData(f, off)
		if errors.Is(err, syscall.ENXIO) {
			start = size // no data after off: the rest is a hole
		} else if err != nil {
			if off == 0 && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)) {
				return data(io.NewSectionReader(f, 0, size))
			}
			return fmt.Errorf("seek data: %w", err)
		}
		start = min(start, size)
		if start > off {
			m.Extents = append(m.Extents, Extent{Len: start - off})
			m.Size += start - off
		}
		if start == size {
			break
		}
		hole, err := seekHole(f, start)
		if errors.Is(err, syscall.ENXIO) {
			break // the file shrank under us below start: stop at what was read
		}
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		hole = min(hole, size)
		if hole <= start {
			return fmt.Errorf("SEEK_HOLE from %d returned %d", start, hole)
		}
		before := m.Size
		if err := data(io.NewSectionReader(f, start, hole-start)); err != nil {
			return err
		}
		if m.Size-before != hole-start {
			// The file shrank under us: stop at what was read.
			break
		}
		off = hole
	}
	return nil
}

// zeros is what ReadFile writes for holes.
var zeros [64 << 10]byte

// ReadFile writes the content of the file whose manifest is id to w, holes
// as zeros, and returns the number of bytes written. Each chunk is verified
// before it is written, but a corrupt chunk is found only when reached: on
// error, w may have received a prefix of the content.
func (s *Store) ReadFile(ctx context.Context, id ID, w io.Writer) (int64, error) {
	var written int64
	err := s.eachExtent(ctx, id, func(e Extent, data []byte) error {
		if data == nil {
			for left := e.Len; left > 0; {
				n, err := w.Write(zeros[:min(left, int64(len(zeros)))])
				written += int64(n)
				left -= int64(n)
				if err != nil {
					return err
				}
			}
			return nil
		}
		n, err := w.Write(data)
		written += int64(n)
		return err
	})
	if err != nil {
		return written, fmt.Errorf("read file %s: %w", id.Short(), err)
	}
	return written, nil
}

// WriteSparse writes the content of the file whose manifest is id into f, a
// fresh empty file, leaving holes unwritten and setting the final size with
// Truncate so they stay holes. On error f holds a partial content.
func (s *Store) WriteSparse(ctx context.Context, id ID, f *os.File) error {
	// Runs of data extents are gathered into large writes: a write per
	// chunk (16 KiB on average) cost a fifth of a copy-out's CPU.
	bp := sparseBufs.Get().(*[]byte)
	defer sparseBufs.Put(bp)
	buf := (*bp)[:0]
	var off, bufOff int64 // the end of what is written or gathered; where buf goes
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := f.WriteAt(buf, bufOff)
		buf = buf[:0]
		return err
	}
	err := s.eachExtent(ctx, id, func(e Extent, data []byte) error {
		if data == nil {
			off += e.Len
			return flush() // a hole: the next data starts a new write
		}
		if len(buf)+len(data) > cap(buf) {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(buf) == 0 {
			bufOff = off
		}
		buf = append(buf, data...)
		off += e.Len
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = f.Truncate(off)
	}
	if err != nil {
		return fmt.Errorf("write file %s to %s: %w", id.Short(), f.Name(), err)
	}
	return nil
}

// sparseBufs hold WriteSparse's gathered writes.
var sparseBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, sparseWrite)
	return &b
}}

// sparseWrite is the size of WriteSparse's writes.
const sparseWrite = 1 << 20

// eachExtent calls fn, on the calling goroutine and in order, for each
// extent of manifest id with the verified chunk bytes, or nil for a hole.
// A file of several chunks is read ahead by worker goroutines, which fetch,
// inflate and verify the next chunks while fn runs.
func (s *Store) eachExtent(ctx context.Context, id ID, fn func(e Extent, data []byte) error) error {
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		return err
	}
	data := 0
	for _, e := range m.Extents {
		if !e.IsHole() {
			data++
		}
	}
	var next func(i int, e Extent) ([]byte, error)
	if data <= 1 {
		next = func(i int, e Extent) ([]byte, error) { return s.getChunk(ctx, id, i, e) }
	} else {
		ra := startReadAhead(ctx, s, id, m.Extents)
		defer ra.close()
		next = func(int, Extent) ([]byte, error) { return ra.next() }
	}
	for i, e := range m.Extents {
		if e.IsHole() {
			if err := fn(e, nil); err != nil {
				return err
			}
			continue
		}
		b, err := next(i, e)
		if err != nil {
			return err
		}
		if err := fn(e, b); err != nil {
			return err
		}
	}
	return nil
}

// getChunk returns the verified bytes of extent i of manifest id.
func (s *Store) getChunk(ctx context.Context, id ID, i int, e Extent) ([]byte, error) {
	data, err := s.getKind(ctx, e.ID, KindChunk)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != e.Len {
		return nil, corrupt(id, "extent %d: chunk %s has %d bytes, manifest says %d", i, e.ID.Short(), len(data), e.Len)
	}
	return data, nil
}

// readAhead fetches the data extents of a manifest ahead of the consumer
// and hands them out in order. One goroutine reads the stored rows, the
// chunks of raBatch extents per query (a transaction runs its statements
// one at a time anyway, and each query is parsed afresh); GOMAXPROCS
// workers inflate and verify them, every chunk against its id, before
// the consumer sees it. At most raWindow extents are in flight: memory stays
// within raWindow chunks and a batch of stored rows, whatever the file.
type readAhead struct {
	order chan chan fetched // one future per data extent, in extent order
	done  chan struct{}     // closed by close: stop fetching
	wg    sync.WaitGroup
}

type fetched struct {
	data []byte
	err  error
}

// raBatch is how many extents' chunks one query reads; raWindow how many
// data extents may be fetched ahead of the consumer (at least two
// batches, so one is read while the other is consumed).
const (
	raBatch  = 32
	raWindow = 2 * raBatch
)

// raWant is one extent of a batch waiting for its chunk.
type raWant struct {
	i   int
	e   Extent
	out chan fetched
}

// raJob is one stored row to inflate and verify, for every extent of the
// batch that uses it.
type raJob struct {
	id          ID
	kind        Kind
	codec, size int64
	stored      []byte // a copy: the row's bytes do not outlive the query
	wants       []raWant
	// A packed row: the worker reads the stored bytes from its pack.
	inline, pack, packOff, packLen int64
}

// selectChunks reads up to raBatch rows as selectBounded does: data only
// when length(data) is within a chunk's maxStored (?1), and where a
// packed row's bytes are.
func selectChunks(n int) string {
	var b strings.Builder
	b.WriteString(`SELECT id, kind, codec, size, length(data), CASE WHEN length(data) <= ?1 THEN data END, pack, pack_off, pack_len FROM objects WHERE id IN (`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "?%d", i+2)
	}
	b.WriteByte(')')
	return b.String()
}

func startReadAhead(ctx context.Context, s *Store, id ID, extents []Extent) *readAhead {
	n := procs.Workers()
	ra := &readAhead{order: make(chan chan fetched, raWindow), done: make(chan struct{})}
	jobs := make(chan raJob, raBatch)
	ra.wg.Add(n + 1)
	for range n {
		go func() {
			defer ra.wg.Done()
			for j := range jobs {
				var f fetched
				select {
				case <-ra.done:
					f.err = context.Canceled
				default:
					if j.pack != 0 {
						// Off the reading goroutine: pack reads run on all
						// workers, and no statement is open meanwhile.
						if j.stored, f.err = s.readPacked(j.id, j.kind, j.inline, j.pack, j.packOff, j.packLen); f.err != nil {
							break
						}
					}
					f.data, f.err = s.c.decodeOwned(j.id, j.kind, j.codec, j.size, j.stored, true)
				}
				for _, w := range j.wants {
					g := f
					if g.err == nil && int64(len(g.data)) != w.e.Len {
						g = fetched{err: corrupt(id, "extent %d: chunk %s has %d bytes, manifest says %d", w.i, w.e.ID.Short(), len(g.data), w.e.Len)}
					}
					w.out <- g
				}
			}
		}()
	}
	go func() {
		defer ra.wg.Done()
		defer close(jobs)
		defer close(ra.order)
		batch := map[ID][]raWant{}
		var ids []ID // batch's keys in first-use order
		wants := 0   // extents in batch: at most raBatch, or the window could fill with a batch never read
		for i := 0; i <= len(extents); i++ {
			if i < len(extents) && extents[i].IsHole() {
				continue
			}
			if wants == raBatch || (i == len(extents) && wants > 0) {
				if !ra.fetch(ctx, s, ids, batch, jobs) {
					return
				}
				batch, ids, wants = map[ID][]raWant{}, ids[:0], 0
			}
			if i == len(extents) {
				break
			}
			e := extents[i]
			out := make(chan fetched, 1)
			select {
			case ra.order <- out: // blocks while the window is full
			case <-ra.done:
				return
			}
			if _, ok := batch[e.ID]; !ok {
				ids = append(ids, e.ID)
			}
			batch[e.ID] = append(batch[e.ID], raWant{i: i, e: e, out: out})
			wants++
		}
	}()
	return ra
}

// fetch reads the rows of ids in one query and hands them to the
// workers; every extent in batch gets an answer (a missing row:
// ErrNotFound). It reports false once the read-ahead is closed.
func (ra *readAhead) fetch(ctx context.Context, s *Store, ids []ID, batch map[ID][]raWant, jobs chan<- raJob) bool {
	fail := func(wants []raWant, err error) {
		for _, w := range wants {
			w.out <- fetched{err: err}
		}
	}
	send := func(j raJob) bool {
		select {
		case jobs <- j:
			return true
		case <-ra.done:
			fail(j.wants, context.Canceled)
			return false
		}
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, KindChunk.maxStored())
	for _, id := range ids {
		args = append(args, id[:])
	}
	var found []raJob
	err := func() error {
		rows, err := s.db.QueryContext(ctx, selectChunks(len(ids)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rid sql.RawBytes
			var kind, codec, size, length, pack, packOff, packLen int64
			var stored sql.RawBytes
			if err := rows.Scan(&rid, &kind, &codec, &size, &length, &stored, &pack, &packOff, &packLen); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				return fmt.Errorf("read chunks: %w", err)
			}
			var id ID
			if len(rid) != len(id) {
				continue // not one asked for
			}
			copy(id[:], rid)
			wants := batch[id]
			if wants == nil {
				continue // not asked for (cannot happen: the index is unique by id)
			}
			delete(batch, id)
			// The row's kind column is not checked: a manifest or tree with
			// a chunk's bytes shares its row (see getKind); the bytes are
			// verified against the id and read with a chunk's bounds.
			j := raJob{id: id, kind: KindChunk, codec: codec, size: size, wants: wants}
			switch {
			case length > KindChunk.maxStored():
				fail(wants, corrupt(id, "stored as %d bytes, limit %d", length, KindChunk.maxStored()))
				continue
			}
			if pack != 0 {
				j.inline, j.pack, j.packOff, j.packLen = length, pack, packOff, packLen
			} else {
				j.stored = bytes.Clone(stored)
			}
			found = append(found, j)
		}
		return rows.Err()
	}()
	if err != nil {
		for _, j := range found {
			fail(j.wants, fmt.Errorf("get %s: %w", j.id, err))
		}
		for _, id := range ids {
			fail(batch[id], fmt.Errorf("get %s: %w", id, err))
		}
		return true
	}
	for _, id := range ids {
		if wants := batch[id]; wants != nil {
			fail(wants, fmt.Errorf("get %s: %w", id, ErrNotFound))
		}
	}
	for _, j := range found {
		if !send(j) {
			return false
		}
	}
	return true
}

// next returns the next data extent's bytes.
func (ra *readAhead) next() ([]byte, error) {
	out, ok := <-ra.order
	if !ok {
		return nil, errors.New("read ahead: no more extents") // not reached: the consumer counts extents
	}
	f := <-out
	return f.data, f.err
}

// close stops the workers and waits for them.
func (ra *readAhead) close() {
	close(ra.done)
	for range ra.order { // unblock the producer
	}
	ra.wg.Wait()
}

// parallelFrom is the size of a data region from which PutSparseFile
// hashes on the workers too (putDataParallel).
const parallelFrom = 4 << 20

// putDataParallel is putData for large content: the calling goroutine only
// reads and cuts chunks (the chunker is sequential by nature) and hands
// each to GOMAXPROCS workers, which hash, look up, compress, append to
// the pack and insert it; the manifest gets each chunk's id from the slot
// its worker filled. A chunk that occurs twice is stored once (the first
// worker to claim its id stores it).
func (s *Store) putDataParallel(ctx context.Context, r io.Reader, m *Manifest, st *FileStats) error {
	buf := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(buf)
	n := procs.Workers()
	p := &parallelPut{s: s, ctx: ctx, jobs: make(chan chunkJob, 4*n), stop: make(chan struct{})}
	first := len(m.Extents)
	p.wg.Add(n)
	for range n {
		go p.worker()
	}
	slots, cerr := p.cut(r, *buf, m, st)
	close(p.jobs)
	p.wg.Wait()
	st.NewChunks += p.total.NewChunks
	st.NewBytes += p.total.NewBytes
	if cerr != nil {
		return cerr
	}
	if p.werr != nil {
		return p.werr
	}
	for i := range m.Extents[first:] {
		m.Extents[first+i].ID = slots[i/slotBlock][i%slotBlock]
	}
	return nil
}

// slotBlock is how many chunk ids putDataParallel allocates at a time.
const slotBlock = 1024

// chunkJob is one chunk for putDataParallel's workers.
type chunkJob struct {
	data *[]byte // from chunkCopies; the worker returns it
	id   *ID     // the slot for its id
	pack bool
}

// parallelPut is the state putDataParallel's reader and workers share.
type parallelPut struct {
	s       *Store
	ctx     context.Context
	jobs    chan chunkJob
	stop    chan struct{} // closed on the first worker error
	wg      sync.WaitGroup
	mu      sync.Mutex // guards werr and total
	werr    error
	claimed sync.Map // ID -> struct{}: chunks a worker is looking up or storing
	total   FileStats
}

// fail records a worker's error, the first only, and stops the others.
func (p *parallelPut) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil {
		p.werr = err
		close(p.stop)
	}
}

// worker stores the chunks it receives until jobs is closed (after a
// failure it only gives their buffers back), then adds what it stored to
// total.
func (p *parallelPut) worker() {
	defer p.wg.Done()
	var mine FileStats
	for j := range p.jobs {
		select {
		case <-p.stop:
		default:
			p.put(j, &mine)
		}
		chunkCopies.Put(j.data)
	}
	p.mu.Lock()
	p.total.NewChunks += mine.NewChunks
	p.total.NewBytes += mine.NewBytes
	p.mu.Unlock()
}

// put hashes j's chunk into its slot and stores it unless the store has
// it or another worker is storing it.
func (p *parallelPut) put(j chunkJob, mine *FileStats) {
	id := Sum(*j.data)
	*j.id = id
	if _, dup := p.claimed.LoadOrStore(id, struct{}{}); dup {
		return
	}
	ok, err := p.s.has(p.ctx, id)
	if err != nil {
		p.fail(fmt.Errorf("look up chunk %s: %w", id.Short(), err))
		return
	}
	if !ok {
		if err := p.s.storeChunk(p.ctx, id, *j.data, j.pack, mine); err != nil {
			p.fail(err)
		}
	}
	// From here on has finds it (the same transaction): the claim only
	// has to cover chunks in flight, so the map stays small whatever the
	// file's size.
	p.claimed.Delete(id)
}

// cut reads r, cuts it into chunks appended to m as extents (their ids
// to come from the returned slots) and hands each to the workers. It
// returns nil early when a worker failed: the workers' error is p.werr.
func (p *parallelPut) cut(r io.Reader, buf []byte, m *Manifest, st *FileStats) ([][]ID, error) {
	var slots [][]ID // blocks that never move once allocated
	c := newChunkerBuf(r, buf)
	for i := 0; ; i++ {
		if err := p.ctx.Err(); err != nil {
			return slots, err
		}
		chunk, err := c.Next()
		if err == io.EOF {
			return slots, nil
		}
		if err != nil {
			return slots, fmt.Errorf("read: %w", err)
		}
		if i%slotBlock == 0 {
			slots = append(slots, make([]ID, slotBlock))
		}
		m.Extents = append(m.Extents, Extent{Len: int64(len(chunk))})
		m.Size += int64(len(chunk))
		st.Chunks++
		st.Bytes += int64(len(chunk))
		cp := chunkCopies.Get().(*[]byte)
		*cp = append((*cp)[:0], chunk...)
		j := chunkJob{data: cp, id: &slots[i/slotBlock][i%slotBlock], pack: st.Bytes > packFrom}
		select {
		case p.jobs <- j:
		case <-p.stop:
			chunkCopies.Put(cp)
			return slots, nil // the workers' error is returned by putDataParallel
		}
	}
}

// CheckPacked checks, without reading their bytes, that every packed
// chunk of the file whose manifest is id lies within a pack file that is
// there: a reader about to stream the file (art cat) can fail before it
// writes anything when a pack is missing or short (a store file copied
// without its STORE.packs directory). A missing chunk row is ErrNotFound,
// a pack that cannot hold a chunk a *CorruptError naming the chunk. The
// bytes are still hashed as they are read.
func (s *Store) CheckPacked(ctx context.Context, id ID) error {
	m, err := s.GetManifest(ctx, id)
	if err != nil {
		return err
	}
	sizes := map[int64]int64{}
	checked := map[ID]bool{}
	for _, x := range m.Extents {
		if x.IsHole() || checked[x.ID] {
			continue
		}
		checked[x.ID] = true
		var pack, off, n int64
		err := s.db.QueryRowContext(ctx, `SELECT pack, pack_off, pack_len FROM objects WHERE id = ?`, x.ID[:]).Scan(&pack, &off, &n)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("chunk %s: %w", x.ID.Short(), ErrNotFound)
		}
		if err != nil {
			return err
		}
		if pack == 0 {
			continue
		}
		if s.packs == nil {
			return corrupt(x.ID, "stored in pack %d, but this store has no pack directory", pack)
		}
		size, ok := sizes[pack]
		if !ok {
			if size, err = s.packs.Size(pack); err != nil {
				return corrupt(x.ID, "%v", err)
			}
			sizes[pack] = size
		}
		if off < 0 || n <= 0 || off > size || n > size-off {
			return corrupt(x.ID, "pack %s holds %d bytes, range %d+%d is past its end", packName(pack), size, off, n)
		}
	}
	return nil
}
