package overlay

import (
	"context"
	"errors"
	"log"
	"syscall"

	"github.com/artrt/art/cas"
)

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
	log.Printf("art overlay: %v", err)
	return syscall.EIO
}
