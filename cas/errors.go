package cas

import (
	"fmt"

	"github.com/artrt/art/internal/errclass"
)

// Sentinels callers branch on with errors.Is.
var (
	// ErrNotFound reports an object id that is not in the store. Its
	// class is Corrupt: what reaches a user is a state whose object is
	// missing, a damaged store (callers that look objects up by id, a
	// transfer's, branch on the sentinel itself).
	ErrNotFound = errclass.New(errclass.Corrupt, "object not found")
	// ErrCorrupt reports a stored object that does not hash to its id, does
	// not decompress within its bounds, or does not decode. Errors matching
	// it are *CorruptError values naming the object.
	ErrCorrupt = errclass.New(errclass.Corrupt, "corrupt object")
	// ErrMalformed reports bytes that are not a canonical encoding
	// (DecodeManifest, DecodeTree, ValidName) or a value that cannot be
	// encoded (Tree.Encode, Manifest.Validate).
	ErrMalformed = errclass.New(errclass.Invalid, "malformed object")
	// ErrTooLarge reports an object over its kind's size limit (MaxChunk
	// for chunks, MaxObjectSize otherwise), for example the manifest of a
	// file with tens of millions of chunks.
	ErrTooLarge = errclass.New(errclass.Invalid, "object too large")
	// ErrInvalidID reports a string that is not 64 hex digits.
	ErrInvalidID = errclass.New(errclass.Invalid, "invalid object id")
	// ErrPackWrite matches every error of writing a pack (creating,
	// appending, syncing): the store's disk failed under a writer, as
	// opposed to the writer's input being refused.
	ErrPackWrite = errclass.New(errclass.Unavailable, "pack write failed")
)

// packWriteError is a pack write's error: it reads as its cause and
// matches ErrPackWrite.
type packWriteError struct{ err error }

func (e *packWriteError) Error() string        { return e.err.Error() }
func (e *packWriteError) Unwrap() error        { return e.err }
func (e *packWriteError) Is(target error) bool { return target == ErrPackWrite }

// ErrorClass is ErrPackWrite's: an error matching a sentinel has its class.
func (e *packWriteError) ErrorClass() errclass.Class { return errclass.Unavailable }

func packWrite(err error) error {
	if err == nil {
		return nil
	}
	return &packWriteError{err}
}

// CorruptError names an object whose stored form is wrong. It matches
// ErrCorrupt with errors.Is.
type CorruptError struct {
	ID     ID
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt object %s: %s", e.ID, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ErrorClass is ErrCorrupt's.
func (e *CorruptError) ErrorClass() errclass.Class { return errclass.Corrupt }

func corrupt(id ID, format string, args ...any) error {
	return &CorruptError{ID: id, Reason: fmt.Sprintf(format, args...)}
}

// malformed returns an error wrapping ErrMalformed.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
