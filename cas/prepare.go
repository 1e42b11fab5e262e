package cas

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Prepared is a file's content read, chunked, hashed and compressed but
// not yet stored: the CPU half of PutSparseFile, which PrepareSparseFile
// does on any goroutine and PutPrepared completes on the writer's. Ingest
// of many small files prepares them on worker goroutines ahead of the one
// goroutine that owns the SQLite transaction, so every core works while
// the store keeps a single writer.
type Prepared struct {
	m     Manifest
	rows  []Raw // the file's distinct chunks in stored form
	st    FileStats
	bytes int64 // memory the rows hold
}

// Size is the file's length as prepared.
func (p *Prepared) Size() int64 { return p.m.Size }

// Bytes is the memory the prepared chunks hold.
func (p *Prepared) Bytes() int64 { return p.bytes }

// PrepareSparseFile reads f as PutSparseFile does (holes kept, pread from
// offset 0 up to the size f had at the start) and returns its chunks
// compressed, touching nothing but f and s's codecs. It holds the whole
// compressed content in memory: callers bound the size of what they
// prepare.
func (s *Store) PrepareSparseFile(ctx context.Context, f *os.File) (*Prepared, error) {
	p := &Prepared{}
	seen := make(map[ID]struct{})
	buf := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(buf)
	err := sparseData(f, &p.m, func(r io.Reader) error {
		return eachChunk(ctx, r, *buf, &p.m, &p.st, func(id ID, chunk []byte) error {
			if _, ok := seen[id]; ok {
				return nil
			}
			seen[id] = struct{}{}
			var z []byte
			codec, stored := s.c.compress(chunk, &z)
			// stored aliases the chunker's buffer or z: keep a copy of
			// exactly its length.
			own := make([]byte, len(stored))
			copy(own, stored)
			p.rows = append(p.rows, Raw{ID: id, Kind: KindChunk, Codec: uint8(codec), Size: int64(len(chunk)), Data: own})
			p.bytes += int64(len(own))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("prepare file %s: %w", f.Name(), err)
	}
	return p, nil
}

// SparseFileID is the id PutSparseFile would return for f - its content
// read the same way (holes kept, pread from offset 0 up to the size f had
// at the start), chunked and hashed - with nothing compressed or stored,
// and the content's length: whether a host file still holds what a store
// has can then be told without a write to the store (a warm mount's reuse
// check, workspace.ImportOptions.RacyByContent).
func SparseFileID(ctx context.Context, f *os.File) (ID, int64, error) {
	var m Manifest
	var st FileStats
	buf := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(buf)
	err := sparseData(f, &m, func(r io.Reader) error {
		return eachChunk(ctx, r, *buf, &m, &st, func(ID, []byte) error { return nil })
	})
	if err != nil {
		return ID{}, 0, fmt.Errorf("hash file %s: %w", f.Name(), err)
	}
	if m.Size > MaxFileSize {
		return ID{}, 0, fmt.Errorf("hash file %s: %d bytes: %w", f.Name(), m.Size, ErrTooLarge)
	}
	m.Normalize()
	return Sum(m.Encode()), m.Size, nil
}

// PutPrepared stores what PrepareSparseFile prepared: the chunks s does not
// have yet, then the manifest. It returns the same as PutSparseFile would
// have for the content as it was read.
func (s *Store) PutPrepared(ctx context.Context, p *Prepared) (ID, FileStats, error) {
	st := p.st
	pack := p.m.Size >= packFrom
	for _, r := range p.rows {
		// A row kept inline needs no look-up first: INSERT OR IGNORE
		// says whether it was new. Only bytes bound for a pack are
		// looked up, so that a known chunk appends no garbage to it.
		if pack && s.packs != nil && len(r.Data) >= minPackStored {
			ok, err := s.has(ctx, r.ID)
			if err != nil {
				return ID{}, st, fmt.Errorf("put file: look up chunk %s: %w", r.ID.Short(), err)
			}
			if ok {
				continue
			}
		}
		n, err := s.insertRawPack(ctx, r, pack)
		if err != nil {
			return ID{}, st, fmt.Errorf("put file: %w", err)
		}
		if n > 0 {
			st.NewChunks++
			st.NewBytes += n
		}
	}
	m := p.m
	m.Extents = append([]Extent(nil), p.m.Extents...) // putManifest normalizes in place
	return s.putManifest(ctx, &m, &st)
}
