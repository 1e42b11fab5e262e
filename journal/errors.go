package journal

import (
	"errors"
	"syscall"

	"github.com/artrt/art/internal/termtext"
)

// Sentinels callers branch on. Namespace errors from Tx methods are wrapped
// syscall.Errno values (ENOENT, EEXIST, ENOTEMPTY, ENOTDIR, EISDIR, EINVAL,
// EXDEV...) so the overlay can hand them to the kernel unchanged and the CLI
// can test them with errors.Is(err, fs.ErrNotExist).
var (
	ErrBranchExists   = errors.New("branch already exists")
	ErrBranchNotFound = errors.New("branch not found")
	ErrRevNotFound    = errors.New("revision not found")
	ErrAmbiguous      = errors.New("ambiguous revision")
	ErrBadRev         = errors.New("bad revision syntax")
	ErrNothingToUndo  = errors.New("nothing to undo")
	ErrRemoteExists   = errors.New("remote already exists")
	ErrRemoteNotFound = errors.New("remote not found")
	// ErrHeadMoved reports a compare-and-swap branch move (MoveBranch)
	// whose branch changed since the caller read it.
	ErrHeadMoved = errors.New("branch head moved")
	// ErrGCRaced reports a MoveBranch whose objects were received (or
	// found present) before an art gc that completed since: an object the
	// transfer deduplicated against may have been collected. Nothing was
	// changed; run the transfer again.
	ErrGCRaced = errors.New("a gc ran during the transfer")
	// ErrCorrupt reports a journal whose chain, payloads or projection do
	// not agree; object corruption is cas.ErrCorrupt.
	ErrCorrupt = errors.New("corrupt journal")
	// ErrReadOnly reports a write to a store this process can only read
	// (its file or directory is not writable, or it was opened ReadOnly).
	ErrReadOnly = errors.New("store is read-only")
	// ErrNotStore reports a file that is not an art store where a read
	// verb expected one: empty, or not an SQLite database (which is also
	// ErrCorrupt, as SQLite's SQLITE_NOTADB is).
	ErrNotStore = errors.New("not an art store")
	// ErrOldSchema reports a read verb on a store an older art wrote: a
	// read never migrates it.
	ErrOldSchema = errors.New("store written by an older art")
)

// errno wraps a POSIX error with the path it concerns.
type errno struct {
	op   string
	path string
	err  syscall.Errno
}

func (e *errno) Error() string                         { return e.op + " " + quotePath(e.path) + ": " + e.err.Error() }
func (e *errno) Unwrap() error                         { return e.err }
func pathErr(op, path string, err syscall.Errno) error { return &errno{op: op, path: path, err: err} }

// quotePath shows a journal path as the agent sees it below /home/agent
// (/ws/f), quoted for a terminal when it needs to be.
func quotePath(p string) string {
	return termtext.Quote("/" + p)
}
