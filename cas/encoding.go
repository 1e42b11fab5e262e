package cas

import "encoding/binary"

// Helpers for the canonical manifest and tree encodings: unsigned LEB128
// varints that must be minimal, zigzag for signed values, and
// length-prefixed byte strings.

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendVarint(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func appendBytes(b, s []byte) []byte {
	return append(appendUvarint(b, uint64(len(s))), s...)
}

// decoder reads a canonical encoding. The first error sticks: later reads
// return zero values, so callers check err once per item.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = malformed(format, args...)
	}
}

// uvarint reads a minimal unsigned varint: no trailing zero groups, at most
// 64 bits.
func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	for i := 0; i < len(d.b); i++ {
		c := d.b[i]
		if i == 9 && c > 1 {
			d.fail("varint overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				d.fail("non-minimal varint")
				return 0
			}
			d.b = d.b[i+1:]
			return v
		}
	}
	d.fail("truncated varint")
	return 0
}

// varint reads a zigzag-encoded signed varint.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// next returns the next n bytes, capacity-limited so appending to the
// result cannot clobber what follows.
func (d *decoder) next(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated: want %d bytes, have %d", n, len(d.b))
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

// bytes reads a length-prefixed byte string of at most max bytes.
func (d *decoder) bytes(what string, max int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.fail("%s of %d bytes exceeds %d", what, n, max)
		return nil
	}
	return d.next(int(n))
}

func (d *decoder) id() (id ID) {
	copy(id[:], d.next(len(id)))
	return id
}

// count reads an item count, refusing one that len(d.b) bytes could not
// hold at minSize bytes per item, so no allocation trusts a large count.
func (d *decoder) count(what string, minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.fail("%d %s cannot fit in %d bytes", n, what, len(d.b))
		return 0
	}
	return int(n)
}

// header checks a 4-byte magic and the version byte.
func (d *decoder) header(magic string, version byte) {
	if len(d.b) < len(magic)+1 || string(d.b[:len(magic)]) != magic {
		d.fail("no %q magic", magic)
		return
	}
	if v := d.b[len(magic)]; v != version {
		d.fail("unknown %s version %d", magic, v)
		return
	}
	d.b = d.b[len(magic)+1:]
}

// end fails if bytes remain.
func (d *decoder) end() {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
}
