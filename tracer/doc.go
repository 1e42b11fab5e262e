// Package tracer follows a command and every process it starts with ptrace,
// and reports what they did as Records: each program executed (argv, cwd,
// parent), each traced system call with decoded arguments (paths resolved
// against the caller's cwd or dirfd, open flags, connect addresses) and its
// result, and each process's exit.
//
// Which calls stop is decided in the kernel by the seccomp program from
// package seccomp (SECCOMP_RET_TRACE), installed by bwrap --seccomp before
// it execs the sandboxed command: an untraced call never leaves the
// kernel, so the default set (execs, connects, opens with write intent)
// costs little. A traced call costs two stops (seccomp entry, syscall
// exit) and a few /proc and process_vm_readv reads; "trace all" pays that
// on every call (see docs/tracer.md for measured figures).
//
// Threads. All ptrace requests come from one goroutine locked to its OS
// thread (ptrace is per-thread). The thread is never unlocked: if the
// loop ends abnormally the thread exits, and PTRACE_O_EXITKILL kills every
// tracee, as it does when art dies. Records reach the Sink from a second
// goroutine, so a slow sink never stalls a traced program.
//
// Attachment. os/exec attaches with PTRACE_TRACEME; the tracer converts
// that to PTRACE_SEIZE before the first instruction runs, so job control
// works inside (group-stops are held with PTRACE_LISTEN rather than
// resumed) and new tasks start with PTRACE_EVENT_STOP instead of a SIGSTOP
// that could leak to the program. Signals are re-injected unchanged, so
// exit codes and deaths by signal are what they would be untraced.
//
// Registers. Arguments and results come from PTRACE_GET_SYSCALL_INFO
// (Linux 5.3+), the kernel's arch-neutral view of a syscall stop; syscall
// numbers are named with package seccomp's per-arch tables. No register
// layout is read, so amd64 and arm64 share all code.
//
// Audit trail, not enforcement. The arguments the tracer reads can change
// after it reads them: another thread of the tracee (or another process
// sharing the memory) may rewrite a path or an argv string between the
// seccomp stop and the moment the kernel copies it (TOCTOU), and a path
// may be re-pointed by a symlink or rename in between. Records are what
// the tracee appeared to do, good for attribution and review; everything
// that must hold is enforced by seccomp's EPERM rules, the namespaces and
// the read-only binds, which the tracee cannot race.
package tracer
