// Package dirent parses what getdents64(2) fills a buffer with: the one
// parser of linux_dirent64 records for the capture's directory reads
// (workspace) and the mount's priming walk (overlay).
package dirent

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// errMalformed is a record that does not fit its buffer; no caller tells
// it apart (the capture's own parser did not either).
var errMalformed = errors.New("malformed directory entry from getdents")

// Parse calls fn for each record of b, getdents64's output, but "." and
// ".." (and an empty name), with the entry's name (valid during the call
// only) and its d_type (unix.DT_*). struct linux_dirent64 is ino (8), off
// (8), reclen (2), type (1), then the name NUL-terminated and padded to
// reclen. A record that does not fit ends the parse with an error.
func Parse(b []byte, fn func(name []byte, typ uint8)) error {
	for off := 0; off < len(b); {
		if len(b)-off < 19 {
			return errMalformed
		}
		reclen := int(binary.NativeEndian.Uint16(b[off+16:]))
		if reclen < 20 || reclen > len(b)-off {
			return errMalformed
		}
		typ := b[off+18]
		name := b[off+19 : off+reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		off += reclen
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		fn(name, typ)
	}
	return nil
}
