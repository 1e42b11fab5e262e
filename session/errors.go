package session

import (
	"fmt"

	"github.com/artrt/art/journal"
)

// UsageError is an error the caller has to fix: a bad option, branch name
// or policy file. The CLI exits 2 for it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// BranchInUseError says another session holds the branch's lock: two
// mounts of one branch would interleave their changes. It is the
// journal's: every change of a held branch's tree is refused with it.
type BranchInUseError = journal.BranchInUseError
