package tracer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/artrt/art/internal/termtext"
)

// Kind says what a Record describes.
type Kind uint8

const (
	// KindExec: a process started running a program (a successful
	// execve/execveat, or the root command itself). Path, Argv, Cwd set.
	KindExec Kind = iota + 1
	// KindSyscall: one traced system call and its result (a failed exec
	// is a KindSyscall named "execve" with Errno set).
	KindSyscall
	// KindExit: a process (thread group) ended; Status is its wait status.
	KindExit
)

func (k Kind) String() string {
	switch k {
	case KindExec:
		return "exec"
	case KindSyscall:
		return "syscall"
	case KindExit:
		return "exit"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText makes kinds appear by name in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind written by MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	for _, c := range []Kind{KindExec, KindSyscall, KindExit} {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown record kind %q", b)
}

// Record is one observation of the traced tree. Pids are host pids (the
// tracer's pid namespace), which is also what a FUSE request header
// carries, so FS events can be joined to records by pid.
type Record struct {
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`
	PID  int       `json:"pid"`           // process (thread group) id
	TID  int       `json:"tid,omitempty"` // thread, when it differs from PID
	PPID int       `json:"ppid"`          // parent process
	// ExecParent (KindExec): the nearest ancestor that ran a program of
	// its own (or PID itself for a re-exec), for drawing the command
	// tree across processes that forked without exec.
	ExecParent int                `json:"exec_parent,omitempty"`
	Syscall    string             `json:"syscall,omitempty"`
	Path       string             `json:"path,omitempty"`  // resolved against cwd/dirfd at entry
	Flags      string             `json:"flags,omitempty"` // open flags, e.g. O_WRONLY|O_CREAT
	Argv       []string           `json:"argv,omitempty"`
	Cwd        string             `json:"cwd,omitempty"`
	Addr       string             `json:"addr,omitempty"` // connect: "inet 1.2.3.4:80", "inet6 [::1]:80", "unix /p"
	Args       []uint64           `json:"args,omitempty"` // raw arguments of calls without a decoder
	Ret        int64              `json:"ret"`
	Errno      syscall.Errno      `json:"errno,omitempty"`
	Status     syscall.WaitStatus `json:"status,omitempty"` // KindExit
}

// Sink receives records in batches, in the order they happened, from one
// goroutine that is never the ptrace thread: a slow sink delays records,
// never the traced programs' system calls (records queue in memory).
// The slice is the sink's to keep.
type Sink interface {
	Records([]Record)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func([]Record)

// Records calls f.
func (f SinkFunc) Records(rs []Record) { f(rs) }

// Tee returns a Sink that hands each batch to every sink in order.
func Tee(sinks ...Sink) Sink {
	return SinkFunc(func(rs []Record) {
		for _, s := range sinks {
			s.Records(rs)
		}
	})
}

// TextSink writes records as one line each (art's --trace-log format).
// Write errors are counted in Err, not returned: a full disk must not
// stop the traced command.
type TextSink struct {
	W io.Writer

	mu  sync.Mutex
	Err error // first write error
}

// Records formats rs to s.W.
func (s *TextSink) Records(rs []Record) {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.WriteString(s.W, b.String()); err != nil && s.Err == nil {
		s.Err = err
	}
}

// String formats r as one line:
//
//	22:10:01.123456 1234<1200> exec /usr/bin/sh ["sh" "-c" "echo x > f"] cwd=/home/agent/ws
//	22:10:01.124000 1235<1234> openat /home/agent/ws/f O_WRONLY|O_CREAT|O_TRUNC = 3
//	22:10:01.125000 1236<1234> connect inet 10.0.0.1:443 = -1 ECONNREFUSED
//	22:10:01.126000 1234<1200> exit 0
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", r.Time.Format("15:04:05.000000"), r.PID)
	if r.TID != 0 && r.TID != r.PID {
		fmt.Fprintf(&b, "/%d", r.TID)
	}
	fmt.Fprintf(&b, "<%d> ", r.PPID)
	switch r.Kind {
	case KindExec:
		fmt.Fprintf(&b, "exec %s %s cwd=%s", termtext.Quote(r.Path), quoteArgv(r.Argv), termtext.Quote(r.Cwd))
		return b.String()
	case KindExit:
		b.WriteString("exit " + ExitString(r.Status))
		return b.String()
	}
	b.WriteString(r.Syscall)
	for _, s := range []string{r.Path, r.Flags, r.Addr} {
		if s != "" {
			b.WriteString(" " + termtext.Quote(s)) // paths and addresses are the traced program's
		}
	}
	if r.Argv != nil {
		b.WriteString(" " + quoteArgv(r.Argv))
	}
	for _, a := range r.Args {
		fmt.Fprintf(&b, " %#x", a)
	}
	if r.Errno != 0 {
		fmt.Fprintf(&b, " = -1 %s", ErrnoName(r.Errno))
	} else {
		fmt.Fprintf(&b, " = %d", r.Ret)
	}
	return b.String()
}

// quoteArgv shows argv as ["sh" "-c" "echo x"], each word escaped for a
// terminal (termtext.Quoted).
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = termtext.Quoted(a)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// ExitString renders a wait status as "0", "1" or "signal 9 (killed)".
func ExitString(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return strconv.Itoa(ws.ExitStatus())
}
