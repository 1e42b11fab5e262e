package journal

import (
	"syscall"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
)

// Sentinels callers branch on. Namespace errors from Tx methods are wrapped
// syscall.Errno values (ENOENT, EEXIST, ENOTEMPTY, ENOTDIR, EISDIR, EINVAL,
// EXDEV...) so the overlay can hand them to the kernel unchanged and the CLI
// can test them with errors.Is(err, fs.ErrNotExist).
var (
	ErrBranchExists   = errclass.New(errclass.Conflict, "branch already exists")
	ErrBranchNotFound = errclass.New(errclass.NotFound, "branch not found")
	ErrRevNotFound    = errclass.New(errclass.NotFound, "revision not found")
	ErrAmbiguous      = errclass.New(errclass.NotFound, "ambiguous revision")
	ErrBadRev         = errclass.New(errclass.Usage, "bad revision syntax")
	ErrNothingToUndo  = errclass.New(errclass.Conflict, "nothing to undo")
	ErrRemoteExists   = errclass.New(errclass.Conflict, "remote already exists")
	ErrRemoteNotFound = errclass.New(errclass.NotFound, "remote not found")
	// ErrHeadMoved reports a compare-and-swap branch move (MoveBranch)
	// whose branch changed since the caller read it.
	ErrHeadMoved = errclass.New(errclass.Conflict, "branch head moved")
	// ErrGCRaced reports a MoveBranch whose objects were received (or
	// found present) before an art gc that completed since: an object the
	// transfer deduplicated against may have been collected. Nothing was
	// changed; run the transfer again.
	ErrGCRaced = errclass.New(errclass.Conflict, "a gc ran during the transfer")
	// ErrCorrupt reports a journal whose chain, payloads or projection do
	// not agree; object corruption is cas.ErrCorrupt.
	ErrCorrupt = errclass.New(errclass.Corrupt, "corrupt journal")
	// ErrReadOnly reports a write to a store this process can only read
	// (its file or directory is not writable, or it was opened ReadOnly).
	ErrReadOnly = errclass.New(errclass.Permission, "store is read-only")
	// ErrNotStore reports a file that is not an art store where a read
	// verb expected one: empty, or not an SQLite database (which is also
	// ErrCorrupt, as SQLite's SQLITE_NOTADB is).
	ErrNotStore = errclass.New(errclass.NotFound, "not an art store")
	// ErrOldSchema reports a read verb on a store an older art wrote: a
	// read never migrates it.
	ErrOldSchema = errclass.New(errclass.Unavailable, "store written by an older art")
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
