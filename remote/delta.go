package remote

import (
	"fmt"

	"github.com/artrt/art/cas"
	"github.com/klauspost/compress/zstd"
)

// Tree deltas (S3 packs only). When one entry of a directory changes, the
// whole tree object is new, and its 32-byte ids do not compress: on Go's
// src/ the rewritten trees were most of an incremental push. A tree whose
// earlier version (the tree at the same path in the state the remote's ref
// names) is on the remote is therefore packed as a zstd frame compressed
// with that version's bytes as a raw dictionary: unchanged entries become
// back-references. The index entry has codec codecDelta and names the base.
//
// A delta decodes only with its base's verified bytes, so a chain is
// resolved base first; chains are at most maxDeltaDepth long (a pusher never
// builds on a base that deep, a reader refuses deeper ones, which also ends
// cycles). The result is checked like any object: bounded inflation, hash,
// canonical decoding.

const (
	codecDelta    = 2
	maxDeltaDepth = 8
)

// encodeDelta compresses full with base as dictionary. At the fastest
// level: an encoder given a dictionary builds its match tables from it,
// and the default level's tables (about a megabyte, cleared and filled for
// every tree) made encodeDelta 30% of an incremental push to S3, where the
// fastest level's smaller ones cost a fifth of the push's time less for
// 0.04% more bytes (docs/benchmarks.md, "The other tables after issue 27").
func encodeDelta(full, base []byte) ([]byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDictRaw(0, base), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(windowFor(len(full)+len(base))))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	return enc.EncodeAll(full, nil), nil
}

// windowFor is the smallest valid zstd window covering n bytes.
func windowFor(n int) int {
	w := zstd.MinWindowSize
	for w < n && w < zstd.MaxWindowSize {
		w <<= 1
	}
	return w
}

// decodeDelta inflates a delta of object id against base into exactly size
// bytes; anything else is a *cas.CorruptError naming id.
func decodeDelta(id cas.ID, delta, base []byte, size int64) ([]byte, error) {
	if size < 0 || size > cas.MaxObjectSize {
		return nil, &cas.CorruptError{ID: id, Reason: fmt.Sprintf("delta claims %d bytes", size)}
	}
	var h zstd.Header
	if err := h.Decode(delta); err != nil {
		return nil, &cas.CorruptError{ID: id, Reason: fmt.Sprintf("delta header: %v", err)}
	}
	if h.HasFCS && h.FrameContentSize != uint64(size) {
		return nil, &cas.CorruptError{ID: id, Reason: fmt.Sprintf("delta holds %d bytes, index says %d", h.FrameContentSize, size)}
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(0, base), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(cas.MaxObjectSize), zstd.WithDecoderMaxWindow(cas.MaxObjectSize),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	out, err := dec.DecodeAll(delta, make([]byte, 0, size))
	if err != nil {
		return nil, &cas.CorruptError{ID: id, Reason: fmt.Sprintf("delta: %v", err)}
	}
	if int64(len(out)) != size {
		return nil, &cas.CorruptError{ID: id, Reason: fmt.Sprintf("delta inflated to %d bytes, index says %d", len(out), size)}
	}
	return out, nil
}
