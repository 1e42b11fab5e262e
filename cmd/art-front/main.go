// Command art-front is installed as art: a small program that serves
// `art run --warm` through the branch's warm daemon without starting the
// full art, and executes the full art (art-core, beside it) for
// everything else. The full binary links the store, FUSE and the MCP SDK:
// its start-up alone was most of a warm run's cost over bare bwrap
// (docs/benchmarks.md, "Start-up: a thin front for art run --warm").
//
// The front parses almost nothing: it finds the daemon of the store and
// branch the run names (-d, -b, --warm) and sends it the raw run - its
// argv, environment, working directory, umask, ignored signals and what
// a sandbox inherits from it (warmwire.ProcKey) - with its stdin, stdout
// and stderr. The daemon parses the run with art run's own code and
// either serves it on the sandbox it started ahead, answering with what
// art would have written to stderr and its exit status, or says
// fallback, having done nothing; then, as on any other doubt before the
// daemon took the run, the front executes the full art with the same
// arguments and environment.
package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/artrt/art/internal/warmwire"
	"golang.org/x/sys/unix"
)

// fullBinary is the full art's file name, beside the front's.
const fullBinary = "art-core"

func main() {
	if !utf8Inputs() {
		// The request is JSON, which turns bytes that are not UTF-8
		// into U+FFFD: the full art runs it with them as they are.
		execFull()
	}
	if sock, ok := warmSocket(os.Args[1:]); ok {
		sigs := catchSignals()
		code, served := runWarm(sock, os.Args[1:], sigs)
		if served {
			os.Exit(code)
		}
		if sig := sigs.stop(); sig != 0 {
			// Interrupted before anyone ran the command: so is the run.
			dieOf(sig)
		}
	}
	execFull()
}

// utf8Inputs says whether the front's arguments, environment and working
// directory are valid UTF-8 (an unreadable directory counts as such: the
// daemon is not asked then).
func utf8Inputs() bool {
	cwd, _ := os.Getwd()
	for _, s := range append(append([]string{cwd}, os.Args...), os.Environ()...) {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// signals are the signals art run passes on to its command, caught by
// the front from its start as the full art catches them from its own;
// the first is remembered, so that one caught before the daemon answered
// a fallback is not lost in the exec of the full art.
type signals struct {
	c     chan os.Signal
	fwd   chan syscall.Signal // to the daemon, once a request is sent
	first atomic.Int32
	done  chan struct{}
}

func catchSignals() *signals {
	s := &signals{c: make(chan os.Signal, 4), fwd: make(chan syscall.Signal, 4), done: make(chan struct{})}
	signal.Notify(s.c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		defer close(s.done)
		for sig := range s.c {
			n := sig.(syscall.Signal)
			s.first.CompareAndSwap(0, int32(n))
			select {
			case s.fwd <- n:
			default: // the daemon has passed on enough of them
			}
		}
	}()
	return s
}

// stop stops catching and returns the first signal caught, or 0.
func (s *signals) stop() syscall.Signal {
	signal.Stop(s.c) // no more sends on s.c when it returns
	close(s.c)
	<-s.done
	return syscall.Signal(s.first.Load())
}

// dieOf ends the front as the signal's default action would, so that its
// parent sees the interruption; when the signal does not end it (it was
// ignored when the front started, or is SIGQUIT, whose Go default dumps
// goroutines), with 128+sig.
func dieOf(sig syscall.Signal) {
	if sig != syscall.SIGQUIT {
		syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond) // delivery is asynchronous
	}
	os.Exit(128 + int(sig))
}

// execFull replaces this process with the full art, same argv and
// environment.
func execFull() {
	exe, err := os.Executable()
	if err == nil {
		full := filepath.Join(filepath.Dir(exe), fullBinary)
		err = syscall.Exec(full, os.Args, os.Environ())
		err = &os.PathError{Op: "exec", Path: full, Err: err}
	}
	os.Stderr.WriteString("art: cannot run the full art binary (" + fullBinary + " is installed beside art): " + err.Error() + "\n")
	os.Exit(1)
}

// warmSocket is the socket of the warm daemon args (art's, after the
// program name) would use, when they are an art run with --warm and -d
// whose daemon's socket exists. The recognition is deliberately loose:
// the daemon parses args with art run's own flags and falls back on any
// difference from the run it serves.
func warmSocket(args []string) (string, bool) {
	if len(args) < 2 || args[0] != "run" {
		return "", false
	}
	var db, branch string
	warm := false
	for i := 1; i < len(args) && args[i] != "--"; i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		take := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch name {
		case "d", "db":
			db = take()
		case "b", "branch":
			branch = take()
		case "warm":
			warm = take() != ""
		}
	}
	if !warm || db == "" {
		return "", false
	}
	if branch == "" {
		branch = "main"
	}
	sock := warmwire.Socket(db, branch)
	if st, err := os.Stat(sock); err != nil || st.Mode().Type() != os.ModeSocket {
		return "", false
	}
	return sock, true
}

// request is the daemon's "exec" request (session's warmRequest).
type request struct {
	Op     string   `json:"op"`
	Args   []string `json:"args,omitempty"`
	Env    []string `json:"env,omitempty"`
	Cwd    string   `json:"cwd,omitempty"`
	Umask  int      `json:"umask,omitempty"`
	Proc   string   `json:"proc,omitempty"`
	SigIgn uint64   `json:"sig_ign,omitempty"`
	Signal int      `json:"signal,omitempty"`
}

// reply is the part of the daemon's answer the front reads.
type reply struct {
	Fallback string `json:"fallback,omitempty"`
	Error    string `json:"error,omitempty"`
	Code     int    `json:"code,omitempty"` // the daemon wrote art's messages to our stderr
}

// runWarm sends the raw run to the daemon at sock and waits for its end,
// passing on the signals sigs catches. served false: the daemon did not
// take the run (nothing was done), the full art must.
func runWarm(sock string, args []string, sigs *signals) (int, bool) {
	cwd, err := os.Getwd()
	if err != nil {
		return 0, false
	}
	umask, sigIgn, ok := warmwire.Status()
	if umask < 0 || !ok {
		return 0, false
	}
	fd, err := dial(sock)
	if err != nil {
		return 0, false
	}
	// Our environment goes only to a daemon of our own user.
	if cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED); err != nil || int(cred.Uid) != os.Geteuid() {
		unix.Close(fd)
		return 0, false
	}
	msg := appendRequest(make([]byte, 0, 8<<10), request{Op: "exec", Args: args, Env: os.Environ(), Cwd: cwd, Umask: umask,
		Proc: warmwire.ProcKey(), SigIgn: sigIgn})
	msg = append(msg, '\n')
	n, err := unix.SendmsgN(fd, msg, unix.UnixRights(0, 1, 2), nil, unix.MSG_NOSIGNAL)
	if err == nil {
		err = writeAll(fd, msg[n:])
	}
	if err != nil {
		unix.Close(fd)
		return 0, false
	}
	// From here on fd stays open until the front exits or executes the
	// full art (it is close-on-exec): the goroutine may write a signal
	// to it at any time, and a descriptor closed under it could be
	// another file's by then.
	go func() {
		for s := range sigs.fwd {
			writeAll(fd, append(appendRequest(nil, request{Op: "signal", Signal: int(s)}), '\n'))
		}
	}()
	r, err := readReply(fd)
	if err != nil {
		// The daemon may have run the command: never run it again.
		os.Stderr.WriteString("art: warm daemon: no answer: " + err.Error() + "\n")
		return 1, true
	}
	if r.Fallback != "" || r.Error != "" {
		// A daemon serving raw runs answers an exec only with its end or
		// a fallback; an error is an older daemon's "unknown request",
		// which did nothing either.
		return 0, false
	}
	return r.Code, true
}

// dial connects a blocking stream socket to the unix socket at path,
// waiting at most 5 s for a daemon whose backlog is full (the net
// package's dialer starts the runtime's poller, a measurable part of a
// warm run's front: "A lean front").
func dial(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	limit := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
	if err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &limit); err == nil {
		for {
			// An interrupted wait for the backlog has not connected.
			if err = unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != unix.EINTR {
				break
			}
		}
	}
	if err == nil {
		// Writes wait as long as they must, as before.
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{})
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// writeAll writes b to the socket fd whole; a daemon gone is EPIPE, not
// SIGPIPE.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.SendmsgN(fd, b, nil, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// maxReply bounds the daemon's answer (its JSON line).
const maxReply = 16 << 20

// readReply reads the daemon's answer: one line of JSON.
func readReply(fd int) (reply, error) {
	b, err := warmwire.ReadFD(fd, maxReply, true)
	if err == unix.EFBIG {
		return reply{}, errReply
	}
	if err != nil {
		return reply{}, err
	}
	return parseReply(b)
}
