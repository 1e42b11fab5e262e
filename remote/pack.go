package remote

import (
	"encoding/binary"
	"fmt"

	"github.com/artrt/art/cas"
)

// A pack index lists the objects of one pack:
//
//	index = "arti" 0x01 uvarint count entry*count
//	entry = id[32] kind[1] codec[1] uvarint size uvarint offset uvarint length [base[32]]
//
// offset and length locate the object's stored bytes in the pack; base, only
// present when codec is codecDelta, names the tree the bytes are a delta
// against (see delta.go). Bytes of a pack that no entry locates are
// ignored (a writer pads a pack's start to change its name, see putPack).
// The index is untrusted input on the way in: counts are checked against
// the bytes left and every object it locates is verified on receipt anyway.

const (
	indexMagic   = "arti"
	indexVersion = 1
	minIndexEnt  = 32 + 2 + 3
	// maxStored bounds one object's stored bytes: a zstd frame of an
	// incompressible object is a little larger than the object.
	maxStored = cas.MaxObjectSize + 1<<20
)

// packEntry locates one object in a pack.
type packEntry struct {
	kind   cas.Kind
	codec  uint8
	size   int64
	offset int64
	length int64
	base   cas.ID // codecDelta only
}

// buildPack concatenates objs after pad zero bytes and returns the pack
// and its index. bases[i] is the base of objs[i] when its codec is
// codecDelta.
func buildPack(objs []cas.Raw, bases []cas.ID, pad int) (pack, index []byte) {
	pack = make([]byte, pad)
	index = append([]byte(indexMagic), indexVersion)
	index = binary.AppendUvarint(index, uint64(len(objs)))
	for i, o := range objs {
		index = append(index, o.ID[:]...)
		index = append(index, byte(o.Kind), o.Codec)
		index = binary.AppendUvarint(index, uint64(o.Size))
		index = binary.AppendUvarint(index, uint64(len(pack)))
		index = binary.AppendUvarint(index, uint64(len(o.Data)))
		if o.Codec == codecDelta {
			index = append(index, bases[i][:]...)
		}
		pack = append(pack, o.Data...)
	}
	return pack, index
}

// parseIndex decodes a pack index, calling fn for each entry.
func parseIndex(b []byte, fn func(id cas.ID, e packEntry)) error {
	if len(b) < len(indexMagic)+1 || string(b[:len(indexMagic)]) != indexMagic || b[len(indexMagic)] != indexVersion {
		return fmt.Errorf("%w: pack index header", ErrMalformed)
	}
	b = b[len(indexMagic)+1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	count, ok := uv()
	if !ok || count > uint64(len(b)/minIndexEnt) {
		return fmt.Errorf("%w: pack index count", ErrMalformed)
	}
	for i := uint64(0); i < count; i++ {
		if len(b) < 34 {
			return fmt.Errorf("%w: pack index entry %d truncated", ErrMalformed, i)
		}
		var id cas.ID
		copy(id[:], b)
		e := packEntry{kind: cas.Kind(b[32]), codec: b[33]}
		b = b[34:]
		size, ok1 := uv()
		off, ok2 := uv()
		n, ok3 := uv()
		if !ok1 || !ok2 || !ok3 || size > maxStored || n > maxStored || off > 1<<50 {
			return fmt.Errorf("%w: pack index entry %d (%s)", ErrMalformed, i, id.Short())
		}
		e.size, e.offset, e.length = int64(size), int64(off), int64(n)
		if e.codec == codecDelta {
			if len(b) < 32 {
				return fmt.Errorf("%w: pack index entry %d (%s): no delta base", ErrMalformed, i, id.Short())
			}
			copy(e.base[:], b)
			b = b[32:]
		}
		fn(id, e)
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the pack index", ErrMalformed, len(b))
	}
	return nil
}
