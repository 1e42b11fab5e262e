package remote

import (
	"errors"
	"fmt"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
)

var (
	// ErrRefChanged reports a compare-and-swap ref update that lost: the
	// remote branch moved since it was read. Objects already sent stay;
	// rerunning sends only what is missing.
	ErrRefChanged = errclass.New(errclass.Conflict, "remote ref changed")
	// ErrNonFastForward reports a push or pull that would drop states the
	// other side has (the old head is not in the new head's known history).
	// --force overrides it.
	ErrNonFastForward = errclass.New(errclass.Conflict, "not a fast-forward")
	// ErrNoBranch reports a branch the remote does not have.
	ErrNoBranch = errclass.New(errclass.NotFound, "no such branch on the remote")
	// ErrBadURL reports a remote URL or path that cannot be used.
	ErrBadURL = errclass.New(errclass.Invalid, "bad remote url")
	// ErrTooLarge reports a pulled state that expands past the bounds of
	// Options.MaxEntries / MaxBytes.
	ErrTooLarge = errclass.New(errclass.Invalid, "state too large")
	// ErrMalformed reports remote metadata (a ref or a pack index) that does
	// not parse.
	ErrMalformed = errclass.New(errclass.Invalid, "malformed remote metadata")
)

// ObjectError names an object a transfer could not get or use. It wraps
// the cause (cas.ErrNotFound, cas.ErrCorrupt...).
type ObjectError struct {
	ID   cas.ID
	Kind cas.Kind
	Err  error
}

func (e *ObjectError) Error() string {
	var ce *cas.CorruptError
	if errors.As(e.Err, &ce) && ce.ID == e.ID {
		return fmt.Sprintf("corrupt %s %s: %s", e.Kind, e.ID, ce.Reason)
	}
	return fmt.Sprintf("%s %s: %v", e.Kind, e.ID, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }
