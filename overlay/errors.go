package overlay

import (
	"context"
	"errors"
	"log"
	"os"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
)

// ErrNoFUSE reports a mount that failed because this user cannot use FUSE
// at all: no /dev/fuse, or no permission to open it. (fusermount3's own
// "exited with code 256" says neither.)
var ErrNoFUSE = errors.New("FUSE is not available to this user")

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

// toErrno is the one translation from art errors to what the kernel gets.
// go-fuse's own conversion does not unwrap, so a wrapped ENOENT would reach
// the caller as ENOSYS; errors.As finds the errno at any depth. Anything
// that is not a POSIX error is an I/O error, logged with its detail.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, cas.ErrTooLarge):
		return syscall.EFBIG
	}
	if e, ok := journal.StorageErrno(err); ok { // SQLite's "database or disk is full"
		return e
	}
	log.Printf("art overlay: %s", termtext.Text(err.Error())) // an error may name a path
	return syscall.EIO
}
