// Package warmwire is what both ends of a warm run (session's warm daemon
// and art's thin front, cmd/art-front) must compute alike, in a package
// that links nothing heavy: the daemon's socket name (the branch's key in
// the lock directory) and what a process's sandbox would inherit from it
// (umask, ignored signals, procKey). The front imports it to find a
// daemon and describe itself without the store, FUSE or the CLI.
package warmwire

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockDir is the directory of branch locks, sessions' state and warm
// daemons' sockets: /run/art for root, else $XDG_RUNTIME_DIR/art, else
// TMPDIR/art-UID (journal.LockDir).
func LockDir() string {
	if os.Geteuid() == 0 {
		return "/run/art"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "art")
	}
	return filepath.Join(os.TempDir(), "art-"+strconv.Itoa(os.Getuid()))
}

// StoreKey names the store at path for its locks: its absolute path with
// every link resolved, so that every process reaching the store by any
// path (relative, through a linked directory or $PWD) names one lock.
func StoreKey(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// BranchKey names branch of the store at path in LockDir: the branch's
// lock file is "lock-" + BranchKey, and a warm daemon's socket and log use
// the same key, so that every path to one store names one file.
func BranchKey(path, branch string) string {
	sum := sum256([]byte(StoreKey(path) + "\x00" + branch))
	const digits = "0123456789abcdef"
	var key [16]byte
	for i, c := range sum[:8] {
		key[2*i], key[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(key[:])
}

// Socket is the socket of the warm daemon of store's branch.
func Socket(store, branch string) string {
	return filepath.Join(LockDir(), "warm-"+BranchKey(store, branch)+".sock")
}

// ProcKey is what a sandbox inherits from the process that starts bwrap
// rather than from its configuration: the bwrap found on PATH, the nice
// value, the resource limits (but RLIMIT_NOFILE's soft one, which Go
// raises in every process and restores for the children it starts, and so
// cannot be compared from inside), the cgroup a sandbox's cgroup is made
// under. A warm daemon's sandbox started ahead serves a client only when
// the client's is the daemon's.
func ProcKey() string {
	bw, _ := exec.LookPath("bwrap")
	b := append(make([]byte, 0, 512), bw...)
	prio, _ := unix.Getpriority(unix.PRIO_PROCESS, 0)
	b = strconv.AppendInt(append(b, 0), int64(prio), 10)
	for res := 0; res < 16; res++ {
		var rl unix.Rlimit
		if unix.Getrlimit(res, &rl) != nil {
			continue
		}
		if res == unix.RLIMIT_NOFILE {
			rl.Cur = 0
		}
		b = strconv.AppendInt(append(b, 0), int64(res), 10)
		b = strconv.AppendUint(append(b, ':'), rl.Cur, 10)
		b = strconv.AppendUint(append(b, ':'), rl.Max, 10)
	}
	cg, _ := readProc("/proc/self/cgroup")
	b = append(append(b, 0), cg...)
	return string(b)
}

// Status is what a process's sandbox inherits from its /proc status: its
// umask (-1 if unknown; umask(2) would set it for a moment under the
// process's other goroutines) and its ignored signals (ok false if
// unknown).
func Status() (umask int, sigIgn uint64, ok bool) {
	umask = -1
	b, err := readProc("/proc/self/status")
	if err != nil {
		return -1, 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(l, "Umask:"); found {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32); err == nil {
				umask = int(n)
			}
		}
		if v, found := strings.CutPrefix(l, "SigIgn:"); found {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			sigIgn, ok = n, err == nil
		}
	}
	return umask, sigIgn, ok
}

// readProc reads a file of /proc whole (at most 1 MiB) with plain system
// calls: os.ReadFile's first open starts the runtime's poller (an epoll
// instance and its wake-up descriptor), which the front uses for nothing
// else: about 0.15 ms of a warm run ("A lean front").
func readProc(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b, err := ReadFD(fd, 1<<20, false)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

// ReadFD reads the blocking descriptor fd with plain system calls (no
// runtime poller, for the front) until its end or, with line, until the
// first newline, which it leaves out with anything read after it. It
// reads at most limit bytes (unix.EFBIG past them); with line, an end
// before the newline is io.ErrUnexpectedEOF.
func ReadFD(fd, limit int, line bool) ([]byte, error) {
	b := make([]byte, 0, 4<<10)
	for {
		if len(b) == cap(b) {
			if len(b) >= limit {
				return nil, unix.EFBIG
			}
			b = append(b, make([]byte, len(b))...)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0 && line:
			return nil, io.ErrUnexpectedEOF
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
		if line {
			if i := bytes.IndexByte(b[len(b)-n:], '\n'); i >= 0 {
				return b[:len(b)-n+i], nil
			}
		}
	}
}
