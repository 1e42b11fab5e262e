package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits on what is copied out of a tracee per call: a hostile program
// must not make the tracer allocate without bound.
const (
	maxPath   = 4096
	maxArgs   = 4096
	maxArgLen = 128 << 10
	maxArgv   = 1 << 20 // bytes of argv in one record
)

// decode fills r from the arguments of syscall name, read at entry. The
// tracee is stopped, but other threads of it are not: what is read here is
// what the memory held at that moment (see the package doc, TOCTOU).
func decode(r *Record, tid int, name string, a [6]uint64) {
	switch name {
	case "execve":
		r.Path = resolve(tid, unix.AT_FDCWD, readString(tid, a[0], maxPath), false)
		r.Argv = readArgv(tid, a[1])
		r.Cwd = cwdOf(tid)
	case "execveat":
		r.Path = resolve(tid, int32(a[0]), readString(tid, a[1], maxPath), a[4]&unix.AT_EMPTY_PATH != 0)
		r.Argv = readArgv(tid, a[2])
		r.Cwd = cwdOf(tid)
	case "open":
		r.Path = resolve(tid, unix.AT_FDCWD, readString(tid, a[0], maxPath), false)
		r.Flags = OpenFlags(a[1])
	case "creat":
		r.Path = resolve(tid, unix.AT_FDCWD, readString(tid, a[0], maxPath), false)
		r.Flags = OpenFlags(unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC)
	case "openat":
		r.Path = resolve(tid, int32(a[0]), readString(tid, a[1], maxPath), false)
		r.Flags = OpenFlags(a[2])
	case "openat2":
		r.Path = resolve(tid, int32(a[0]), readString(tid, a[1], maxPath), false)
		var how [8]byte // struct open_how starts with u64 flags
		if n, _ := readMem(tid, a[2], how[:]); n == len(how) {
			r.Flags = OpenFlags(binary.LittleEndian.Uint64(how[:]))
		}
	case "connect":
		r.Addr = readSockaddr(tid, a[1], a[2])
	default:
		r.Args = append([]uint64(nil), a[:]...)
	}
}

// resolve makes p absolute the way the kernel would start its lookup:
// from the tracee's cwd (AT_FDCWD) or from the directory open on dirfd.
// Paths are as the tracee sees them (its mount namespace's view).
func resolve(tid int, dirfd int32, p string, emptyPath bool) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	var base string
	if dirfd == unix.AT_FDCWD {
		base = cwdOf(tid)
	} else {
		base, _ = os.Readlink("/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.Itoa(int(dirfd)))
	}
	if p == "" && emptyPath {
		return base
	}
	if base == "" {
		return p
	}
	return path.Join(base, p)
}

func cwdOf(tid int) string {
	cwd, _ := os.Readlink("/proc/" + strconv.Itoa(tid) + "/cwd")
	return cwd
}

// readString reads a NUL-terminated string at addr, page by page (a
// string may end just before an unmapped page).
func readString(tid int, addr uint64, limit int) string {
	if addr == 0 {
		return ""
	}
	var out []byte
	var page [4096]byte
	for len(out) < limit {
		n := 4096 - int(addr%4096)
		if n > limit-len(out) {
			n = limit - len(out)
		}
		got, err := readMem(tid, addr, page[:n])
		if got <= 0 || err != nil && got == 0 {
			break
		}
		if i := bytes.IndexByte(page[:got], 0); i >= 0 {
			return string(append(out, page[:i]...))
		}
		out = append(out, page[:got]...)
		addr += uint64(got)
	}
	return string(out)
}

// readArgv reads a NULL-terminated array of string pointers.
func readArgv(tid int, addr uint64) []string {
	if addr == 0 {
		return nil
	}
	argv := []string{}
	total := 0
	var ptr [8]byte
	for i := 0; i < maxArgs; i++ {
		if n, _ := readMem(tid, addr+uint64(8*i), ptr[:]); n != len(ptr) {
			break
		}
		p := binary.LittleEndian.Uint64(ptr[:])
		if p == 0 {
			break
		}
		s := readString(tid, p, maxArgLen)
		total += len(s)
		if total > maxArgv {
			argv = append(argv, "...")
			break
		}
		argv = append(argv, s)
	}
	return argv
}

// readSockaddr renders a connect address: "inet 1.2.3.4:80",
// "inet6 [::1]:80", "unix /run/x.sock", "unix @abstract", or "family N".
func readSockaddr(tid int, addr, size uint64) string {
	if addr == 0 || size < 2 {
		return ""
	}
	if size > 128 {
		size = 128
	}
	buf := make([]byte, size)
	n, _ := readMem(tid, addr, buf)
	if n < 2 {
		return ""
	}
	buf = buf[:n]
	return FormatSockaddr(buf)
}

// FormatSockaddr renders raw struct sockaddr bytes (family in native
// order, port big-endian).
func FormatSockaddr(buf []byte) string {
	if len(buf) < 2 {
		return ""
	}
	family := binary.LittleEndian.Uint16(buf)
	switch family {
	case unix.AF_INET:
		if len(buf) < 8 {
			break
		}
		ip := netip.AddrFrom4([4]byte(buf[4:8]))
		return "inet " + netip.AddrPortFrom(ip, binary.BigEndian.Uint16(buf[2:])).String()
	case unix.AF_INET6:
		if len(buf) < 24 {
			break
		}
		ip := netip.AddrFrom16([16]byte(buf[8:24]))
		return "inet6 " + netip.AddrPortFrom(ip, binary.BigEndian.Uint16(buf[2:])).String()
	case unix.AF_UNIX:
		p := buf[2:]
		if len(p) == 0 {
			return "unix (unnamed)"
		}
		if p[0] == 0 {
			return "unix @" + string(bytes.TrimRight(p[1:], "\x00"))
		}
		if i := bytes.IndexByte(p, 0); i >= 0 {
			p = p[:i]
		}
		return "unix " + string(p)
	}
	return fmt.Sprintf("family %d", family)
}

var openFlagNames = []struct {
	bit  uint64
	name string
}{
	{unix.O_CREAT, "O_CREAT"}, {unix.O_EXCL, "O_EXCL"}, {unix.O_NOCTTY, "O_NOCTTY"},
	{unix.O_TRUNC, "O_TRUNC"}, {unix.O_APPEND, "O_APPEND"}, {unix.O_NONBLOCK, "O_NONBLOCK"},
	{unix.O_DSYNC, "O_DSYNC"}, {unix.O_DIRECT, "O_DIRECT"}, {unix.O_LARGEFILE, "O_LARGEFILE"},
	{unix.O_NOFOLLOW, "O_NOFOLLOW"}, {unix.O_NOATIME, "O_NOATIME"}, {unix.O_CLOEXEC, "O_CLOEXEC"},
	{unix.O_PATH, "O_PATH"},
}

// OpenFlags renders open(2) flags as "O_WRONLY|O_CREAT|O_TRUNC"; unknown
// bits are shown in hex.
func OpenFlags(f uint64) string {
	var parts []string
	switch f & unix.O_ACCMODE {
	case unix.O_RDONLY:
		parts = append(parts, "O_RDONLY")
	case unix.O_WRONLY:
		parts = append(parts, "O_WRONLY")
	case unix.O_RDWR:
		parts = append(parts, "O_RDWR")
	default:
		parts = append(parts, "O_ACCMODE")
	}
	rest := f &^ unix.O_ACCMODE
	// O_TMPFILE includes O_DIRECTORY; O_SYNC includes O_DSYNC.
	if rest&unix.O_TMPFILE == unix.O_TMPFILE {
		parts = append(parts, "O_TMPFILE")
		rest &^= unix.O_TMPFILE
	} else if rest&unix.O_DIRECTORY != 0 {
		parts = append(parts, "O_DIRECTORY")
		rest &^= unix.O_DIRECTORY
	}
	if rest&unix.O_SYNC == unix.O_SYNC {
		parts = append(parts, "O_SYNC")
		rest &^= unix.O_SYNC
	}
	for _, fl := range openFlagNames {
		if rest&fl.bit != 0 {
			parts = append(parts, fl.name)
			rest &^= fl.bit
		}
	}
	if rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", rest))
	}
	return strings.Join(parts, "|")
}
