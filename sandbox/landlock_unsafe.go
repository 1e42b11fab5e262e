//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ScopeThread puts the calling thread - and so the bwrap it forks next,
// and everything bwrap starts - in a Landlock domain scoped against
// abstract UNIX sockets and signals created or owned outside it.
//
// Why: with --net host (the default) the sandbox shares the host's
// network namespace, and abstract sockets (X11's @/tmp/.X11-unix/X0,
// D-Bus, ...) belong to the namespace, not to any file a tmpfs can hide.
// Only Landlock's scoping (ABI 6, Linux 6.12) keeps them out of reach.
//
// Call it on a thread locked to its goroutine (see Starter) right before
// cmd.Start; the thread must never run other goroutines afterwards (it
// exits with the goroutine that locked it). As root the thread needs no
// no_new_privs (CAP_SYS_ADMIN suffices); otherwise it sets no_new_privs,
// unless bwrap is setuid (which no_new_privs would break): then, and on
// kernels without Landlock scoping, it does nothing and reports false.
func ScopeThread(bwrap string) (bool, error) {
	if os.Geteuid() != 0 {
		if st, err := os.Stat(bwrap); err == nil && st.Mode()&os.ModeSetuid != 0 {
			return false, nil
		}
	}
	// struct landlock_ruleset_attr up to ABI 6: handled_access_fs,
	// handled_access_net, scoped.
	attr := struct{ fs, net, scoped uint64 }{
		scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL,
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		// No Landlock (ENOSYS, EOPNOTSUPP: not built in or not enabled)
		// or no scoping in this ABI (EINVAL, E2BIG).
		if errors.Is(errno, unix.ENOSYS) || errors.Is(errno, unix.EOPNOTSUPP) ||
			errors.Is(errno, unix.EINVAL) || errors.Is(errno, unix.E2BIG) {
			return false, nil
		}
		return false, fmt.Errorf("landlock ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if os.Geteuid() != 0 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return false, fmt.Errorf("no_new_privs: %w", err)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return false, fmt.Errorf("landlock restrict: %w", errno)
	}
	return true, nil
}
