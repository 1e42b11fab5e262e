package session

import (
	"errors"
	"fmt"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
)

// UsageError is an error the caller has to fix: a bad option, branch name
// or policy file. The CLI exits 2 for it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// ErrorClass is Usage: the CLI's exit status 2.
func (e *UsageError) ErrorClass() errclass.Class { return errclass.Usage }

func usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// errNoBranch: a caller passed no branch. The default branch is resolved
// once, where a user or a request left it out (the CLI), not here.
var errNoBranch = errors.New("session: no branch named")

// BranchInUseError says another session holds the branch's lock: two
// mounts of one branch would interleave their changes. It is the
// journal's: every change of a held branch's tree is refused with it.
type BranchInUseError = journal.BranchInUseError

// FailedError says the session's mount failed: the store could not keep
// everything the sandbox wrote (see overlay.FailedError, which it wraps,
// for what was kept and what is named). The session is over: ended, its
// state removed, and its operation recorded as failed, unless Unrecorded
// says why that too failed (the op then shows as interrupted).
type FailedError struct {
	*overlay.FailedError
	Unrecorded error
}

func (e *FailedError) Unwrap() error { return e.FailedError }
