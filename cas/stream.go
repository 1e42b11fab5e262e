package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/artrt/art/internal/procs"
)

// Stream stores a file's content while the file is still being written
// from its start to its end (a download, a copy, a linker's output), so
// that storing it at close or fsync is left with only its tail: the
// chunking, hashing, compression and pack writes of everything before it
// ran while the writer was busy writing (issue 16, docs/store-format.md
// "Storing while writing").
//
// The file stays the source of truth: Advance reads its bytes back (from
// the page cache, moments after they were written) rather than trusting
// the buffers a writer passed, and the caller drops the stream whenever a
// byte below Pos may have changed since. What Advance did outside any
// transaction is only a head start: chunk lookups there are hints, and
// the rows it produces are inserted by the caller, in its own
// transactions, through Flush (the pack is synced before each commit, as
// for every packed row). Finish, in the transaction that references the
// file, chunks the rest and stores the manifest; its result is the one
// PutSparseFile gives a file without holes, because a content-defined cut
// depends only on the bytes from the chunk's start to at most MaxChunk
// past it, and Advance cuts only where MaxChunk bytes follow (Finish, at
// the file's end, as a Chunker does).
//
// A Stream is used by one goroutine at a time.
type Stream struct {
	s   *Store // lookups, codecs and packs; outside any transaction
	f   *os.File
	pos int64 // every byte below it is cut into m's extents

	m       Manifest
	st      FileStats
	rows    []streamRow     // chunks Advance stored or kept, not yet inserted
	pending map[ID]struct{} // their ids: a chunk repeated before Flush is kept once
	rowMem  int64           // inline bytes rows hold
	buf     []byte          // read buffer (streamRead bytes)
	cuts    [][2]int        // chunk spans in buf
	zbuf    []byte          // compression scratch
	rawRun  int             // new chunks in a row stored raw (see chunk)
}

// streamRow is a chunk's row to be inserted: its stored bytes inline, or
// where Advance appended them to the pack.
type streamRow struct {
	packedRow        // pack fields unset when inline
	stored    []byte // inline; nil when packed
}

// After rawRunSkip new chunks in a row that zstd could not shrink, a
// Stream stores new chunks raw without trying, except every rawRunProbe-th.
// zstd's fastest level gives up on a random chunk at about 2.4 GB/s per
// core: a third of the CPU a stream spent per byte besides hashing and
// cutting. A compressible stretch after an incompressible one is stored
// raw for at most rawRunProbe chunks (1 MiB at most) before it is noticed.
const (
	rawRunSkip  = 8
	rawRunProbe = 16
)

// streamRead is how much of the file Advance reads at a time.
const streamRead = 4 << 20

// NewStream starts storing the content of f, which must be a regular file
// without holes written from offset 0, and is read with pread only. s
// must not be bound to a transaction that ends before the stream does
// (the DB's own store: lookups need only see committed rows).
func (s *Store) NewStream(f *os.File) *Stream {
	return &Stream{s: s, f: f, pending: map[ID]struct{}{}}
}

// Pos is the offset up to which the file is chunked.
func (st *Stream) Pos() int64 { return st.pos }

// Rows is the number of rows waiting for Flush, and the inline bytes
// they hold: the caller flushes before they grow large.
func (st *Stream) Rows() (int, int64) { return len(st.rows), st.rowMem }

// Advance chunks the file from Pos up to end, the offset below which the
// caller knows the file written, except the last MaxChunk bytes or so
// (whose cut a later byte could still move): it hashes each chunk, looks
// it up, compresses a new one and appends it to the pack when a
// PutSparseFile of the file would pack it. It stops early when ctx is
// done. Its lookups read what the store's database has committed.
func (st *Stream) Advance(ctx context.Context, end int64) error {
	return st.advance(ctx, st.s.hasMany, end, false)
}

// Lookup reports, for each of ids, whether the store holds an object
// with that id (Store.HasMany of some store of the database).
type Lookup func(ctx context.Context, ids []ID) ([]bool, error)

// AdvanceLooking is Advance with its lookups through look: the caller's
// open transaction, say, whose connection keeps the index pages it reads
// in its cache, where a statement of the database's own pool finds its
// cache emptied by every commit since its last (and reads the pages
// back). Whatever look finds present is, as for Advance, a hint that the
// caller checks still holds before Finish (a row look saw may be rolled
// back).
func (st *Stream) AdvanceLooking(ctx context.Context, end int64, look Lookup) error {
	return st.advance(ctx, look, end, false)
}

// advance is Advance with lookups through look; with last, end is the
// file's end and the bytes before it are cut to the last one, as a
// Chunker cuts a stream's end.
func (st *Stream) advance(ctx context.Context, look Lookup, end int64, last bool) error {
	for end-st.pos >= MaxChunk || (last && end > st.pos) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if st.buf == nil {
			st.buf = make([]byte, streamRead)
		}
		want := min(end-st.pos, int64(len(st.buf)))
		got, err := st.f.ReadAt(st.buf[:want], st.pos)
		if err != nil && !(errors.Is(err, io.EOF) && int64(got) == want) {
			return fmt.Errorf("stream %s: read at %d: %w", st.f.Name(), st.pos, err)
		}
		data := st.buf[:got]
		// Cut every final chunk of the block, hash them on all cores and
		// look them up a batch at a time: per chunk, a lookup statement
		// cost as much as hashing it.
		st.cuts = st.cuts[:0]
		atEnd := last && st.pos+int64(got) == end
		for p := 0; len(data)-p >= MaxChunk || (atEnd && p < len(data)); {
			c := Cut(data[p:])
			st.cuts = append(st.cuts, [2]int{p, p + c})
			p += c
		}
		if len(st.cuts) == 0 {
			return nil // cannot happen with want >= MaxChunk; no spin
		}
		ids := st.hashCuts(data)
		present, err := look(context.WithoutCancel(ctx), ids)
		if err != nil {
			return fmt.Errorf("stream: look up chunks: %w", err)
		}
		done := 0
		for i, c := range st.cuts {
			if err := ctx.Err(); err != nil {
				st.pos += int64(done)
				return err
			}
			if err := st.chunk(ids[i], present[i], data[c[0]:c[1]]); err != nil {
				st.pos += int64(done)
				return err
			}
			done = c[1]
		}
		st.pos += int64(done)
	}
	return nil
}

// hashCuts returns the ids of the chunks st.cuts marks in data, hashed on
// up to GOMAXPROCS goroutines.
func (st *Stream) hashCuts(data []byte) []ID {
	ids := make([]ID, len(st.cuts))
	workers := min(procs.Workers(), len(st.cuts)/8+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(st.cuts); i += workers {
				ids[i] = Sum(data[st.cuts[i][0]:st.cuts[i][1]])
			}
		}()
	}
	wg.Wait()
	return ids
}

// chunk adds one final chunk to the manifest and keeps its row unless
// the store has it (a hint, checked again by Finish's caller through
// the gc generation) or it is pending already. On error nothing changed:
// the manifest never names a chunk without its row.
func (st *Stream) chunk(id ID, present bool, chunk []byte) error {
	add := func() {
		st.m.Extents = append(st.m.Extents, Extent{ID: id, Len: int64(len(chunk))})
		st.m.Size += int64(len(chunk))
		st.st.Chunks++
		st.st.Bytes += int64(len(chunk))
	}
	if _, ok := st.pending[id]; ok {
		add()
		return nil
	}
	if present {
		add()
		return nil
	}
	var codec int
	var stored []byte
	if st.rawRun >= rawRunSkip && st.rawRun%rawRunProbe != 0 {
		// The file has been incompressible for a while (a download of
		// compressed data, media, random bytes): store raw without an
		// attempt, trying again every rawRunProbe chunks.
		codec, stored = codecRaw, chunk
		st.rawRun++
	} else {
		codec, stored = st.s.c.compress(chunk, &st.zbuf)
		if codec == codecRaw && len(chunk) >= minCompress {
			st.rawRun++
		} else {
			st.rawRun = 0
		}
	}
	r := streamRow{packedRow: packedRow{id: id, codec: int64(codec), size: int64(len(chunk))}}
	// As putData decides: past the first packFrom bytes of the file,
	// this chunk included.
	if st.st.Bytes+int64(len(chunk)) > packFrom && st.s.packs != nil && len(stored) >= minPackStored {
		num, off, err := st.s.packs.append(stored)
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		r.pack, r.off, r.n = num, off, int64(len(stored))
	} else {
		r.stored = append([]byte(nil), stored...)
		st.rowMem += int64(len(stored))
	}
	add()
	st.rows = append(st.rows, r)
	st.pending[id] = struct{}{}
	return nil
}

// Flush inserts the rows Advance produced through s, a transaction's
// store of the same database (and pack directory) as the stream's:
// packed rows many to a statement.
func (st *Stream) Flush(ctx context.Context, s *Store) error {
	packed := make([]packedRow, 0, len(st.rows))
	for _, r := range st.rows {
		if r.stored == nil {
			packed = append(packed, r.packedRow)
			continue
		}
		n, err := s.insertStored(ctx, r.id, KindChunk, r.codec, r.size, r.stored, false)
		if err != nil {
			return fmt.Errorf("stream: put chunk %s: %w", r.id.Short(), err)
		}
		if n > 0 {
			st.st.NewChunks++
			st.st.NewBytes += n
		}
	}
	added, bytes, err := s.insertPackedRows(ctx, KindChunk, packed)
	st.st.NewChunks += added
	st.st.NewBytes += bytes
	if err != nil {
		return fmt.Errorf("stream: put %d chunks: %w", len(packed), err)
	}
	st.rows, st.rowMem = st.rows[:0], 0
	clear(st.pending)
	return nil
}

// Finish stores the file through s, a transaction's store: the rows not
// yet flushed, the chunks of the file from Pos to its current size (as
// PutSparseFile cuts them), and the manifest. The caller must have
// verified that no byte below Pos changed since Advance read it, and that
// nothing Advance found present was collected since (its lookups ran
// outside s's transaction).
func (st *Stream) Finish(ctx context.Context, s *Store) (ID, FileStats, error) {
	if err := st.Flush(ctx, s); err != nil {
		return ID{}, st.st, err
	}
	fi, err := st.f.Stat()
	if err != nil {
		return ID{}, st.st, fmt.Errorf("stream %s: %w", st.f.Name(), err)
	}
	if fi.Size() < st.pos {
		return ID{}, st.st, fmt.Errorf("stream %s: file shrank to %d bytes below the streamed %d", st.f.Name(), fi.Size(), st.pos)
	}
	// The rest the same way, its lookups inside s's transaction (which
	// holds the rows just flushed).
	if err := st.advance(ctx, s.hasMany, fi.Size(), true); err != nil {
		return ID{}, st.st, err
	}
	if err := st.Flush(ctx, s); err != nil {
		return ID{}, st.st, err
	}
	return s.putManifest(ctx, &st.m, &st.st)
}
