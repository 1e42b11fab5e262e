package session

// Warm mounts (docs/architecture.md, "Warm mounts"): art run --warm
// serves its overlay from a detached daemon that keeps the branch locked
// and mounted between runs, so that the kernel's dentry, attribute and
// page caches of one run are still there for the next. A new FUSE mount
// starts them cold: a second session's git status in a 15k-file
// repository sent 17x the LOOKUPs of the native one.
//
// Why the kernel's caches stay valid from one run to the next: they
// describe the branch's tree, and while the daemon holds the branch's
// lock nobody but its own mount changes that tree (journal's branch
// locks: every change of a branch's tree checks the lock in the
// transaction that makes it). Whatever else could change what the mount
// shows - an edit of the host workspace (its lower files), a new capture,
// a checkout, an undo - either needs the lock, which the daemon gives up
// only by unmounting (yield), or is detected before a run is let in
// (warmDaemon.stale: the host checked unchanged since the last capture
// with workspace.Unchanged, the branch's head still the state the daemon
// left), and then the daemon unmounts and a fresh one captures.
//
// The protocol is one JSON object a line over a unix socket in the state
// directory (StateDir), named for the store and branch: at most one
// daemon per branch can exist, as it holds the branch's lock. Both ends
// check that the other is the same user (SO_PEERCRED).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/internal/warmwire"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// WarmDaemonCommand is the hidden art verb that runs a warm daemon
// (ServeWarm); the client re-executes art's binary with it.
const WarmDaemonCommand = "__warm-daemon"

// warmWait bounds how long a client or a verb waits for a daemon to
// start, to yield or to shut down.
const warmWait = 60 * time.Second

// warmName names the daemon of store's branch (its socket and log) by
// the key the branch's lock file has (journal.BranchKey).
func warmName(store, branch string) string {
	return "warm-" + journal.BranchKey(store, branch)
}

// WarmSocket is the socket of the warm daemon of store's branch.
func WarmSocket(store, branch string) string {
	return warmwire.Socket(store, branch)
}

// WarmLog is the log file of the warm daemon of store's branch (its
// stdout and stderr; kept after it exits, for a look at what it did).
func WarmLog(store, branch string) string {
	return filepath.Join(journal.LockDir(), warmName(store, branch)+".log")
}

// warmRequest is a client's line to a daemon.
type warmRequest struct {
	Op string `json:"op"` // "begin", "end", "yield"

	// begin: the run and the options the mount was made with.
	Desc          string        `json:"desc,omitempty"`
	PID           int           `json:"pid,omitempty"`
	Workspace     string        `json:"workspace,omitempty"`
	UID           int           `json:"uid,omitempty"`
	GID           int           `json:"gid,omitempty"`
	JournalWrites bool          `json:"journal_writes,omitempty"`
	Durability    string        `json:"durability,omitempty"`
	DiskQuota     int64         `json:"disk_quota,omitempty"`
	Idle          time.Duration `json:"idle,omitempty"`
	Quiet         bool          `json:"quiet,omitempty"`

	// begin, for a sandbox started ahead (warmready.go): the run's
	// sandbox (the daemon's home and hidden paths go in), the timeout,
	// the client's umask and procKey; the client's stdio come with it.
	Sandbox *sandbox.Config `json:"sandbox,omitempty"`
	Timeout time.Duration   `json:"timeout,omitempty"`
	Umask   int             `json:"umask,omitempty"`
	Proc    string          `json:"proc,omitempty"`
	SigIgn  uint64          `json:"sig_ign,omitempty"`

	// exec (warmexec.go): a raw run from art's thin front: its argv after
	// the program name, environment and working directory (Umask, SigIgn
	// and Proc as for a begin); its stdio come with it.
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`

	// end: how the command ended, or why it did not run (RunErr).
	Result *sandbox.Result `json:"result,omitempty"`
	RunErr string          `json:"run_error,omitempty"`

	// signal: one the client got while its command runs in a ready
	// sandbox, to pass on.
	Signal int `json:"signal,omitempty"`
}

// warmReply is a daemon's line to a client.
type warmReply struct {
	Error    string `json:"error,omitempty"`
	InUsePID int    `json:"in_use_pid,omitempty"` // Error is the branch held by this process
	Busy     bool   `json:"busy,omitempty"`       // a run is in progress
	PID      int    `json:"pid,omitempty"`        // the daemon's, or (Busy) its client's
	Stale    string `json:"stale,omitempty"`      // why the mount was discarded (it has shut down)

	// ready and begin
	Warn    string                 `json:"warn,omitempty"` // messages of the capture, for the user
	Home    string                 `json:"home,omitempty"`
	Hide    []string               `json:"hide,omitempty"`
	Branch  string                 `json:"branch,omitempty"`
	Capture *workspace.ImportStats `json:"capture,omitempty"`
	// begin: the command runs in the sandbox the daemon started ahead
	// (the client then waits for the end, which has Result).
	Started   bool            `json:"started,omitempty"`
	LimitedBy string          `json:"limited_by,omitempty"`
	Result    *sandbox.Result `json:"result,omitempty"`

	// end
	Snapshot journal.Snapshot `json:"snapshot"`
	Changed  int              `json:"changed,omitempty"`
	Log      string           `json:"log,omitempty"`    // the overlay's messages during the run
	Failed   *warmFailed      `json:"failed,omitempty"` // the mount failed (overlay.FailedError)

	// exec's answer: not served (why; nothing was done), or the full
	// client's exit status (its messages went to the client's stderr).
	Fallback string `json:"fallback,omitempty"`
	Code     int    `json:"code,omitempty"`
}

// warmFailed is an *overlay.FailedError (and whether its record failed)
// on the wire, for the client's report (cmd/art's reportFailedRun).
type warmFailed struct {
	Err          string   `json:"error"`
	NotKept      []string `json:"not_kept,omitempty"`
	MoreNotKept  int      `json:"more_not_kept,omitempty"`
	Refused      int64    `json:"refused,omitempty"`
	RefusedPaths []string `json:"refused_paths,omitempty"`
	Unrecorded   string   `json:"unrecorded,omitempty"`
}

func (f *warmFailed) error() *FailedError {
	e := &FailedError{FailedError: &overlay.FailedError{Err: errors.New(f.Err), NotKept: f.NotKept, MoreNotKept: f.MoreNotKept,
		Refused: f.Refused, RefusedPaths: f.RefusedPaths}}
	if f.Unrecorded != "" {
		e.Unrecorded = errors.New(f.Unrecorded)
	}
	return e
}

// peerUID is the uid of the process at the other end of c.
func peerUID(c net.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// peerCred is the kernel's word on the process at the other end of c:
// its pid, uid and gid when it connected.
func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// warmConn is a client's connection to a daemon.
type warmConn struct {
	c   net.Conn
	dec *json.Decoder
	enc *json.Encoder
}

// dialWarm connects to the daemon at sock; fs.ErrNotExist or
// ECONNREFUSED when there is none (or a dead one's socket).
func dialWarm(sock string) (*warmConn, error) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return nil, err
	}
	uid, err := peerUID(c)
	if err != nil || uid != os.Geteuid() {
		c.Close()
		return nil, fmt.Errorf("warm daemon %s: its socket is not served by this user (uid %d)", sock, uid)
	}
	return &warmConn{c: c, dec: json.NewDecoder(bufio.NewReader(c)), enc: json.NewEncoder(c)}, nil
}

func (w *warmConn) call(req warmRequest) (warmReply, error) {
	var r warmReply
	if err := w.enc.Encode(req); err != nil {
		return r, fmt.Errorf("warm daemon: %w", err)
	}
	if err := w.dec.Decode(&r); err != nil {
		return r, fmt.Errorf("warm daemon: no answer: %w", err)
	}
	return r, nil
}

func noDaemon(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
}

// YieldWarm asks the warm daemon of store's branch, if there is one, to
// give the branch up (journal what is pending, unmount, release the lock,
// exit) and waits for it, bounded. It reports whether a daemon yielded;
// one in the middle of a run is a live session and does not
// (*BranchInUseError naming its client). holder is the pid the branch's
// lock names (0: unknown): when that is a warm daemon already on its way
// out (its socket gone), YieldWarm waits for it to exit. The CLI calls
// it in one place, when a verb found the branch's lock held (cmd/art's
// run).
func YieldWarm(store, branch string, holder int) (bool, error) {
	sock := WarmSocket(store, branch)
	w, err := dialWarm(sock)
	if noDaemon(err) {
		if !warmClosing(holder) {
			return false, nil
		}
		for end := time.Now().Add(warmWait); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if syscall.Kill(holder, 0) != nil {
				return true, nil
			}
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer w.c.Close()
	w.c.SetDeadline(time.Now().Add(warmWait))
	r, err := w.call(warmRequest{Op: "yield"})
	if err != nil {
		return false, err
	}
	if r.Busy {
		return false, &BranchInUseError{Store: store, Branch: branch, PID: r.PID}
	}
	if r.Error != "" {
		return false, fmt.Errorf("warm daemon of branch %s: %s", branch, r.Error)
	}
	return true, nil
}

// runWarm is Run's overlay mode with --warm: the command runs in a
// sandbox here, over the mount of the branch's warm daemon (started if
// there is none, replaced if its mount may not be reused), which records
// the run exactly as runOverlay does.
func runWarm(ctx context.Context, o Options, c Command, cfg *sandbox.Config) (Result, error) {
	sock := WarmSocket(o.Store, o.Branch)
	stdio, ready := readyStdio(o, c, cfg)
	um, ign, ok := warmwire.Status()
	req := beginRequest(o, c, cfg, os.Getpid(), ready, um, ign, ok, procKey())
	deadline := time.Now().Add(warmWait)
	for {
		w, err := dialWarm(sock)
		if noDaemon(err) {
			var ready warmReply
			endStart := phase.Start("warm daemon start (open, capture, mount)")
			ready, err = startWarm(ctx, o)
			endStart()
			if err != nil {
				var inUse *BranchInUseError
				if errors.As(err, &inUse) && time.Now().Before(deadline) {
					// A daemon that is shutting down still holds it, or
					// another session: ask, then try again.
					ok, yerr := YieldWarm(o.Store, o.Branch, inUse.PID)
					if yerr != nil {
						return Result{}, yerr
					}
					if !ok {
						return Result{}, err
					}
					continue
				}
				return Result{}, err
			}
			io.WriteString(o.warn(), ready.Warn)
			continue
		}
		if err != nil {
			return Result{}, err
		}
		endBegin := phase.Start("warm begin (daemon: reuse check, op, begin event)")
		var r warmReply
		var sigs chan os.Signal
		if req.Sandbox != nil {
			// A daemon with a sandbox ready starts the command as it
			// answers: this process's signals are caught from now on, so
			// that one sent before the answer is read reaches the command
			// (waitReady) instead of being lost.
			sigs = make(chan os.Signal, 4)
			signal.Notify(sigs, readySignals...)
			r, err = w.callWithFiles(req, stdio[:])
		} else {
			r, err = w.call(req)
		}
		endBegin()
		if sigs != nil && (err != nil || !r.Started) {
			passOnSignals(sigs)
			sigs = nil
		}
		if err != nil {
			w.c.Close()
			return Result{}, err
		}
		switch {
		case r.Busy:
			w.c.Close()
			return Result{}, &BranchInUseError{Store: o.Store, Branch: o.Branch, PID: r.PID}
		case r.Stale != "":
			// It has shut down: a fresh daemon captures the host.
			w.c.Close()
			if r.Error != "" {
				return Result{}, fmt.Errorf("warm daemon of branch %s: %s", o.Branch, r.Error)
			}
			if time.Now().After(deadline) {
				return Result{}, fmt.Errorf("warm daemon of branch %s: still discarded after %s (%s)", o.Branch, warmWait, r.Stale)
			}
			continue
		case r.Error != "":
			w.c.Close()
			return Result{}, fmt.Errorf("warm daemon of branch %s: %s", o.Branch, r.Error)
		}
		defer w.c.Close()
		if r.Started {
			return runOnReady(o, c, w, r, sigs)
		}
		return runOverWarm(ctx, o, c, cfg, w, r)
	}
}

// beginRequest is the begin request of c's run over o in sandbox cfg by
// the client pid: with the sandbox, for one started ahead, when the run
// may use one (ready: readyStdio) and the client's umask (um) and
// ignored signals (ign, ignOK) are known. Both art run's client and a
// daemon serving a raw request (warmexec.go) make it here.
func beginRequest(o Options, c Command, cfg *sandbox.Config, pid int, ready bool, um int, ign uint64, ignOK bool, proc string) warmRequest {
	req := warmRequest{Op: "begin", Desc: strings.Join(c.Argv, " "), PID: pid, Workspace: o.Workspace,
		UID: o.UID, GID: o.GID, JournalWrites: o.JournalWrites, Durability: o.Durability, DiskQuota: o.DiskQuota,
		Idle: o.Warm, Quiet: c.Quiet}
	if ready && um >= 0 && ignOK && utf8Only(reflect.ValueOf(cfg)) {
		// The daemon starts this sandbox from the request's JSON, which
		// turns bytes that are not UTF-8 into U+FFFD: a run with such an
		// argument, variable or path goes the other way (runOverWarm,
		// bwrap started here from the client's own memory).
		sb := *cfg
		req.Sandbox, req.Timeout, req.Umask, req.Proc = &sb, c.Timeout, um, proc
		// What a bwrap of ours would inherit ignored: supervise handles
		// these four before it starts one (an exec resets handled
		// signals to their default).
		for _, s := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
			ign &^= 1 << (s - 1)
		}
		req.SigIgn = ign
	}
	return req
}

// utf8Only says whether every string in v is valid UTF-8 (and so
// survives a JSON encoding unchanged).
func utf8Only(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || utf8Only(v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if !utf8Only(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if !utf8Only(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !utf8Only(it.Key()) || !utf8Only(it.Value()) {
				return false
			}
		}
	}
	return true
}

// warmClosing says whether pid, a branch's holder whose socket is gone,
// is a warm daemon (then on its way out).
func warmClosing(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(WarmDaemonCommand))
}

// runOverWarm runs c over the daemon's mount that the begin reply r
// names, and has the daemon record its end.
func runOverWarm(ctx context.Context, o Options, c Command, cfg *sandbox.Config, w *warmConn, r warmReply) (Result, error) {
	cfg.Home, cfg.Hide = r.Home, r.Hide
	made := bindMountPoints(cfg)
	res, runErr := supervise(ctx, o, c, cfg, nil)
	removeMountPoints(made)
	end := warmRequest{Op: "end", Result: &res}
	if runErr != nil {
		end.RunErr = runErr.Error()
	}
	endEnd := phase.Start("warm end (daemon: flush, end event, snapshot, op end)")
	e, err := w.call(end)
	endEnd()
	if err != nil {
		return Result{}, errors.Join(runErr, err)
	}
	out, err := warmEnded(o, r, e, res)
	if runErr != nil {
		return out, runErr
	}
	return out, err
}

// warmEnded is a warm run's result from its begin reply r, the daemon's
// end reply e and how the command ended: the overlay's messages shown,
// and the mount's failure or the daemon's error as the error.
func warmEnded(o Options, r, e warmReply, res sandbox.Result) (Result, error) {
	io.WriteString(o.warn(), e.Log)
	var capture workspace.ImportStats
	if r.Capture != nil {
		capture = *r.Capture
	}
	out := Result{Result: res, Branch: r.Branch, Snapshot: e.Snapshot, Changed: e.Changed, Capture: capture}
	if e.Failed != nil {
		return out, e.Failed.error()
	}
	if e.Error != "" {
		return out, fmt.Errorf("warm daemon of branch %s: %s", r.Branch, e.Error)
	}
	return out, nil
}

// runOnReady waits for the command the daemon runs in its sandbox
// started ahead (begin reply r), and reports as runOverWarm does.
func runOnReady(o Options, c Command, w *warmConn, r warmReply, sigs chan os.Signal) (Result, error) {
	if c.Limits != (sandbox.Limits{}) && !c.Quiet {
		fmt.Fprintf(o.warn(), "art: limits enforced by %s\n", r.LimitedBy)
	}
	e, err := waitReady(w, sigs)
	if err != nil {
		return Result{}, err
	}
	var res sandbox.Result
	if e.Result != nil {
		res = *e.Result
	}
	return warmEnded(o, r, e, res)
}

// startWarm starts the daemon of o's branch and waits until it has
// captured and mounted (its ready line) or failed.
func startWarm(ctx context.Context, o Options) (warmReply, error) {
	var r warmReply
	exe, err := os.Executable()
	if err != nil {
		return r, fmt.Errorf("warm daemon: %w", err)
	}
	if _, err := StateDir(); err != nil {
		return r, err
	}
	logf, err := os.OpenFile(WarmLog(o.Store, o.Branch), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return r, fmt.Errorf("warm daemon log: %w", err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return r, err
	}
	defer pr.Close()
	store, err := filepath.Abs(o.Store) // the daemon runs in /
	if err != nil {
		return r, err
	}
	args := []string{WarmDaemonCommand, "--db", store, "--mount", o.Workspace, "--branch", o.Branch,
		"--uid", strconv.Itoa(o.UID), "--gid", strconv.Itoa(o.GID), "--idle", o.Warm.String()}
	if o.Durability != "" {
		args = append(args, "--durability", o.Durability)
	}
	if o.JournalWrites {
		args = append(args, "--journal-writes")
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf // no stdin: /dev/null
	cmd.ExtraFiles = []*os.File{pw}     // fd 3: the ready line
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return r, fmt.Errorf("warm daemon: %w", err)
	}
	// Not waited for beyond this: it outlives us. Reaping is init's.
	go cmd.Wait()
	if err := json.NewDecoder(io.LimitReader(pr, 16<<20)).Decode(&r); err != nil {
		return r, fmt.Errorf("warm daemon: it exited before it was ready (see %s): %v", WarmLog(o.Store, o.Branch), err)
	}
	if r.InUsePID != 0 {
		io.WriteString(o.warn(), r.Warn)
		return r, &BranchInUseError{Store: o.Store, Branch: o.Branch, PID: r.InUsePID}
	}
	if r.Error != "" {
		io.WriteString(o.warn(), r.Warn)
		return r, fmt.Errorf("warm daemon: %s", r.Error)
	}
	return r, nil
}

// warmDaemon serves one branch's mount to art run --warm clients.
type warmDaemon struct {
	s     *Session
	o     Options
	home  string
	hide  []string
	sock  string
	ln    net.Listener
	bg    context.Context
	fresh *workspace.ImportStats // the start's capture, for the first run

	mu       sync.Mutex
	busy     bool
	runs     uint64        // runs begun (busy set)
	client   int           // the pid of the run in progress
	ended    bool          // the run in progress has recorded its end: only its clean-up is left
	idleC    chan struct{} // closed when the run in progress is over (busy cleared)
	closing  bool
	closeOut bool // shut down when the run in progress ends (SIGTERM)
	idle     time.Duration
	timer    *time.Timer
	left     journal.State // the branch's head after the last run (or the capture)
	done     chan struct{}
	closeErr error
	serving  sync.WaitGroup // connections being answered

	execHandler ExecHandler // parses raw runs (warmexec.go)

	ready    *readyBox      // the sandbox started ahead (warmready.go)
	readying sync.WaitGroup // its start, and discards in progress
	looking  sync.WaitGroup // lookAhead goroutines in progress: the store stays open for them
}

// ServeWarm is the warm daemon of o's branch (art __warm-daemon): it
// opens the store, captures o's workspace and mounts the branch exactly
// as a session does, writes a ready line (warmReply) to ready, then
// serves runs on its socket until it has been idle for idle, is asked to
// yield, or finds its mount stale; then it unmounts and releases. exec
// parses raw runs (warmexec.go; nil: none are served).
func ServeWarm(ctx context.Context, o Options, idle time.Duration, ready io.WriteCloser, exec ExecHandler) error {
	bg := context.WithoutCancel(ctx)
	var warn bytes.Buffer
	o.Warn, o.Progress = &warn, nil
	cfg := &sandbox.Config{}
	say := func(r warmReply) {
		r.Warn = warn.String()
		json.NewEncoder(ready).Encode(r)
		ready.Close()
	}
	s, err := Open(bg, o, cfg, nil)
	if err != nil {
		if s.DB != nil {
			s.DB.Close()
		}
		r := warmReply{Error: err.Error()}
		var inUse *BranchInUseError
		if errors.As(err, &inUse) {
			r.InUsePID = max(inUse.PID, 1)
		}
		say(r)
		return err
	}
	s.warn = os.Stderr // the log file, from now on
	d := &warmDaemon{s: s, o: o, home: cfg.Home, hide: cfg.Hide, sock: WarmSocket(o.Store, s.Branch), bg: bg,
		fresh: &s.Capture, idle: idle, done: make(chan struct{}), execHandler: exec}
	d.left, err = s.DB.Head(bg, s.Branch)
	if err == nil {
		// Open removed a dead daemon's socket under the branch's lock.
		d.ln, err = net.Listen("unix", d.sock)
	}
	if err == nil {
		err = os.Chmod(d.sock, 0o600)
	}
	if err != nil {
		say(warmReply{Error: err.Error()})
		d.shutdown()
		return err
	}
	say(warmReply{PID: os.Getpid(), Branch: s.Branch, Home: d.home})
	warmLogf("art warm daemon %d: serving branch %s of %s at %s (idle %s)\n", os.Getpid(), s.Branch, o.Store, d.home, idle)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		for range sigs {
			d.closeWhenIdle()
		}
	}()
	d.mu.Lock()
	d.armLocked()
	d.mu.Unlock()
	go d.accept()
	<-d.done
	signal.Stop(sigs)
	d.mu.Lock() // no Add after this (accept checks doneClosed under mu)
	d.mu.Unlock()
	// The answers to the request that shut us down (a yield, a stale
	// begin) and to any waiting on it go out before the process ends.
	answered := make(chan struct{})
	go func() { d.serving.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
	}
	return d.closeErr
}

// warmLogf writes a line to the daemon's log (its stderr), timed.
func warmLogf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05.000 ")+format, a...)
}

// doneClosed says whether shutdown has finished.
func (d *warmDaemon) doneClosed() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// armLocked (re)starts the idle timer.
func (d *warmDaemon) armLocked() {
	if d.timer != nil {
		d.timer.Stop()
	}
	d.timer = time.AfterFunc(d.idle, d.closeWhenIdle)
}

// closeWhenIdle shuts the daemon down now if no run is in progress, else
// when it ends.
func (d *warmDaemon) closeWhenIdle() {
	d.mu.Lock()
	if d.busy {
		d.closeOut = true
		d.mu.Unlock()
		return
	}
	if d.closing {
		d.mu.Unlock()
		return
	}
	d.closing = true
	d.mu.Unlock()
	d.shutdown()
}

// shutdown stops serving, unmounts (journaling what is pending), releases
// the branch and the store, and ends ServeWarm. Called once, with closing
// set (or before serving).
func (d *warmDaemon) shutdown() error {
	if d.ln != nil {
		d.ln.Close() // removes the socket: no new client finds us
	}
	// Before the unmount: its mount namespace holds a copy of the mount.
	d.discardReady()
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	var err error
	// A client killed mid-run leaves a sandbox that takes a moment to
	// die (--die-with-parent): until it has, the mount is busy.
	for start := time.Now(); ; {
		if err = d.s.Close(d.bg); err == nil || time.Since(start) > warmWait {
			break
		}
		var fe *overlay.FailedError
		if errors.As(err, &fe) {
			break
		}
		warmLogf("art warm daemon: close (will retry): %v\n", err)
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		warmLogf("art warm daemon: close: %v\n", err)
	}
	d.looking.Wait() // a raw run's look ahead, begun before the shutdown
	if cerr := d.s.DB.Close(); err == nil {
		err = cerr
	}
	d.closeErr = err
	warmLogf("art warm daemon %d: done\n", os.Getpid())
	close(d.done)
	return err
}

func (d *warmDaemon) accept() {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return // closed
		}
		if uid, err := peerUID(c); err != nil || uid != os.Geteuid() {
			c.Close() // another user's process: nothing of ours to see
			continue
		}
		d.mu.Lock()
		if d.closing && d.doneClosed() {
			d.mu.Unlock()
			c.Close()
			return
		}
		d.serving.Add(1)
		d.mu.Unlock()
		go func() {
			defer d.serving.Done()
			d.serve(c)
		}()
	}
}

func (d *warmDaemon) serve(c net.Conn) {
	defer c.Close()
	w, files, err := readFirst(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		return
	}
	var req warmRequest
	if err := w.dec.Decode(&req); err != nil {
		return
	}
	switch req.Op {
	case "yield":
		d.mu.Lock()
		d.waitEndedLocked()
		// Closing first: a daemon that refused a run as stale is busy
		// with that request while it shuts down, but runs no command -
		// it is going anyway, so the yield waits for it as for any
		// shutdown under way.
		if d.closing {
			d.mu.Unlock()
			<-d.done
			w.enc.Encode(warmReply{})
			return
		}
		if d.busy {
			pid := d.client
			d.mu.Unlock()
			w.enc.Encode(warmReply{Busy: true, PID: pid})
			return
		}
		d.closing = true
		d.mu.Unlock()
		var r warmReply
		if err := d.shutdown(); err != nil {
			r.Error = err.Error()
		}
		w.enc.Encode(r)
	case "begin":
		d.run(w, req, files, nil)
	case "exec":
		d.exec(w, c, req, files)
	default:
		w.enc.Encode(warmReply{Error: fmt.Sprintf("unknown request %q", req.Op)})
	}
}

// stale says why the mount may not serve req's run ("" when it may).
func (d *warmDaemon) stale(req warmRequest, look *hostLook) string {
	switch {
	case req.Workspace != d.o.Workspace:
		return "another workspace"
	case req.UID != d.o.UID || req.GID != d.o.GID:
		return "another sandbox user"
	case req.JournalWrites != d.o.JournalWrites || req.Durability != d.o.Durability:
		return "other store options"
	}
	if look == nil {
		look = &hostLook{}
		d.look(d.bg, look, d.fresh == nil)
	} else {
		<-look.done
	}
	if look.headErr != nil {
		return "branch head: " + look.headErr.Error()
	}
	if look.head.Seq != d.left.Seq || look.head.Root != d.left.Root {
		return "the branch changed outside the warm mount"
	}
	if d.fresh != nil {
		// Just captured: the first run is served as a cold session's run
		// is, right after its capture. A host edit made since is not
		// served behind the branch's back (the mount reads a host file
		// only while its size, times and inode are the capture's, else
		// the store's bytes); the next run's check finds it, and a fresh
		// daemon captures it, as the next cold session would. Checking
		// here too would let a host file that never stops changing (a
		// log) refuse every daemon until the client gives up.
		return ""
	}
	if look.hostErr != nil {
		return "host check: " + look.hostErr.Error()
	}
	if !look.same {
		return "the host workspace changed"
	}
	return ""
}

// hostLook is what stale asks of the store and the host: the branch's
// head, and whether the host workspace is still as last captured (a run
// must find every host edit made before it captured, as a cold session's
// capture would; the mount itself serves an edited host file from the
// store, never the edit: then a fresh daemon captures it).
type hostLook struct {
	runs    uint64        // warmDaemon.runs when lookAhead began it
	done    chan struct{} // closed when lookAhead's goroutine has filled it in
	head    journal.State
	headErr error
	same    bool
	hostErr error
}

// look fills in l: the branch's head, then, with host, the host check
// (stale does not ask for it while the start's capture is fresh: a walk
// of the whole workspace for nothing); ctx may cut the host check short
// (not the head: reading it may first run a redo log's recovery, which a
// run not served should not interrupt).
func (d *warmDaemon) look(ctx context.Context, l *hostLook, host bool) {
	l.head, l.headErr = d.s.DB.Head(d.bg, d.s.Branch)
	if l.headErr != nil || !host {
		return
	}
	_, l.same, l.hostErr = workspace.Unchanged(ctx, d.s.DB, workspace.ImportOptions{Dir: d.o.Workspace, Branch: d.s.Branch, Capture: true, SkipUnchanged: true, RacyByContent: true})
}

// lookAhead begins the hostLook of a raw run whose request has just
// arrived, so that it runs while the request is parsed (a millisecond or
// two each on a slow machine, which a run on a sandbox started ahead
// waits for), or returns nil when a run is in progress: its end moves
// the head and d.left, and run looks again then. It began after the
// request arrived, so it sees every host edit made before the client
// asked. ctx ends it early when the run is not served after all.
func (d *warmDaemon) lookAhead(ctx context.Context) *hostLook {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy || d.closing {
		return nil
	}
	// Begun under mu while not closing: a shutdown, which sets closing
	// under mu first, waits for it (looking) before closing the store.
	// d.fresh is cleared only by a run's begin, which a look begun before
	// it is not used for (runs).
	l := &hostLook{runs: d.runs, done: make(chan struct{})}
	host := d.fresh == nil
	d.looking.Add(1)
	go func() {
		defer d.looking.Done()
		defer close(l.done)
		d.look(ctx, l, host)
	}()
	return l
}

// run serves one run: begin its op, hand the mount to the client, and
// record its end when the client says how the command ended (or that it
// did not run), or as killed when the client goes away.
//
// With x (a raw run, warmexec.go) it serves only a run on the sandbox
// started ahead, and answers nothing itself: what x needs is set in it.
// Whatever would make it serve the run otherwise (shutting down, busy,
// the mount stale, no sandbox ahead of the run's policy) sets
// x.fallback before anything is done.
func (d *warmDaemon) run(w *warmConn, req warmRequest, files []*os.File, x *execRun) {
	d.mu.Lock()
	d.waitEndedLocked()
	switch {
	case x != nil && (d.closing || d.busy):
		d.mu.Unlock()
		x.fallback = "the daemon is busy or shutting down"
		return
	case d.closing:
		d.mu.Unlock()
		<-d.done
		w.enc.Encode(warmReply{Stale: "shutting down"})
		return
	case d.busy:
		pid := d.client
		d.mu.Unlock()
		w.enc.Encode(warmReply{Busy: true, PID: pid})
		return
	}
	d.busy, d.client, d.ended, d.idleC = true, req.PID, false, make(chan struct{})
	d.runs++
	if x != nil && x.look != nil && x.look.runs+1 != d.runs {
		// Another run began since it did: look again.
		x.look = nil
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	if req.Idle > 0 && x == nil {
		d.idle = req.Idle
	}
	d.mu.Unlock()
	shut := false
	noop := false // x's fallback: nothing was done (no sandbox to start)
	defer func() {
		d.mu.Lock()
		d.busy, d.client, d.ended = false, 0, false
		close(d.idleC)
		if d.closeOut && !d.closing {
			shut = true
		}
		switch {
		case shut && d.closing:
			shut = false // shut down already
		case shut:
			d.closing = true
		case !d.closing:
			d.armLocked()
		}
		d.mu.Unlock()
		if shut {
			d.shutdown()
		} else if req.Sandbox != nil && !noop {
			// The next run's sandbox, with this run's policy, while
			// nobody waits.
			d.startReady(d.runConfig(req), req.Desc)
		}
	}()

	if x != nil {
		if why := d.stale(req, x.look); why != "" {
			x.fallback, noop = "the warm mount may not serve it: "+why, true
			return
		}
		if !d.readyFor(req, files) {
			x.fallback, noop = "no sandbox started ahead for its policy", true
			return
		}
		if req.Idle > 0 {
			d.mu.Lock()
			d.idle = req.Idle
			d.mu.Unlock()
		}
		// Served from here on, whatever happens: the client's messages
		// may reach its stderr.
		x.serving()
	} else if why := d.stale(req, nil); why != "" {
		warmLogf("art warm daemon: mount discarded: %s\n", why)
		d.mu.Lock()
		d.closing = true
		d.mu.Unlock()
		r := warmReply{Stale: why}
		if err := d.shutdown(); err != nil {
			r.Error = err.Error()
		}
		w.enc.Encode(r)
		return
	}
	r, op, before, err := d.begin(req)
	if err != nil {
		shut = true
		d.markEnded()
		if x != nil {
			x.err = fmt.Errorf("warm daemon of branch %s: %s", d.s.Branch, err)
			return
		}
		w.enc.Encode(warmReply{Error: err.Error()})
		return
	}
	if p := d.runReady(req, files); p != nil {
		for i, f := range files {
			// The command has them now. Closed here, not at serve's
			// end: the daemon holds no copy while the command runs, so
			// a reader of the client's output sees its end when the
			// command and the client close theirs. A raw run's stderr
			// (x) stays for the client's messages after the command,
			// which the daemon writes; serve closes it after the answer,
			// as the front, holding its own, exits.
			if x == nil || i != 2 {
				f.Close()
			}
		}
		r.Started, r.LimitedBy = true, p.LimitedBy()
		var onSignal func(syscall.Signal)
		if x != nil {
			x.started(r)
			onSignal = x.onSignal
		} else if err := w.enc.Encode(r); err != nil {
			warmLogf("art warm daemon: begin: %v\n", err)
		}
		res, gone, werr := superviseReady(w, p, req.Timeout, onSignal)
		end := warmRequest{Op: "end", Result: &res}
		if werr != nil {
			end.RunErr = werr.Error()
		}
		e, stop := d.end(req, end, gone, op, before)
		shut = shut || stop
		if werr != nil && e.Error == "" {
			e.Error = werr.Error()
		}
		e.Result = &res
		d.markEnded()
		if x != nil {
			x.ended(r, e, res)
			return
		}
		w.enc.Encode(e)
		return
	}
	if x != nil {
		// The sandbox ahead, there a moment ago, did not take the
		// command: the op ends as one whose command did not run.
		e, stop := d.end(req, warmRequest{Op: "end", RunErr: "not run"}, false, op, before)
		shut = shut || stop
		d.markEnded()
		x.err = errors.New("warm daemon: the sandbox started ahead could not run the command (see its log)")
		if e.Error != "" {
			x.err = fmt.Errorf("%w; %s", x.err, e.Error)
		}
		return
	}
	if err := w.enc.Encode(r); err != nil {
		warmLogf("art warm daemon: begin: %v\n", err)
	}
	var end warmRequest
	gone := w.dec.Decode(&end) != nil || end.Op != "end" || end.Result == nil
	e, stop := d.end(req, end, gone, op, before)
	shut = shut || stop
	d.markEnded()
	w.enc.Encode(e)
}

// markEnded says the run in progress has recorded its end: what is left
// (run's deferred clean-up) is bounded and needs no client, so a request
// that comes now waits for it rather than be told the branch is busy.
// It is set before the end's reply, because the client that gets it may
// at once run again or yield (art checkout, art undo, a script's next
// step): that client's own run must never look like someone else's.
func (d *warmDaemon) markEnded() {
	d.mu.Lock()
	d.ended = true
	d.mu.Unlock()
}

// waitEndedLocked waits, with mu held, while a run past its end finishes
// its clean-up. The clean-up is not moved before the reply instead: a
// run begun while busy is clear would meet the old run's shutdown or its
// sandbox started ahead half made.
func (d *warmDaemon) waitEndedLocked() {
	for d.busy && d.ended {
		ch := d.idleC
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
	}
}

// begin starts req's run op: the op, its begin event, the mount's
// changes journaled under it.
func (d *warmDaemon) begin(req warmRequest) (warmReply, *journal.Op, journal.State, error) {
	db, fsys := d.s.DB, d.s.FS
	before, err := db.Head(d.bg, d.s.Branch)
	if err != nil {
		return warmReply{}, nil, before, err
	}
	// One transaction: a run op is never without its begin event.
	op, err := db.BeginOpWith(d.bg, d.s.Branch, "run", req.Desc, func(tx *journal.Tx) error {
		return tx.Record(journal.Event{Kind: journal.EvBegin, PID: int64(req.PID), Text: req.Desc})
	})
	if err != nil {
		return warmReply{}, nil, before, err
	}
	if err = fsys.SetOp(op); err != nil {
		status := -1
		op.End(d.bg, &status)
		return warmReply{}, nil, before, err
	}
	fsys.SetQuota(req.DiskQuota)
	capture := d.fresh
	d.fresh = nil
	if capture == nil {
		// Nothing captured for this run: the host was unchanged.
		capture = &workspace.ImportStats{NothingChanged: true, Snapshot: journal.Snapshot{ID: before.Snapshot, Seq: before.Seq, Branch: before.Branch, Root: before.Root}}
	}
	return warmReply{Home: d.home, Hide: d.hide, Branch: d.s.Branch, Capture: capture, PID: os.Getpid()}, op, before, nil
}

// end records the end of the run of op as runOverlay does: whatever is
// dirty journaled, the end event and the snapshot, the op's end with the
// command's status. stop says the daemon must shut down after it (the
// client went away, the mount failed).
func (d *warmDaemon) end(req, end warmRequest, gone bool, op *journal.Op, before journal.State) (warmReply, bool) {
	db, fsys := d.s.DB, d.s.FS
	var r warmReply
	desc := req.Desc
	ferr := fsys.Flush(d.bg)
	fsys.SetQuota(0)
	var held bytes.Buffer
	d.s.log.flush(&held)
	r.Log = held.String()
	var failed *overlay.FailedError
	if errors.As(ferr, &failed) {
		status := -1
		if end.Result != nil && end.RunErr == "" {
			status = end.Result.ExitCode
		}
		snap, rerr := endFailed(d.bg, db, op, status, desc, failed)
		r.Snapshot = snap
		r.Failed = &warmFailed{Err: failed.Err.Error(), NotKept: failed.NotKept, MoreNotKept: failed.MoreNotKept,
			Refused: failed.Refused, RefusedPaths: failed.RefusedPaths}
		if rerr != nil {
			r.Failed.Unrecorded = rerr.Error()
		}
		return r, true
	}
	status := -1
	stop := false
	ended := false // recordEnd ended the op with its end event
	var err error
	switch {
	case ferr != nil:
		err = ferr
		stop = true
	case gone:
		// The client died (killed): its sandbox dies with it. The run is
		// recorded as one that was killed, and the mount goes with the
		// daemon - whatever of the sandbox lingers must not meet the
		// next run.
		status = 128 + int(syscall.SIGKILL)
		stop = true
		err = op.Update(d.bg, func(tx *journal.Tx) error {
			if err := tx.Record(journal.Event{Kind: journal.EvEnd, Status: int64(status), Text: "killed: art run's client went away (exit 137)"}); err != nil {
				return err
			}
			var err error
			r.Snapshot, err = tx.Snapshot("run " + desc)
			return err
		})
	case end.RunErr != "":
		// The command did not run (runOverlay's early failure): the op
		// ends with no end event, status -1.
	default:
		status = end.Result.ExitCode
		r.Snapshot, err = recordEnd(d.bg, op, *end.Result, desc, status)
		ended = err == nil
	}
	if err == nil && !ended {
		err = op.End(d.bg, &status)
	}
	if serr := fsys.SetOp(nil); err == nil {
		err = serr
	}
	if err != nil {
		r.Error = err.Error()
		return r, true
	}
	if d.left, err = db.Head(d.bg, d.s.Branch); err != nil {
		r.Error = err.Error()
		return r, true
	}
	if !req.Quiet && !gone && end.RunErr == "" {
		journal.Diff(d.bg, db.Objects(), before.Root, r.Snapshot.Root, func(journal.Change) error { r.Changed++; return nil })
	}
	return r, stop
}
