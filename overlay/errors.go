package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/journal"
)

// ErrNoFUSE reports a mount that failed because this user cannot use FUSE
// at all: no /dev/fuse, or no permission to open it. (fusermount3's own
// "exited with code 256" says neither.)
var ErrNoFUSE = errclass.New(errclass.Unavailable, "FUSE is not available to this user")

// fuseUnavailable says why this process cannot use /dev/fuse, or "".
func fuseUnavailable() string {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return err.Error()
	}
	f.Close()
	return ""
}

// uninterruptible detaches a request's context from FUSE interrupts. The
// kernel interrupts a request whenever the calling thread gets a signal -
// Go programs get SIGURG preemption signals constantly - and a journal
// transaction cancelled half-way would answer EINTR for a create or rename
// that may already have happened. Nothing art does in a request blocks
// indefinitely, so it always finishes what it started.
func uninterruptible(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// errno is the one translation from art errors to what the kernel gets
// (toErrno); an error that is not a POSIX one becomes EIO, and its detail
// goes to the mount's log (Options.Log), as does every EIO: the detail of
// an I/O error a system call returned (a pack, a private copy) is what an
// operator needs, and an EIO the daemon did not log is then known to be
// the kernel's own (passthrough.go).
func (f *FS) errno(err error) syscall.Errno {
	e, known := toErrno(err)
	if !known || e == syscall.EIO {
		f.logf("%v", err)
	}
	return e
}

// toErrno maps err to an errno, and says whether err named one. go-fuse's
// own conversion does not unwrap, so a wrapped ENOENT would reach the
// caller as ENOSYS; errors.As finds the errno at any depth. Anything that
// is not a POSIX error is an I/O error.
func toErrno(err error) (syscall.Errno, bool) {
	if err == nil {
		return 0, true
	}
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return e, true
	case errors.Is(err, context.Canceled):
		return syscall.EINTR, true
	case errors.Is(err, cas.ErrTooLarge):
		return syscall.EFBIG, true
	}
	if e, ok := journal.StorageErrno(err); ok { // SQLite's "database or disk is full"
		return e, true
	}
	return syscall.EIO, false
}

// logf reports what the mount could not do that no caller will hear of
// (a request's detail behind EIO, a background journal write) to
// Options.Log: never to the process's standard logger, whose stderr may be
// the terminal a sandboxed program draws on.
func (f *FS) logf(format string, a ...any) {
	if f.log != nil {
		f.log("art overlay: " + fmt.Sprintf(format, a...))
	}
}
