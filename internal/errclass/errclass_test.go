package errclass

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestSentinel(t *testing.T) {
	a, b := New(NotFound, "thing not found"), New(NotFound, "thing not found")
	wrapped := fmt.Errorf("open x: %w", a)
	if !errors.Is(wrapped, a) || errors.Is(wrapped, b) {
		t.Fatalf("errors.Is must compare sentinels by identity, as errors.New's")
	}
	if got, want := wrapped.Error(), "open x: thing not found"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	if got := Of(wrapped); got != NotFound {
		t.Fatalf("Of(wrapped) = %v, want not found", got)
	}
}

func TestStandardLibrary(t *testing.T) {
	_, statErr := os.Stat("/nonexistent/errclass")
	for _, c := range []struct {
		err  error
		want Class
	}{
		{nil, Failure},
		{errors.New("plain"), Failure},
		{context.Canceled, Failure},
		{fs.ErrNotExist, NotFound},
		{statErr, NotFound},
		{fmt.Errorf("write: %w", syscall.ENOSPC), Unavailable},
		{syscall.EDQUOT, Unavailable},
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.EACCES}, Permission},
		{syscall.EROFS, Permission},
		{fs.ErrPermission, Permission},
		{syscall.EIO, Failure},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestPrecedence: a chain carrying several classes is its strongest, in
// the order the CLI has always tested them, wherever each sits in it.
func TestPrecedence(t *testing.T) {
	usage, notFound, corrupt := New(Usage, "u"), New(NotFound, "n"), New(Corrupt, "c")
	for _, c := range []struct {
		err  error
		want Class
	}{
		{fmt.Errorf("%w: %w", notFound, usage), Usage},
		{fmt.Errorf("%w: %w", usage, notFound), Usage},
		{errors.Join(notFound, fmt.Errorf("x: %w", corrupt)), Corrupt},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", errors.Join(syscall.ENOENT, New(Invalid, "i")))), NotFound},
		{errors.Join(New(Failure, "f"), syscall.ENOSPC), Unavailable},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	all := Classes()
	if len(all) != int(numClasses) || all[len(all)-1] != Failure {
		t.Fatalf("Classes() = %v: want all %d classes, Failure last", all, numClasses)
	}
	seen := map[Class]bool{}
	for _, c := range all {
		if seen[c] || c.String() == "" || c.String() == "class?" {
			t.Fatalf("class %d listed twice or unnamed", c)
		}
		seen[c] = true
	}
}

// foreign stands for an error type art does not define (SQLite's).
type foreign struct{ code int }

func (f foreign) Error() string { return fmt.Sprintf("foreign %d", f.code) }

func TestRegister(t *testing.T) {
	Register(func(err error) Class {
		if f, ok := err.(foreign); ok && f.code == 11 {
			return Corrupt
		}
		return Failure
	})
	if got := Of(fmt.Errorf("read: %w", foreign{11})); got != Corrupt {
		t.Fatalf("a registered classifier's class: got %v, want corrupt", got)
	}
	if got := Of(foreign{5}); got != Failure {
		t.Fatalf("an error the classifier does not know: got %v, want failure", got)
	}
}
