package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/artrt/art/seccomp"
	"golang.org/x/sys/unix"
)

// Options configure a Tracer.
type Options struct {
	// Sink receives the records; nil discards them (the tracee still
	// runs traced, e.g. to keep a seccomp TRACE filter from failing with
	// ENOSYS).
	Sink Sink
	// FlushInterval bounds how long a record waits before the sink sees
	// it (default 100ms). MaxBatch flushes earlier (default 512).
	FlushInterval time.Duration
	MaxBatch      int
	// SkipOpensUnder lists directories (as the tracee sees them) whose
	// opens are not recorded and cost one stop instead of two: art passes
	// /home/agent, whose changes the overlay journals with the caller's
	// pid anyway.
	SkipOpensUnder []string
	// BeforeStart, if set, runs on the ptrace thread right before the
	// tracee is started, for per-thread state the tracee must inherit (a
	// Landlock domain). An error fails Start.
	BeforeStart func() error
}

// Tracer traces one command and all its descendants.
type Tracer struct {
	cmd  *exec.Cmd
	opts Options
	arch *seccomp.Arch

	// Owned by the ptrace thread.
	tasks map[int]*task // by tid
	procs map[int]int   // tgid -> parent tgid
	// named: processes that have exec'd; nearest: tgid -> its nearest
	// ancestor that had exec'd when it was forked (Record.ExecParent).
	named   map[int]bool
	nearest map[int]int
	root    int

	done   chan struct{} // closed when the loop has ended
	status syscall.WaitStatus
	err    error

	buf      recordQueue
	flushed  chan struct{} // closed when the flusher has delivered everything
	waitOnce sync.Once
}

type task struct {
	tid, tgid int
	// pending is the record of a system call stopped at seccomp entry,
	// completed at its syscall-exit stop.
	pending *Record
	// held: stopped at its first stop, waiting for its creator's event.
	held bool
}

const ptraceOptions = unix.PTRACE_O_EXITKILL | unix.PTRACE_O_TRACESECCOMP |
	unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACECLONE |
	unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACESYSGOOD

// Start starts cmd (already configured: argv, env, files, SysProcAttr)
// under ptrace and traces it and every process it forks until the command
// exits. It sets cmd.SysProcAttr.Ptrace; everything else in SysProcAttr is
// kept (Setsid, Setctty for a PTY). Do not call cmd.Wait: call Wait.
//
// The tracer runs on its own goroutine locked to its OS thread for the
// whole session. With PTRACE_O_EXITKILL every tracee is killed when that
// thread or art itself dies. When the command (the root) exits, remaining
// tracees are killed: nothing traced outlives it.
func Start(cmd *exec.Cmd, opts Options) (*Tracer, error) {
	arch := seccomp.Native()
	if arch == nil {
		return nil, fmt.Errorf("trace on %s: %w", runtime.GOARCH, ErrUnsupported)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 100 * time.Millisecond
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	t := &Tracer{
		cmd: cmd, opts: opts, arch: arch,
		tasks:   map[int]*task{},
		procs:   map[int]int{},
		named:   map[int]bool{},
		nearest: map[int]int{},
		done:    make(chan struct{}),
		flushed: make(chan struct{}),
	}
	t.buf.init(opts.MaxBatch)
	started := make(chan error, 1)
	goOffMainThread(func() { t.run(started) })
	if err := <-started; err != nil {
		return nil, err
	}
	go t.flusher()
	return t, nil
}

// Pid returns the root process's pid.
func (t *Tracer) Pid() int { return t.root }

// Wait waits until the root command has exited and every tracee is gone,
// and the sink has received every record. It returns the root's wait
// status (exit code and signal unchanged by tracing). The error is
// non-nil only when tracing itself broke; the tracees were then killed.
// Safe to call from several goroutines.
func (t *Tracer) Wait() (syscall.WaitStatus, error) {
	<-t.done
	<-t.flushed
	t.waitOnce.Do(func() {
		// Lets os/exec close its pipes and finish copying output. The
		// process was already reaped by the loop, so its own wait fails
		// (ECHILD) and is ignored.
		t.cmd.Wait()
	})
	return t.status, t.err
}

// run is the ptrace thread. It never unlocks: if it ends, its thread
// exits, and PTRACE_O_EXITKILL kills anything still traced.
func (t *Tracer) run(started chan<- error) {
	runtime.LockOSThread()
	defer close(t.done)
	defer t.buf.close()
	if f := t.opts.BeforeStart; f != nil {
		if err := f(); err != nil {
			started <- err
			return
		}
	}
	if err := t.cmd.Start(); err != nil {
		started <- err
		return
	}
	pid := t.cmd.Process.Pid
	if err := t.seize(pid); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		started <- fmt.Errorf("trace %s: %w", t.cmd.Path, err)
		return
	}
	t.root = pid
	t.tasks[pid] = &task{tid: pid, tgid: pid}
	t.procs[pid] = os.Getpid()
	t.named[pid] = true
	cwd := t.cmd.Dir
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	t.emit(Record{Time: time.Now(), Kind: KindExec, PID: pid, PPID: os.Getpid(),
		Path: t.cmd.Path, Argv: append([]string(nil), t.cmd.Args...), Cwd: cwd})
	started <- nil
	t.err = t.loop()
	if t.err != nil {
		for tid := range t.tasks {
			unix.Tgkill(t.tasks[tid].tgid, tid, unix.SIGKILL)
		}
	}
}

// seize converts the PTRACE_TRACEME attachment that os/exec made (the only
// way to trace from the first instruction) into a PTRACE_SEIZE one, whose
// group-stops are reported as such: a Ctrl-Z'd job then really stops
// (PTRACE_LISTEN) instead of being resumed by its tracer. The child is
// stopped at its exec SIGTRAP; detaching with SIGSTOP keeps it stopped
// before its first instruction, the seize takes it over, and SIGCONT
// (which the program may observe, like any job-control continue) lets it
// run.
func (t *Tracer) seize(pid int) error {
	var ws unix.WaitStatus
	if _, err := wait4(pid, &ws, 0); err != nil {
		return fmt.Errorf("wait for exec stop: %w", err)
	}
	if !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
		return fmt.Errorf("exec stop: unexpected status %#x", uint32(ws))
	}
	if err := ptrace(unix.PTRACE_DETACH, pid, 0, uintptr(unix.SIGSTOP)); err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	if _, err := wait4(pid, &ws, unix.WUNTRACED); err != nil {
		return fmt.Errorf("wait for stop: %w", err)
	}
	if !ws.Stopped() {
		return fmt.Errorf("stop: unexpected status %#x", uint32(ws))
	}
	if err := ptrace(unix.PTRACE_SEIZE, pid, 0, ptraceOptions); err != nil {
		return fmt.Errorf("seize: %w", err)
	}
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		return fmt.Errorf("continue: %w", err)
	}
	return nil
}

func wait4(pid int, ws *unix.WaitStatus, options int) (int, error) {
	for {
		wpid, err := unix.Wait4(pid, ws, options, nil)
		if err != unix.EINTR {
			return wpid, err
		}
	}
}

// loop handles stops until no tracee is left.
func (t *Tracer) loop() error {
	for {
		var ws unix.WaitStatus
		// __WNOTHREAD: only this thread's children and tracees. Without
		// it, wait4(-1) would also reap children other goroutines of the
		// process started (their cmd.Wait would then hang forever).
		wpid, err := wait4(-1, &ws, unix.WALL|unix.WNOTHREAD)
		if err == unix.ECHILD {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		if err := t.handle(wpid, ws); err != nil {
			return err
		}
	}
}

func (t *Tracer) handle(tid int, ws unix.WaitStatus) error {
	now := time.Now()
	if ws.Exited() || ws.Signaled() {
		t.exited(tid, syscall.WaitStatus(ws), now)
		return nil
	}
	if !ws.Stopped() {
		return nil // WCONTINUED is not asked for
	}
	sig := ws.StopSignal()
	tk := t.tasks[tid]
	if tk == nil {
		tk = t.newTask(tid, 0)
		if int(ws)>>16 == unix.PTRACE_EVENT_STOP {
			// A new task whose first stop arrived before its creator's
			// fork/clone event: hold it stopped until that event names
			// its parent, or it could exec before its parent is known.
			tk.held = true
			return nil
		}
	}
	// Not ws.TrapCause: it answers -1 unless the stop signal is SIGTRAP,
	// and group-stops of a seized tracee carry the stopping signal.
	switch cause := int(ws) >> 16; {
	case sig == unix.SIGTRAP|0x80:
		t.syscallExit(tk, now)
		return t.restart(unix.PTRACE_CONT, tid, 0)
	case cause == unix.PTRACE_EVENT_SECCOMP:
		if t.syscallEntry(tk, now) {
			// Stop once more at this call's exit for its result.
			return t.restart(unix.PTRACE_SYSCALL, tid, 0)
		}
		return t.restart(unix.PTRACE_CONT, tid, 0)
	case cause == unix.PTRACE_EVENT_FORK || cause == unix.PTRACE_EVENT_VFORK || cause == unix.PTRACE_EVENT_CLONE:
		if msg, err := unix.PtraceGetEventMsg(tid); err == nil {
			if err := t.forked(tk, int(msg), cause == unix.PTRACE_EVENT_CLONE); err != nil {
				return err
			}
		}
		return t.resume(tk, 0)
	case cause == unix.PTRACE_EVENT_EXEC:
		former := tid
		if msg, err := unix.PtraceGetEventMsg(tid); err == nil {
			former = int(msg)
		}
		t.execed(tk, former, now)
		return t.restart(unix.PTRACE_CONT, tid, 0)
	case cause == unix.PTRACE_EVENT_STOP:
		switch sig {
		case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
			// Group-stop: stay stopped, but report SIGCONT/SIGKILL.
			return t.restart(unix.PTRACE_LISTEN, tid, 0)
		}
		// A new task's initial stop, or the trap after SIGCONT.
		return t.resume(tk, 0)
	case cause != 0:
		return t.resume(tk, 0)
	}
	// Signal-delivery-stop: deliver the signal unchanged.
	return t.resume(tk, int(sig))
}

// resume restarts tk, keeping the syscall-exit stop of a traced call
// still in progress (a fork's event stop comes between its entry and its
// exit; PTRACE_CONT there would lose the result).
func (t *Tracer) resume(tk *task, sig int) error {
	if tk.pending != nil {
		return t.restart(unix.PTRACE_SYSCALL, tk.tid, sig)
	}
	return t.restart(unix.PTRACE_CONT, tk.tid, sig)
}

// restart resumes a stopped tracee. ESRCH means it died meanwhile (e.g.
// SIGKILL from elsewhere); its exit is reported by wait.
func (t *Tracer) restart(req, tid, sig int) error {
	err := ptrace(req, tid, 0, uintptr(sig))
	if err == nil || err == unix.ESRCH {
		return nil
	}
	return fmt.Errorf("ptrace restart %d of %d: %w", req, tid, err)
}

func (t *Tracer) newTask(tid, tgid int) *task {
	if tgid == 0 {
		tgid = readTgid(tid)
	}
	tk := &task{tid: tid, tgid: tgid}
	t.tasks[tid] = tk
	return tk
}

// forked registers child, created by parent's fork, vfork or clone, and
// releases it if its first stop was held.
func (t *Tracer) forked(parent *task, child int, clone bool) error {
	tgid := child
	if clone {
		tgid = readTgid(child) // a thread, or a process made by clone()
	}
	tk := t.tasks[child]
	if tk != nil {
		tk.tgid = tgid
	} else {
		tk = t.newTask(child, tgid)
	}
	if tgid == child {
		t.procs[child] = parent.tgid
		if t.named[parent.tgid] {
			t.nearest[child] = parent.tgid
		} else {
			t.nearest[child] = t.nearest[parent.tgid]
		}
	}
	if tk.held {
		tk.held = false
		return t.restart(unix.PTRACE_CONT, child, 0)
	}
	return nil
}

// execed handles a successful exec in tk's process. When a non-leader
// thread execs, the kernel gives it the leader's pid and the former tid
// vanishes without an exit report.
func (t *Tracer) execed(tk *task, former int, now time.Time) {
	if former != tk.tid {
		if old := t.tasks[former]; old != nil {
			tk.pending = old.pending
			delete(t.tasks, former)
		}
	}
	// Every other thread of the process is gone too (their exits may
	// still be reported; exited ignores unknown tids).
	for tid, o := range t.tasks {
		if o.tgid == tk.tgid && tid != tk.tid {
			delete(t.tasks, tid)
		}
	}
	tk.tgid = tk.tid
	r := tk.pending
	tk.pending = nil
	if r == nil {
		// The exec was not stopped at entry (not in the traced set):
		// still record that the process now runs something else.
		r = &Record{Argv: readCmdline(tk.tid)}
		r.Path, _ = os.Readlink("/proc/" + strconv.Itoa(tk.tid) + "/exe")
		r.Cwd, _ = os.Readlink("/proc/" + strconv.Itoa(tk.tid) + "/cwd")
	}
	r.Time, r.Kind, r.PID, r.TID, r.PPID = now, KindExec, tk.tid, 0, t.procs[tk.tid]
	r.ExecParent = t.nearest[tk.tid]
	if t.named[tk.tid] {
		r.ExecParent = tk.tid // a re-exec: the program it replaces
	}
	t.named[tk.tid] = true
	r.Syscall, r.Ret, r.Errno = "", 0, 0
	t.emit(*r)
}

func (t *Tracer) exited(tid int, ws syscall.WaitStatus, now time.Time) {
	tk := t.tasks[tid]
	delete(t.tasks, tid)
	if tk != nil && tk.tgid == tid {
		t.emit(Record{Time: now, Kind: KindExit, PID: tid, PPID: t.procs[tid], Status: ws})
		delete(t.procs, tid)
		delete(t.named, tid)
		delete(t.nearest, tid)
	}
	if tid == t.root {
		t.status = ws
		// The contract: nothing traced outlives the command.
		for otid, o := range t.tasks {
			unix.Tgkill(o.tgid, otid, unix.SIGKILL)
		}
	}
}

// syscallEntry decodes the call tk stopped in (seccomp stop) and reports
// whether its exit should be stopped at too.
func (t *Tracer) syscallEntry(tk *task, now time.Time) bool {
	info, err := getSyscallInfo(tk.tid)
	if err != nil || info.op != unix.PTRACE_SYSCALL_INFO_SECCOMP {
		return false
	}
	r := &Record{Time: now, Kind: KindSyscall, PID: tk.tgid, TID: tk.tid, PPID: t.procs[tk.tgid]}
	if tk.tid == tk.tgid {
		r.TID = 0
	}
	r.Syscall = t.arch.Name(uint32(info.nr))
	decode(r, tk.tid, r.Syscall, info.args)
	if r.Flags != "" && t.skipped(r.Path) {
		return false
	}
	tk.pending = r
	return true
}

// skipped reports whether an open of p is not to be recorded.
func (t *Tracer) skipped(p string) bool {
	for _, dir := range t.opts.SkipOpensUnder {
		dir = strings.TrimSuffix(dir, "/")
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// syscallExit completes tk's pending record with the call's result.
func (t *Tracer) syscallExit(tk *task, now time.Time) {
	r := tk.pending
	tk.pending = nil
	if r == nil {
		return
	}
	info, err := getSyscallInfo(tk.tid)
	if err == nil && info.op == unix.PTRACE_SYSCALL_INFO_EXIT {
		if info.isError != 0 {
			r.Ret, r.Errno = -1, syscall.Errno(-info.rval)
		} else {
			r.Ret = info.rval
		}
	}
	t.emit(*r)
}

// readTgid returns tid's thread group id from /proc, or tid itself.
func readTgid(tid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return tid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return tid
}

func readCmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// ErrnoName is the symbolic name of e ("ENOENT"), or its number.
func ErrnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return "errno " + strconv.Itoa(int(e))
}

// goOffMainThread runs f on a goroutine that never runs on the process's
// main thread. The ptrace thread is changed for good before it forks
// (BeforeStart: a Landlock domain, a private mount namespace) and exits
// locked; on the main thread that would show through /proc/self for the
// whole process, and the runtime keeps the main thread when a goroutine
// exits locked to it. A goroutine that lands there keeps it busy while f
// runs on another thread. (sandbox's Starter does the same.)
func goOffMainThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f() // still locked: f's own lock nests, and never ends
			return
		}
		ran := make(chan struct{})
		go func() { defer close(ran); f() }()
		<-ran
		runtime.UnlockOSThread()
	}()
}
