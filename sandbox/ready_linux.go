package sandbox

// A sandbox started ahead (docs/architecture.md, "Warm mounts"): bwrap
// with the whole policy of a run - namespaces, mounts, seccomp, uid,
// cgroup - whose command is a stub that blocks until it is handed the
// real command, then execs it. What bwrap spends before its command
// starts (10-14 ms of a warm run's start-up, idle) is then spent before
// the run was asked for. The stub is art's own binary, re-executed in
// the sandbox through an fd (the binary may live under /tmp, which the
// sandbox covers): StubArg.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// StubArg is the hidden argument art's main checks first: the process is
// a ready sandbox's stub (RunStub).
const StubArg = "__sandbox-stub"

// The stub's fds, as bwrap hands them on (startWith's pre).
const (
	stubExeFD = 3 // art's binary, which bwrap executed through /proc/self/fd
	stubCtlFD = 4 // the socket the command comes on
)

// Handoff is what a ready sandbox's stub is told to run. On the wire it
// follows a 4-byte length, and its stdin, stdout and stderr come with it
// (SCM_RIGHTS).
type Handoff struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"` // the whole environment (Config.Environ)
	Cwd   string   `json:"cwd"`
	Umask int      `json:"umask"`
	// SigIgn is the set of signals (bit N-1 for signal N) the command
	// starts with ignored: what it would inherit from the process that
	// started its bwrap, not from the one that started the ready one.
	SigIgn uint64 `json:"sig_ign"`
}

// Ready is a sandbox started ahead, waiting for its command.
type Ready struct {
	p   *Process
	ctl *os.File
	key string
}

// ReadyKey is everything a sandbox started with c depends on but its
// command, environment and working directory, which the stub takes at
// the handoff: two configurations of equal keys start the same sandbox.
func ReadyKey(c *Config) string {
	cc := *c
	cc.Command, cc.Env, cc.Cwd = []string{"-"}, nil, ""
	h := sha256.New()
	seccompFD := -1
	if len(c.Seccomp) > 0 {
		seccompFD = 3
	}
	for _, a := range cc.args(seccompFD, nil) {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	fmt.Fprintf(h, "%s\x00%+v\x00", c.Bwrap, c.Limits)
	h.Write(c.Seccomp)
	return hex.EncodeToString(h.Sum(nil))
}

// StartReady starts a sandbox with c's policy whose command is the stub,
// and returns once the stub is waiting for its command. c's Command and
// Env are not used (the stub gets them at Run); c.OwnsTTY is refused.
func StartReady(c *Config) (*Ready, error) {
	if c.OwnsTTY {
		return nil, errors.New("ready sandbox: not with a terminal")
	}
	exe, err := openStub()
	if err != nil {
		return nil, fmt.Errorf("ready sandbox: %w", err)
	}
	defer exe.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("ready sandbox: %w", err)
	}
	ctl, stub := os.NewFile(uintptr(pair[0]), "ready-ctl"), os.NewFile(uintptr(pair[1]), "ready-stub")
	cc := *c
	cc.Command = []string{fmt.Sprintf("/proc/self/fd/%d", stubExeFD), StubArg}
	cc.Env = nil // the command's comes at Run; bwrap's arguments are readable inside
	p, err := startWith(&cc, IO{}, nil, []*os.File{exe, stub})
	stub.Close()
	if err != nil {
		ctl.Close()
		return nil, err
	}
	r := &Ready{p: p, ctl: ctl, key: ReadyKey(c)}
	// The stub says it is waiting with one byte; bwrap's own failure
	// (or the stub's) ends the sandbox instead.
	got := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := ctl.Read(b[:])
		got <- err
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case err = <-got:
	case <-t.C:
		err = errors.New("the stub did not start in 30s")
	}
	if err != nil {
		r.Discard()
		res, _ := p.Wait()
		return nil, fmt.Errorf("ready sandbox: %v (exit %d)", err, res.ExitCode)
	}
	return r, nil
}

// StubBinary is the name of the stub's own small binary
// (cmd/art-sandbox-stub), looked for beside the running binary.
const StubBinary = "art-sandbox-stub"

// openStub opens the stub's binary: StubBinary beside this process's
// binary when it is there (a regular executable file), else this binary
// itself, which runs RunStub when started with StubArg.
func openStub() (*os.File, error) {
	if self, err := os.Executable(); err == nil {
		f, err := os.Open(filepath.Join(filepath.Dir(self), StubBinary))
		if err == nil {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return f, nil
			}
			f.Close()
		}
	}
	return os.Open("/proc/self/exe")
}

// Key is ReadyKey of the configuration r was started with.
func (r *Ready) Key() string { return r.key }

// LimitedBy is the Process's LimitedBy.
func (r *Ready) LimitedBy() string { return r.p.LimitedBy() }

// Discard kills the ready sandbox and waits for it (its init reaped, its
// cgroup removed).
func (r *Ready) Discard() {
	r.ctl.Close()
	r.p.kill()
	r.p.Wait()
}

// Run hands h to the stub, which makes stdio its fds 0, 1 and 2 and
// execs the command; the Process is then the command's, as Start's would
// be. On an error the sandbox is discarded and nothing of the command has
// run.
func (r *Ready) Run(h Handoff, stdio [3]*os.File) (*Process, error) {
	select {
	case <-r.p.Done():
		r.Discard()
		return nil, errors.New("ready sandbox: it exited before it was used")
	default:
	}
	msg, err := json.Marshal(h)
	if err != nil {
		r.Discard()
		return nil, err
	}
	buf := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
	buf = append(buf, msg...)
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	r.p.handed.Store(time.Now().UnixNano())
	err = sendAll(int(r.ctl.Fd()), buf, rights)
	r.ctl.Close() // the stub's copy goes with its exec
	if err != nil {
		r.Discard()
		return nil, fmt.Errorf("ready sandbox: handoff: %w", err)
	}
	return r.p, nil
}

// sendAll writes buf on a stream socket, rights with its first byte.
func sendAll(fd int, buf, rights []byte) error {
	for len(buf) > 0 {
		n, err := unix.SendmsgN(fd, buf, rights, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		buf, rights = buf[n:], nil
	}
	return nil
}

// RunStub is a ready sandbox's command until it gets the real one: it
// says it is waiting, receives the command and its stdio, and execs it
// as bwrap would have. Nothing of the handoff is left in the command:
// the socket and every other fd of the stub above 2 are close-on-exec,
// the environment is the one received, and the binary's fd is closed
// first. It never returns.
func RunStub() {
	die := func(format string, a ...any) {
		// bwrap's own form, for the failures bwrap would report.
		fmt.Fprintf(os.Stderr, "bwrap: "+format+"\n", a...)
		os.Exit(1)
	}
	unix.Close(stubExeFD)
	if _, err := unix.Write(stubCtlFD, []byte{1}); err != nil {
		os.Exit(1)
	}
	var h Handoff
	fds, err := receiveHandoff(stubCtlFD, &h)
	if err != nil || len(fds) != 3 || len(h.Argv) == 0 {
		// The daemon discarded us, or closed the socket: nothing ran.
		os.Exit(1)
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, i, 0); err != nil {
			os.Exit(1)
		}
		unix.Close(fd)
	}
	syscall.Umask(h.Umask)
	if err := os.Chdir(h.Cwd); err != nil {
		die("Can't chdir to %s: %s", h.Cwd, errnoText(err))
	}
	if err := closeInheritedOnExec(); err != nil {
		os.Exit(1)
	}
	setIgnored(h.SigIgn)
	execvp(h.Argv, h.Env, die)
}

// setIgnored makes exactly the signals of mask ignored, as an exec
// leaves them: an exec resets handled signals to their default and keeps
// ignored ones ignored, so a signal the stub's process ignores (its
// daemon's SIGHUP and SIGPIPE, inherited) is set back to the default and
// one of mask is ignored. Raw rt_sigaction: Go's os/signal would keep
// its own handlers. Only the handler is set (the struct's first word on
// every architecture), with no flags and an empty mask.
func setIgnored(mask uint64) {
	const sigDfl, sigIgn = 0, 1
	for sig := 1; sig <= 64; sig++ {
		if sig == int(syscall.SIGKILL) || sig == int(syscall.SIGSTOP) {
			continue
		}
		var old, act [4]uint64
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		want := mask&(1<<(sig-1)) != 0
		switch {
		case want:
			act[0] = sigIgn
		case old[0] == sigIgn:
			act[0] = sigDfl
		default:
			continue // a handler, reset by the exec, or the default
		}
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
}

// receiveHandoff reads a handoff (and the fds sent with it) from fd.
func receiveHandoff(fd int, h *Handoff) ([]int, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	var data []byte
	var fds []int
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("closed")
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				got, err := unix.ParseUnixRights(&m)
				if err != nil {
					return nil, err
				}
				fds = append(fds, got...)
			}
		}
		data = append(data, buf[:n]...)
		if len(data) >= 4 {
			want := int(binary.BigEndian.Uint32(data))
			if len(data) >= 4+want {
				return fds, json.NewDecoder(bytes.NewReader(data[4 : 4+want])).Decode(h)
			}
		}
	}
}

// execvp execs argv as bwrap's execvp would: a name without a slash is
// looked for in env's PATH, and a file the kernel cannot execute
// (ENOEXEC: a script without #!) is run by /bin/sh.
func execvp(argv, env []string, die func(string, ...any)) {
	name := argv[0]
	try := func(p string) error {
		err := syscall.Exec(p, argv, env)
		if err == syscall.ENOEXEC {
			err = syscall.Exec("/bin/sh", append([]string{"sh", p}, argv[1:]...), env)
		}
		return err
	}
	if strings.Contains(name, "/") {
		die("execvp %s: %s", name, errnoText(try(name)))
	}
	path := "/bin:/usr/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var last error = syscall.ENOENT
	sawAccess := false
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		err := try(filepath.Join(dir, name))
		switch err {
		case syscall.EACCES:
			sawAccess = true
		case syscall.ENOENT, syscall.ENOTDIR, syscall.ELOOP, syscall.ENAMETOOLONG:
		default:
			die("execvp %s: %s", name, errnoText(err))
		}
		last = err
	}
	if sawAccess {
		last = syscall.EACCES
	} else {
		last = syscall.ENOENT
	}
	die("execvp %s: %s", name, errnoText(last))
}

// errnoText is strerror's text for err (Go's is in lower case).
func errnoText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	s := err.Error()
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// Environ is the command's whole environment inside (what bwrap's
// --setenv gives it), for a ready sandbox's handoff.
func (c *Config) Environ() []string { return c.environ() }

// WorkDir is the command's working directory inside.
func (c *Config) WorkDir() string { return c.cwd() }
