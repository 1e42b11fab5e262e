package execapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Launch is a command prepared for one request and not yet started.
type Launch struct {
	// Cmd has Path, Args, Env, Dir and SysProcAttr set. The Runner sets
	// Stdin, Stdout and Stderr, and Setpgid unless SysProcAttr asks for
	// Setsid or Setpgid already; it must not be started.
	Cmd *exec.Cmd
	// Kill, if set, signals the whole process tree (a sandbox owning it
	// through a pid namespace or a cgroup). The default signals the
	// command's process group. It is called while the command's pid is
	// still unreaped, so that group cannot have been recycled.
	Kill func(sig syscall.Signal) error
	// Explain, if set, is called once the command exited: a launcher that
	// enforces limits outside the process (a cgroup) returns the E4xxx
	// error of the limit that ended it, or nil. A non-nil error makes the
	// status killed.
	Explain func(ws syscall.WaitStatus) *Error
	// Cleanup, if set, runs last (unmount, remove the cgroup).
	Cleanup func()
}

// PrepareFunc turns a validated request into a Launch. Errors that are
// *Error keep their code; others become CodeSetup.
type PrepareFunc func(ctx context.Context, req *Request) (*Launch, error)

// Runner executes requests as processes: it starts what Prepare returns,
// feeds stdin, captures output under the request's limit, enforces the
// timeout on the whole process group (SIGTERM, KillGrace, SIGKILL), kills
// whatever the command left behind when it exits, and reports status and
// metrics. It implements Executor; Exec may be called from one goroutine
// at a time per request (concurrent requests are independent).
type Runner struct {
	Prepare PrepareFunc
	// KillGrace is the time between SIGTERM and SIGKILL on timeout; 0
	// means DefaultKillGrace.
	KillGrace time.Duration
	// DrainTimeout bounds the wait for output after the command and its
	// process group are gone (a process that escaped the group may hold
	// the pipes); 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Defaults of Runner.
const (
	DefaultKillGrace    = 500 * time.Millisecond
	DefaultDrainTimeout = time.Second
)

// NewProcessExecutor returns a Runner that runs requests as plain host
// processes (ProcessCommand): no sandbox, for tests and for the lead's
// comparison benchmarks.
func NewProcessExecutor(dir string, env []string) *Runner {
	return &Runner{Prepare: ProcessCommand(dir, env)}
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Exec runs req, which Policy.Validate accepted, and returns its response
// with status, exit code, output, metrics and timestamps.started set; the
// Server fills the rest. It never returns nil.
func (r *Runner) Exec(ctx context.Context, req *Request) *Response {
	launch, err := r.Prepare(ctx, req)
	if err != nil {
		return Failed(AsError(err, CodeSetup))
	}
	if launch.Cleanup != nil {
		defer launch.Cleanup()
	}
	stdout, stderr := NewCapture(req.OutputLimit()), NewCapture(req.OutputLimit())
	p, e := r.start(launch, req, stdout, stderr)
	if e != nil {
		return Failed(e)
	}
	timeout := time.Duration(req.Timeout()) * time.Millisecond
	var timedOut, cancelled bool
	var mu sync.Mutex
	timer := time.NewTimer(timeout)
	exited := make(chan struct{})
	go func() { // the watchdog: timeout or cancellation
		defer timer.Stop()
		select {
		case <-exited:
			return
		case <-timer.C:
			mu.Lock()
			timedOut = true
			mu.Unlock()
			p.kill(syscall.SIGTERM)
			grace := r.KillGrace
			if grace == 0 {
				grace = DefaultKillGrace
			}
			select {
			case <-exited:
			case <-time.After(grace):
				p.kill(syscall.SIGKILL)
			}
		case <-ctx.Done():
			mu.Lock()
			cancelled = true
			mu.Unlock()
			p.kill(syscall.SIGKILL)
		}
	}()

	ws, rusage, counts, werr := p.wait()
	close(exited)
	end := r.now()
	r.drain(p)

	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		resp := Failed(Errorf(CodeExecFailed, "wait for %s: %v", req.Command[0], werr))
		resp.Timestamps.Started = Stamp(p.started)
		return resp
	}
	o := Outcome{
		Started: p.started, Wall: end.Sub(p.started),
		IORead: counts.read, IOWritten: counts.written,
		ExitCode: ws.ExitStatus(), TimedOut: timedOut, Timeout: timeout, Cancelled: cancelled,
	}
	if ws.Signaled() {
		o.Signal = ws.Signal()
	}
	if rusage != nil {
		o.User = time.Duration(rusage.Utime.Nano())
		o.Kernel = time.Duration(rusage.Stime.Nano())
		o.MaxMemory = rusage.Maxrss * 1024 // Linux reports KiB
	}
	if launch.Explain != nil {
		o.Limit = launch.Explain(ws)
	}
	return o.Response(stdout, stderr)
}

// proc is a started command.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	killFn  func(syscall.Signal) error
	readers []*os.File     // parent ends of stdout and stderr
	copied  sync.WaitGroup // output copiers
	stdinW  *os.File       // parent end of stdin, nil if /dev/null
	mu      sync.Mutex     // guards reaped
	reaped  bool           // after this no signal may be sent by pid
}

type ioCounts struct{ read, written int64 }

func (r *Runner) start(l *Launch, req *Request, stdout, stderr io.Writer) (*proc, *Error) {
	cmd := l.Cmd
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid && !cmd.SysProcAttr.Setpgid {
		cmd.SysProcAttr.Setpgid = true
	}
	p := &proc{cmd: cmd, killFn: l.Kill}
	var childEnds []*os.File
	closeAll := func() {
		for _, f := range append(childEnds, p.readers...) {
			f.Close()
		}
		if p.stdinW != nil {
			p.stdinW.Close()
		}
	}
	for _, dst := range []*io.Writer{&cmd.Stdout, &cmd.Stderr} {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, Errorf(CodeIO, "output pipe: %v", err)
		}
		*dst = pw
		childEnds = append(childEnds, pw)
		p.readers = append(p.readers, pr)
	}
	if req.Stdin != "" {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, Errorf(CodeIO, "stdin pipe: %v", err)
		}
		cmd.Stdin = pr
		childEnds = append(childEnds, pr)
		p.stdinW = pw
	}
	p.started = r.now()
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, startError(req.Command[0], err)
	}
	for _, f := range childEnds {
		f.Close()
	}
	for i, w := range []io.Writer{stdout, stderr} {
		p.copied.Add(1)
		go func(src *os.File, dst io.Writer) {
			defer p.copied.Done()
			buf := make([]byte, 64<<10)  // a pipe holds 64 KiB
			io.CopyBuffer(dst, src, buf) // ends at EOF or when drain closes src
		}(p.readers[i], w)
	}
	if p.stdinW != nil {
		go func(w *os.File, data string) {
			io.WriteString(w, data) // EPIPE if the command does not read it all: fine
			w.Close()
		}(p.stdinW, req.Stdin)
	}
	return p, nil
}

func startError(name string, err error) *Error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, syscall.ENOENT):
		return Errorf(CodeNotFound, "command not found: %s", name).with("command", name)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return Errorf(CodeNoExec, "cannot execute %s: %v", name, errors.Unwrap(err)).with("command", name)
	}
	return Errorf(CodeExecFailed, "start %s: %v", name, err).with("command", name)
}

// kill signals the tree unless the command was reaped (its pid, and so
// its process group id, may then belong to someone else).
func (p *proc) kill(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	if p.killFn != nil {
		p.killFn(sig)
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, sig)
}

// wait waits for the command to exit, reads its I/O counters while it is
// a zombie, kills whatever it left in its process group, then reaps it.
func (p *proc) wait() (syscall.WaitStatus, *syscall.Rusage, ioCounts, error) {
	pid := p.cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	counts := readProcIO(pid)
	p.kill(syscall.SIGKILL) // leftovers: nothing outlives the request
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	err := p.cmd.Wait()
	st := p.cmd.ProcessState
	if st == nil {
		return 0, nil, counts, err
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	ru, _ := st.SysUsage().(*syscall.Rusage)
	return ws, ru, counts, nil
}

// drain waits for the output copiers; if something that escaped the
// process group still holds the pipes, it closes them after DrainTimeout.
func (r *Runner) drain(p *proc) {
	done := make(chan struct{})
	go func() { p.copied.Wait(); close(done) }()
	d := r.DrainTimeout
	if d == 0 {
		d = DefaultDrainTimeout
	}
	select {
	case <-done:
	case <-time.After(d):
	}
	for _, f := range p.readers {
		f.Close()
	}
	<-done
	if p.stdinW != nil {
		p.stdinW.Close() // unblocks the stdin writer if an escaped process holds the pipe
	}
}

// readProcIO reads rchar and wchar of pid, which include the children it
// reaped. Missing counters (no /proc, another user's task) read as 0.
func readProcIO(pid int) ioCounts {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return ioCounts{}
	}
	var c ioCounts
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(": "))
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(string(v), 10, 64)
		switch string(k) {
		case "rchar":
			c.read = n
		case "wchar":
			c.written = n
		}
	}
	return c
}
