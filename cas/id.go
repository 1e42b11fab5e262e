package cas

import (
	"encoding/hex"
	"fmt"

	"github.com/zeebo/blake3"
)

// ID names an object: the BLAKE3-256 hash of its canonical uncompressed
// bytes. The zero ID names no object; a manifest uses it for holes.
type ID [32]byte

// Sum returns the id of an object whose canonical bytes are b.
func Sum(b []byte) ID { return ID(blake3.Sum256(b)) }

// String returns the id as 64 lowercase hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the first 12 hex digits, the form users see.
func (id ID) Short() string {
	var b [12]byte
	hex.Encode(b[:], id[:6])
	return string(b[:])
}

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// ParseID parses exactly 64 hex digits (either case). Other input returns
// an error wrapping ErrInvalidID.
func ParseID(s string) (ID, error) {
	var id ID
	if err := id.UnmarshalText([]byte(s)); err != nil {
		return ID{}, err
	}
	return id, nil
}

// MarshalText encodes id as 64 lowercase hex digits, so IDs are JSON
// strings.
func (id ID) MarshalText() ([]byte, error) {
	b := make([]byte, 2*len(id))
	hex.Encode(b, id[:])
	return b, nil
}

// UnmarshalText is the inverse of MarshalText; see ParseID.
func (id *ID) UnmarshalText(b []byte) error {
	if len(b) != 2*len(id) {
		return fmt.Errorf("parse id %q: %w: want 64 hex digits, have %d characters", b, ErrInvalidID, len(b))
	}
	var v ID
	if _, err := hex.Decode(v[:], b); err != nil {
		return fmt.Errorf("parse id %q: %w: %v", b, ErrInvalidID, err)
	}
	*id = v
	return nil
}
