package session

import "fmt"

// UsageError is an error the caller has to fix: a bad option, branch name
// or policy file. The CLI exits 2 for it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// BranchInUseError says another session holds the branch's lock: two
// mounts of one branch would interleave their changes.
type BranchInUseError struct{ Store, Branch string }

func (e *BranchInUseError) Error() string {
	return fmt.Sprintf("branch %s of %s is in use by another art run", e.Branch, e.Store)
}
