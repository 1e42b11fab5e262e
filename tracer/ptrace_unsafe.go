//go:build linux

package tracer

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ptrace is the raw request: x/sys has no PTRACE_SEIZE with options nor
// PTRACE_LISTEN wrappers.
func ptrace(req, pid int, addr, data uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(req), uintptr(pid), addr, data, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// sysInfo is the part of struct ptrace_syscall_info (linux/ptrace.h,
// 5.3+) the tracer uses: the kernel's arch-neutral view of a syscall stop,
// so the tracer reads no registers and needs no per-arch register code.
// Layout: op u8, pad, arch u32, ip u64, sp u64 at 0..24, then the union:
// entry/seccomp {nr u64; args [6]u64; (ret_data u32)}, exit {rval s64;
// is_error u8}; 88 bytes with padding.
type sysInfo struct {
	op      uint8
	nr      uint64
	args    [6]uint64
	rval    int64
	isError uint8
}

func getSyscallInfo(tid int) (sysInfo, error) {
	var raw [88]byte
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GET_SYSCALL_INFO, uintptr(tid),
		uintptr(len(raw)), uintptr(unsafe.Pointer(&raw[0])), 0, 0)
	if e != 0 {
		return sysInfo{}, e
	}
	var s sysInfo
	s.op = raw[0]
	le := func(off int) uint64 { return binary.LittleEndian.Uint64(raw[off:]) }
	switch s.op {
	case unix.PTRACE_SYSCALL_INFO_ENTRY, unix.PTRACE_SYSCALL_INFO_SECCOMP:
		s.nr = le(24)
		for i := range s.args {
			s.args[i] = le(32 + 8*i)
		}
	case unix.PTRACE_SYSCALL_INFO_EXIT:
		s.rval = int64(le(24))
		s.isError = raw[32]
	}
	return s, nil
}

// readMem copies len(buf) bytes at addr in tid's memory.
func readMem(tid int, addr uint64, buf []byte) (int, error) {
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	return unix.ProcessVMReadv(tid, local, remote, 0)
}
