// Package sandbox turns a plain description of a sandbox - host paths, a
// command, limits - into a bubblewrap (bwrap) process, starts it the way
// its hardening requires, and supervises it: PTY, signals, timeout, the
// kill of the whole process tree, and resource limits.
//
// It never imports the overlay: the caller mounts /home/agent wherever it
// likes and passes the path (containerd's snapshotters describe mounts;
// they do not perform them).
//
// Guest layout (DESIGN.md section 2):
//
//	/                  host root, read-only
//	/tmp /run /var/run private tmpfs (host sockets hidden)
//	/home /root        tmpfs (host homes hidden)
//	/home/agent        Config.Home (the FUSE overlay) or a tmpfs
//	/home/agent/<ws>   the workspace: part of Home, or Config.Workspace bound read-write
//	/dev               null zero full random urandom tty ptmx pts shm only
//
// Hardening, each item tested in sandbox_test.go: every capability
// dropped; when art runs as root the command runs as an unprivileged host
// uid in a user namespace (bwrap's --uid alone keeps kuid 0, which can
// still write /proc/sys/kernel/core_pattern); --die-with-parent from a
// goroutine locked to its OS thread (the parent-death signal follows the
// thread that forked, not the process); --new-session unless art owns the
// PTY (no TIOCSTI into the caller's terminal); only fds 0-2 (plus the
// seccomp program's, which bwrap closes) reach the sandbox; a cleared
// environment; --disable-userns; the store and art's state hidden; host
// abstract UNIX sockets (shared through the host network namespace, which
// no mount hides) and host processes' signals out of reach by a Landlock
// scope on the thread that starts bwrap (ScopeThread; Linux 6.12+, a
// no-op on older kernels).
//
// Failure modes: bwrap's own errors (a missing bind source, say) arrive on
// the command's stderr and as exit status 1 before the command ran;
// Start reports what it can check itself (Config.Validate) before that.
package sandbox
