// Package seccomp builds the classic-BPF seccomp program that art hands to
// bwrap with --seccomp FD: the sandbox's deny-list, plus SECCOMP_RET_TRACE
// for the system calls the tracer wants to see.
//
// The program, in order:
//
//  1. Architecture check. A filter compares syscall numbers, and numbers
//     mean different calls on different ABIs, so any other audit arch is
//     killed outright. On x86_64 the x32 ABI shares the audit arch but sets
//     bit 30 of the number (0x40000000); those calls are killed too, or
//     "x32 keyctl" would slip past a check for the x86_64 keyctl number.
//  2. The deny-list (Denied), answered with EPERM. ioctl is denied only for
//     TIOCSTI and TIOCLINUX (pushing bytes into the terminal's input queue
//     escapes the sandbox through the host's shell). The kernel compares
//     the cmd argument as a 32-bit unsigned int, so the filter compares
//     only the low 32 bits: a caller that sets high bits (0x1_00005412)
//     still reaches TIOCSTI in the kernel and must still be refused.
//  3. SECCOMP_RET_TRACE for traced calls: the names in Policy.Trace, the
//     opens with write intent when Policy.WriteOpens (flags checked in the
//     filter, so read-only opens never stop), or everything (TraceAll).
//  4. Allow.
//
// A SECCOMP_RET_TRACE call with no tracer attached fails with ENOSYS, so a
// policy that traces anything must only be used under the tracer.
//
// The program is a flat list of compare-and-return pairs: no forward jump
// ever exceeds a few instructions, so cBPF's 8-bit jump offsets never
// overflow whatever the policy. Its size is bounded by the policy (at most
// one pair per known syscall), far below the kernel's 4096 instructions.
//
// Policies stop syscalls; they are not enforcement of what the tracer
// records. See package tracer for why trace records are an audit trail.
package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// Arch is a system call ABI the filter can be built for.
type Arch struct {
	GOARCH string
	audit  uint32 // AUDIT_ARCH_* value in seccomp_data.arch
	x32Bit bool   // refuse numbers with __X32_SYSCALL_BIT set
	// table makes the name -> number table, names() builds it once: a
	// map literal of ~370 entries at package initialisation cost every art
	// process, whatever the verb, and the other arch's table is never used.
	table     func() map[string]uint32
	namesOnce sync.Once
	byName    map[string]uint32
	openFlags map[string]int // open-like call -> index of its flags argument

	revOnce sync.Once
	reverse map[uint32]string
}

var (
	// AMD64 is x86_64 (x32 calls refused).
	AMD64 = &Arch{GOARCH: "amd64", audit: unix.AUDIT_ARCH_X86_64, x32Bit: true, table: namesX8664,
		openFlags: map[string]int{"open": 1, "openat": 2}}
	// ARM64 is aarch64. It has no open or creat, only openat and openat2.
	ARM64 = &Arch{GOARCH: "arm64", audit: unix.AUDIT_ARCH_AARCH64, table: namesAArch64,
		openFlags: map[string]int{"openat": 2}}
)

// Native returns the Arch of the running binary, or nil on an unsupported one.
func Native() *Arch {
	switch runtime.GOARCH {
	case "amd64":
		return AMD64
	case "arm64":
		return ARM64
	}
	return nil
}

// names returns a's name -> number table.
func (a *Arch) names() map[string]uint32 {
	a.namesOnce.Do(func() { a.byName = a.table() })
	return a.byName
}

// Lookup returns the number of the named system call on a.
func (a *Arch) Lookup(name string) (uint32, bool) {
	nr, ok := a.names()[name]
	return nr, ok
}

// Name returns the name of system call nr on a, or "syscall_NR" when the
// table does not know it.
func (a *Arch) Name(nr uint32) string {
	a.revOnce.Do(func() {
		a.reverse = make(map[uint32]string, len(a.names()))
		for n, nr := range a.names() {
			a.reverse[nr] = n
		}
	})
	if n, ok := a.reverse[nr]; ok {
		return n
	}
	return fmt.Sprintf("syscall_%d", nr)
}

// Syscalls returns the names a knows, sorted.
func (a *Arch) Syscalls() []string {
	out := make([]string, 0, len(a.names()))
	for n := range a.names() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the number of the named system call on the native arch.
func Lookup(name string) (uint32, bool) {
	if a := Native(); a != nil {
		return a.Lookup(name)
	}
	return 0, false
}

// Syscalls returns the system call names of the native arch, sorted.
func Syscalls() []string {
	if a := Native(); a != nil {
		return a.Syscalls()
	}
	return nil
}

// Denied lists the system calls the sandbox refuses with EPERM (issue 4):
// kernel keyrings (shared across the host's namespaces), eBPF and perf
// (kernel attack surface), userfaultfd (stalls kernel code for exploits),
// the new mount API, kexec and module loading. ioctl is denied separately,
// for TIOCSTI and TIOCLINUX only.
var Denied = []string{
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
	"kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
}

// DeniedIoctls are the ioctl commands refused with EPERM, compared on the
// low 32 bits of the argument.
var DeniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// WriteIntent is the open flags mask that makes an open "for writing".
const WriteIntent = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC

// Policy says which system calls stop for the tracer. The zero Policy
// traces nothing: only the deny-list applies.
type Policy struct {
	// Trace names system calls that always stop (e.g. "execve").
	Trace []string
	// WriteOpens stops open/openat when their flags include WriteIntent,
	// and every creat and openat2 (openat2's flags sit behind a pointer
	// the filter cannot read).
	WriteOpens bool
	// TraceAll stops every allowed system call. Slow: see docs/tracer.md.
	TraceAll bool
}

// DefaultTrace is the default traced set (issue 5): execs and connects by
// name, plus opens with write intent.
func DefaultTrace() Policy {
	return Policy{Trace: []string{"execve", "execveat", "connect"}, WriteOpens: true}
}

// Tracing reports whether p makes any system call stop for a tracer.
func (p Policy) Tracing() bool { return p.TraceAll || p.WriteOpens || len(p.Trace) > 0 }

// Program returns p's filter for the native arch as the raw array of
// struct sock_filter that bwrap's --seccomp FD reads.
func (p Policy) Program() ([]byte, error) {
	a := Native()
	if a == nil {
		return nil, fmt.Errorf("seccomp on %s: %w", runtime.GOARCH, ErrUnsupportedArch)
	}
	return p.ProgramFor(a)
}

// ProgramFor returns p's filter for arch a. A name in p.Trace that a does
// not know is an error naming it.
func (p Policy) ProgramFor(a *Arch) ([]byte, error) {
	insns, err := p.build(a)
	if err != nil {
		return nil, err
	}
	return Encode(insns), nil
}

// seccomp_data offsets (include/uapi/linux/seccomp.h): nr, arch,
// instruction pointer, then six 64-bit args. Little-endian on both arches,
// so an argument's low word is at its own offset.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i int) uint32 { return uint32(offArgs + 8*i) }

const (
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retTrace = unix.SECCOMP_RET_TRACE
	retAllow = unix.SECCOMP_RET_ALLOW
)

func (p Policy) build(a *Arch) ([]unix.SockFilter, error) {
	var prog []unix.SockFilter
	emit := func(f ...unix.SockFilter) { prog = append(prog, f...) }

	emit(load(offArch), jeq(a.audit, 1, 0), ret(retKill))
	emit(load(offNr))
	if a.x32Bit {
		emit(jge(0x40000000, 0, 1), ret(retKill))
	}
	for _, name := range Denied {
		nr, ok := a.Lookup(name)
		if !ok {
			continue // not on this arch: nothing to deny
		}
		emit(jeq(nr, 0, 1), ret(retEPERM))
	}
	// ioctl: check the command, then fall through to the traced section
	// (with the number reloaded) so TraceAll still sees allowed ioctls.
	if nr, ok := a.Lookup("ioctl"); ok {
		skip := uint8(1 + 2*len(DeniedIoctls) + 1)
		emit(jeq(nr, 0, skip), load(argLow(1)))
		for _, cmd := range DeniedIoctls {
			emit(jeq(cmd, 0, 1), ret(retEPERM))
		}
		emit(load(offNr))
	}

	if p.TraceAll {
		emit(ret(retTrace))
		return prog, nil
	}
	seen := map[uint32]bool{}
	for _, name := range p.Trace {
		nr, ok := a.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("trace syscall %q on %s: %w", name, a.GOARCH, ErrUnknownSyscall)
		}
		if seen[nr] {
			continue
		}
		seen[nr] = true
		emit(jeq(nr, 0, 1), ret(retTrace))
	}
	if p.WriteOpens {
		for _, name := range []string{"creat", "openat2"} {
			if nr, ok := a.Lookup(name); ok && !seen[nr] {
				emit(jeq(nr, 0, 1), ret(retTrace))
			}
		}
		for _, name := range []string{"open", "openat"} {
			nr, ok := a.Lookup(name)
			if !ok || seen[nr] {
				continue
			}
			// nr == open ? (flags & WriteIntent ? trace : allow) : next
			emit(jeq(nr, 0, 4),
				load(argLow(a.openFlags[name])),
				jset(WriteIntent, 0, 1),
				ret(retTrace),
				ret(retAllow))
		}
	}
	emit(ret(retAllow))
	return prog, nil
}

func load(off uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
}

func jeq(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

func jge(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

func jset(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

func ret(k uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k}
}

// Encode lays out insns as struct sock_filter {u16 code; u8 jt; u8 jf;
// u32 k} in native (little-endian on every supported arch) byte order.
func Encode(insns []unix.SockFilter) []byte {
	out := make([]byte, 0, 8*len(insns))
	for _, f := range insns {
		out = binary.LittleEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.LittleEndian.AppendUint32(out, f.K)
	}
	return out
}
