package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// IO is where a non-interactive sandbox's standard streams go. With
// Config.OwnsTTY the sandbox gets a PTY instead, copied to and from
// these (Stdin is put in raw mode when it is a terminal).
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Starter starts cmd and returns a function that waits for it. It must
// call cmd.Start on a goroutine locked to its OS thread and keep that
// thread alive until the process is waited for: bwrap's --die-with-parent
// is a parent-death signal, delivered when the forking *thread* exits.
// The tracer supplies its own (it must also ptrace from that thread);
// like StartLocked it must call PrepareThread on that thread first.
type Starter func(cmd *exec.Cmd) (wait func() (syscall.WaitStatus, *syscall.Rusage, error), err error)

// Result is how a sandbox ended.
type Result struct {
	// ExitCode is what art should exit with: the command's own code,
	// 128+N when it was killed by signal N, 124 after a timeout.
	ExitCode int
	// Signal is the signal that killed the command (0 if it exited).
	Signal   syscall.Signal
	TimedOut bool
	// OOMKilled is set when the kernel killed a process for the memory
	// limit.
	OOMKilled bool
	Wall      time.Duration
	// UserTime and SysTime are the CPU time of every process of the
	// sandbox (see Process.reapInit), IORead and IOWritten the bytes they
	// moved through read(2), write(2) and kin (rchar and wchar: pipes,
	// FUSE and tmpfs included; the page cache does not hide any). When
	// the sandbox's init was reaped by someone else (a tracer), only
	// bwrap's own times are known and the I/O counts are 0.
	UserTime  time.Duration
	SysTime   time.Duration
	IORead    int64
	IOWritten int64
	// MaxMemory is the tree's peak memory in bytes (cgroup), or the
	// largest single process's RSS when no cgroup was available.
	MaxMemory int64
}

// Process is a running sandbox.
type Process struct {
	cfg     *Config
	cmd     *exec.Cmd
	cg      *cgroup
	limitBy string
	start   time.Time

	timedOut atomic.Bool
	done     chan struct{}
	res      Result
	err      error

	tty     *ttyCopier
	closeMu sync.Mutex

	// The sandbox's init (bwrap's child, pid 1 inside): its pid on the
	// host and a pidfd for it (-1 when none), to reap it (reapInit).
	initPid, initFD int

	// handed is when a ready sandbox's stub was handed its command
	// (Ready.Run; Unix nanoseconds, 0: not a ready sandbox).
	handed atomic.Int64

	// cleaned is closed when the clean-up of killed arts' cgroups that
	// chooseLimits started is over (nil: none started).
	cleaned chan struct{}
}

// births holds the cgroup each started command is to be born in until its
// thread has forked it (StartLocked): a Starter gets only the *exec.Cmd.
var births sync.Map // *exec.Cmd -> *cgroup

// subreaper makes art the reaper of its orphaned descendants, once: bwrap
// exits as soon as it has the command's status, without reaping the
// sandbox's init, which would then go to the host's init - and with it
// the CPU time and I/O of every process of the sandbox.
var subreaper sync.Once

var seq atomic.Int64

// Start validates c, starts bwrap and returns at once. start may be nil
// (a plain start on a locked thread).
func Start(c *Config, stdio IO, start Starter) (*Process, error) {
	return startWith(c, stdio, start, nil)
}

// startWith is Start with pre handed to bwrap as its fds 3, 4, ...
// (before the seccomp program and bwrap's own pipes), which bwrap
// passes on to the command: a ready sandbox's stub (StartReady).
func startWith(c *Config, stdio IO, start Starter, pre []*os.File) (*Process, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	bw, err := c.bwrapPath()
	if err != nil {
		return nil, err
	}
	if start == nil {
		start = StartLocked
	}
	// Only what art hands over may reach the sandbox: Go opens its own
	// fds close-on-exec, but fds art inherited (from a shell, a test
	// runner) would pass through bwrap into the command.
	if err := closeInheritedOnExec(); err != nil {
		return nil, err
	}
	p := &Process{cfg: c, done: make(chan struct{}), initFD: -1}
	subreaper.Do(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })

	p.chooseLimits(c.Limits)

	stage := newStagePlan(c)
	files := append([]*os.File(nil), pre...) // ExtraFiles: fd 3, 4, ...
	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	seccompFD := -1
	if len(c.Seccomp) > 0 {
		r, err := seccompPipe(c.Seccomp)
		if err != nil {
			return nil, err
		}
		closeAfter = append(closeAfter, r)
		seccompFD = 3 + len(files)
		files = append(files, r)
	}
	// bwrap holds the sandbox before the command starts (--block-fd)
	// until art has put it in its cgroup, after reporting its child's pid
	// (--info-fd).
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		blockR.Close()
		blockW.Close()
		return nil, err
	}
	closeAfter = append(closeAfter, blockR, infoW, infoR)
	defer blockW.Close()
	blockFD, infoFD := 3+len(files), 4+len(files)
	files = append(files, blockR, infoW)

	args := append([]string{"--block-fd", strconv.Itoa(blockFD), "--info-fd", strconv.Itoa(infoFD)}, c.args(seccompFD, stage)...)
	cmd, err := p.bwrapCmd(bw, args, files, stdio)
	if err != nil {
		return nil, err
	}
	p.cmd = cmd
	p.start = time.Now()
	if stage != nil {
		plans.Store(cmd, stage)
		defer plans.Delete(cmd)
	}
	if p.cg != nil {
		births.Store(cmd, p.cg)
		defer births.Delete(cmd)
	}
	wait, err := start(cmd)
	if err != nil {
		if p.tty != nil {
			p.tty.close()
		}
		if p.cg != nil {
			p.cg.remove()
		}
		return nil, fmt.Errorf("start bwrap: %w", err)
	}
	if p.tty != nil {
		p.tty.started()
	}
	infoW.Close()
	ierr := p.release(cmd, infoR, blockW)
	go p.wait(wait)
	if ierr != nil && !errors.Is(ierr, errBwrapExited) {
		p.Wait()
		return nil, ierr
	}
	return p, nil
}

// bwrapPath returns c.Bwrap, or bwrap as found on $PATH.
func (c *Config) bwrapPath() (string, error) {
	if c.Bwrap != "" {
		return c.Bwrap, nil
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: bwrap not found on PATH (apt-get install bubblewrap)", ErrUnavailable)
	}
	return p, nil
}

// bwrapCmd makes the command that runs bwrap with args, handing it files
// as fds 3, 4, ... and stdio (through a terminal copier when the sandbox
// owns the terminal).
func (p *Process) bwrapCmd(bw string, args []string, files []*os.File, stdio IO) (*exec.Cmd, error) {
	c := p.cfg
	cmd := exec.Command(bw, args...)
	cmd.Env = []string{} // bwrap's own environment: nothing of art's
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 {
		// Never uid 0 with capabilities: bwrap itself runs unprivileged
		// and maps the command's uid to this one in a user namespace.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.GID), Groups: []uint32{}}
	}
	cmd.Dir = "/" // never inside the overlay: the daemon must not touch its own mount
	if c.OwnsTTY {
		t, err := newTTYCopier(stdio)
		if err != nil {
			return nil, err
		}
		p.tty = t
		t.attach(cmd)
	} else {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	}
	return cmd, nil
}

// chooseLimits picks how the limits are enforced: a cgroup when this
// machine lets art make one, else rlimits.
func (p *Process) chooseLimits(l Limits) {
	name := fmt.Sprintf("art-%d-%d", os.Getpid(), seq.Add(1))
	if os.Geteuid() == 0 {
		own := readOwnCgroups()
		// Off the start's path (globs of three cgroup directories): the
		// sandbox's Wait waits for it, so nothing of it outlives the run.
		cleaned := make(chan struct{})
		p.cleaned = cleaned
		go func() {
			defer close(cleaned)
			cleanStaleCgroups(own)
		}()
		cg, err := newCgroup(name, l, own)
		if err == nil {
			p.cg, p.limitBy = cg, cg.String()
		} else {
			p.limitBy = "rlimits (" + err.Error() + ")"
		}
	} else {
		p.limitBy = "rlimits (not root: no cgroup)"
	}
}

// seccompPipe returns the read end of a pipe holding the seccomp program,
// for bwrap's --seccomp.
func seccompPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// A program is at most 4096 instructions (32 KiB): it fits the
	// pipe's buffer, so the write completes before bwrap reads.
	_, err = w.Write(prog)
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp program: %w", err)
	}
	return r, nil
}

// release reads the pid of bwrap's child from infoR, confines it and lets
// the sandbox go on by writing to blockW; on failure it kills bwrap
// (unless bwrap already exited: errBwrapExited) and returns why.
func (p *Process) release(cmd *exec.Cmd, infoR io.Reader, blockW io.Writer) error {
	child, ierr := readChildPid(infoR)
	childGone := false
	if ierr == nil {
		// Before the release: the pid is bwrap's blocked child still.
		if fd, err := unix.PidfdOpen(child, 0); err == nil {
			p.initPid, p.initFD = child, fd
		}
		ierr = p.confine(cmd.Process.Pid, child)
		// bwrap's child does its set-up (the mounts) before it waits
		// for the release: a bind it cannot mount ends it, and bwrap
		// after it, with bwrap's message on stderr. That is the
		// command's failure (bwrap's exit 1), not art's: the command
		// never ran, and no kill may turn the status into 137.
		if errors.Is(ierr, syscall.ESRCH) {
			ierr, childGone = errBwrapExited, true
		}
	}
	switch {
	case childGone:
	case ierr != nil:
		// bwrap failed before the sandbox was ready (its message is on
		// the command's stderr), or confinement failed: nothing of the
		// command has run. Kill and reap.
		cmd.Process.Kill()
	default:
		if _, err := blockW.Write([]byte{1}); err != nil {
			ierr = fmt.Errorf("release sandbox: %w", err)
			cmd.Process.Kill()
		}
	}
	return ierr
}

var errBwrapExited = errors.New("bwrap exited before the sandbox was ready")

func readChildPid(r io.Reader) (int, error) {
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil || info.ChildPid <= 0 {
		return 0, errBwrapExited
	}
	return info.ChildPid, nil
}

// confine applies the limits to bwrap and its child while the command
// has not started.
func (p *Process) confine(pids ...int) error {
	if n := p.cfg.Limits.CPUSeconds; n > 0 {
		rl := unix.Rlimit{Cur: uint64(n), Max: uint64(n) + 1}
		for _, pid := range pids {
			if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &rl, nil); err != nil {
				return fmt.Errorf("cpu time rlimit: %w", err)
			}
		}
	}
	if p.cg != nil {
		// Born in it, normally (StartLocked, joinThread): checked, not
		// assumed; otherwise moved now.
		for _, pid := range pids {
			if p.cg.holds(pid) {
				continue
			}
			if err := p.cg.add(pid); err != nil {
				return fmt.Errorf("confine sandbox: %w", err)
			}
		}
		if err := p.cg.applyPidsMax(); err != nil {
			return fmt.Errorf("confine sandbox: %w", err)
		}
		return nil
	}
	lim := p.cfg.Limits
	for _, pid := range pids {
		if lim.MemoryBytes > 0 {
			rl := unix.Rlimit{Cur: uint64(lim.MemoryBytes), Max: uint64(lim.MemoryBytes)}
			if err := unix.Prlimit(pid, unix.RLIMIT_AS, &rl, nil); err != nil {
				return fmt.Errorf("memory rlimit: %w", err)
			}
		}
		if lim.Pids > 0 {
			rl := unix.Rlimit{Cur: uint64(lim.Pids), Max: uint64(lim.Pids)}
			if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &rl, nil); err != nil {
				return fmt.Errorf("process rlimit: %w", err)
			}
		}
	}
	return nil
}

// LimitedBy names the mechanism enforcing the limits ("cgroup v1",
// "cgroup v2", or "rlimits (why)").
func (p *Process) LimitedBy() string { return p.limitBy }

// Pid is bwrap's pid on the host.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

func (p *Process) wait(wait func() (syscall.WaitStatus, *syscall.Rusage, error)) {
	ws, ru, err := wait()
	p.res.Wall = time.Since(p.start)
	if h := p.handed.Load(); h != 0 {
		// A ready sandbox: the run began at the handoff.
		p.res.Wall = time.Since(time.Unix(0, h))
	}
	if p.tty != nil {
		p.tty.finish()
	}
	if tree, io, ok := p.reapInit(); ok {
		p.res.UserTime = time.Duration(tree.Utime.Nano())
		p.res.SysTime = time.Duration(tree.Stime.Nano())
		p.res.MaxMemory = tree.Maxrss * 1024
		p.res.IORead, p.res.IOWritten = io.read, io.written
	} else if ru != nil {
		p.res.UserTime = time.Duration(ru.Utime.Nano())
		p.res.SysTime = time.Duration(ru.Stime.Nano())
		p.res.MaxMemory = ru.Maxrss * 1024
	}
	if p.cg != nil {
		if m := p.cg.peakMemory(); m > 0 {
			p.res.MaxMemory = m
		}
		p.res.OOMKilled = p.cg.oomKills() > 0
		// Whatever a daemonized process left behind dies with the run.
		p.cg.remove()
	}
	switch {
	case err != nil:
		p.err = fmt.Errorf("wait for sandbox: %w", err)
		p.res.ExitCode = 1
	case ws.Exited():
		p.res.ExitCode = ws.ExitStatus()
		// bwrap reports a command killed by signal N as 128+N.
		if c := p.res.ExitCode; c > 128 && c < 128+65 {
			p.res.Signal = syscall.Signal(c - 128)
		}
	case ws.Signaled():
		p.res.Signal = ws.Signal()
		p.res.ExitCode = 128 + int(ws.Signal())
	}
	if p.timedOut.Load() {
		p.res.TimedOut = true
		p.res.ExitCode = 124
	}
	if p.cleaned != nil {
		<-p.cleaned
	}
	close(p.done)
}

// reapInit reaps the sandbox's init once bwrap is gone (art is its
// reaper then: subreaper) and returns its rusage and I/O counts, which are
// the whole sandbox's: init reaps every process of its pid namespace
// (the command, orphans, and at its own exit everything left), and a
// reaped child's CPU time and I/O accounting are added to its reaper's.
// The counts are read from /proc/PID/io while init is a zombie, before
// the reap (waitid WNOWAIT): nothing else can take the pid meanwhile. ok
// is false when init was not art's to reap (a tracer reaped it).
func (p *Process) reapInit() (*unix.Rusage, ioCounts, bool) {
	if p.initFD < 0 {
		return nil, ioCounts{}, false
	}
	defer unix.Close(p.initFD)
	var info unix.Siginfo
	if err := waitidRetry(p.initFD, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		return nil, ioCounts{}, false
	}
	io := readProcIO(p.initPid)
	var ru unix.Rusage
	if err := waitidRetry(p.initFD, &info, unix.WEXITED, &ru); err != nil {
		return nil, ioCounts{}, false
	}
	return &ru, io, true
}

func waitidRetry(pidfd int, info *unix.Siginfo, options int, ru *unix.Rusage) error {
	for {
		err := unix.Waitid(unix.P_PIDFD, pidfd, info, options, ru)
		if err != unix.EINTR {
			return err
		}
	}
}

// ioCounts are a process's rchar and wchar.
type ioCounts struct{ read, written int64 }

// readProcIO reads the I/O counts of pid (zero when unreadable).
func readProcIO(pid int) ioCounts {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return ioCounts{}
	}
	var c ioCounts
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "rchar":
			c.read = n
		case "wchar":
			c.written = n
		}
	}
	return c
}

// Done is closed when the sandbox has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the sandbox to exit. The error is art's own (the wait
// failed); the command's failure is in Result.
func (p *Process) Wait() (Result, error) {
	<-p.done
	return p.res, p.err
}

// Signal sends sig to the command's processes (not to bwrap's own two,
// which would not pass it on).
func (p *Process) Signal(sig syscall.Signal) {
	for _, pid := range p.commandPids() {
		syscall.Kill(pid, sig)
	}
}

// commandPids are the sandbox's processes below bwrap's init.
func (p *Process) commandPids() []int {
	tree := descendants(p.cmd.Process.Pid)
	if len(tree) <= 1 {
		return nil
	}
	return tree[1:] // tree[0] is bwrap's child (pid 1 inside)
}

// Stop ends the sandbox: SIGTERM to every process of the command, then,
// after grace (or at once if they are gone), SIGKILL to the whole tree.
// timedOut marks the result as a timeout (exit status 124).
func (p *Process) Stop(grace time.Duration, timedOut bool) {
	if timedOut {
		p.timedOut.Store(true)
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	p.kill()
}

// kill SIGKILLs bwrap - its --die-with-parent child, pid 1 of the
// sandbox's pid namespace, dies with it and takes every process inside -
// and, with a cgroup, everything in it.
func (p *Process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	if p.cg != nil {
		p.cg.killAll()
	}
}

// StartLocked is the default Starter: start and wait on one goroutine
// locked to its OS thread, which stays alive until the process is reaped.
func StartLocked(cmd *exec.Cmd) (func() (syscall.WaitStatus, *syscall.Rusage, error), error) {
	started := make(chan error, 1)
	type result struct {
		ws  syscall.WaitStatus
		ru  *syscall.Rusage
		err error
	}
	done := make(chan result, 1)
	goOffMainThread(func() {
		// Never unlocked: the thread exits with the goroutine, after the
		// process it forked is gone.
		runtime.LockOSThread()
		// Staged bind sources and the Landlock scope against the host's
		// abstract sockets and signals: this thread's, inherited by bwrap.
		if err := PrepareThread(cmd); err != nil {
			started <- err
			return
		}
		// bwrap is born in the sandbox's cgroup when this thread can
		// join it cheaply (see cgroup); else Start's confine moves it.
		var leave func() error
		if v, ok := births.Load(cmd); ok {
			leave, _ = v.(*cgroup).joinThread()
		}
		err := cmd.Start()
		if leave != nil {
			if lerr := leave(); lerr != nil && err == nil {
				// This thread stays in the sandbox's cgroup: nothing may
				// run under it. (The cgroup never lists art itself.)
				cmd.Process.Kill()
				cmd.Wait()
				err = fmt.Errorf("leave the sandbox's cgroup: %w", lerr)
			}
		}
		if err != nil {
			started <- err
			return
		}
		started <- nil
		err = cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = nil
		}
		if err != nil {
			done <- result{err: err}
			return
		}
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		done <- result{ws: ws, ru: ru}
	})
	if err := <-started; err != nil {
		return nil, err
	}
	return func() (syscall.WaitStatus, *syscall.Rusage, error) {
		r := <-done
		return r.ws, r.ru, r.err
	}, nil
}

// goOffMainThread runs f on a new goroutine that never runs on the
// process's main thread. f locks its thread and changes it (a private
// mount namespace, a Landlock domain) for good; on the main thread that
// would show through /proc/self for the whole process, and the runtime
// keeps the main thread when a goroutine exits locked to it. A goroutine
// that finds itself there keeps the main thread busy while f runs on
// another.
func goOffMainThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f() // still locked here: f's own lock nests, and never ends
			return
		}
		ran := make(chan struct{})
		go func() { defer close(ran); f() }()
		<-ran
		runtime.UnlockOSThread()
	}()
}

// descendants lists the processes below pid, breadth first (pid's
// children first), from /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// comm may hold spaces and parens: the fields after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], c)
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		out = append(out, c)
		queue = append(queue, children[c]...)
	}
	return out
}

// closeInheritedOnExec marks every fd above 2 close-on-exec.
func closeInheritedOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: one fd at a time.
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close inherited fds: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
