package seccomp

import "github.com/artrt/art/internal/errclass"

var (
	// ErrUnknownSyscall: a policy names a system call the arch's table
	// does not know (a typo in --trace-syscalls, or "open" on arm64).
	ErrUnknownSyscall = errclass.New(errclass.Invalid, "unknown system call")
	// ErrUnsupportedArch: art builds filters for amd64 and arm64 only.
	ErrUnsupportedArch = errclass.New(errclass.Unavailable, "unsupported architecture")
)
