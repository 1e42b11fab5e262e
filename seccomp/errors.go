package seccomp

import "errors"

var (
	// ErrUnknownSyscall: a policy names a system call the arch's table
	// does not know (a typo in --trace-syscalls, or "open" on arm64).
	ErrUnknownSyscall = errors.New("unknown system call")
	// ErrUnsupportedArch: art builds filters for amd64 and arm64 only.
	ErrUnsupportedArch = errors.New("unsupported architecture")
)
