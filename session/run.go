package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/netproxy"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// Command is one command Run starts in the sandbox, and how.
type Command struct {
	Argv []string
	Env  []string // KEY=VALUE, all the command gets besides HOME, PATH, PWD, USER

	Binds     []sandbox.Bind    // besides the workspace's .art/config/binds.json
	Net       sandbox.Net       // host, none or allow
	NetPolicy *netpolicy.Policy // with NetAllow (needs a store)
	Timeout   time.Duration     // SIGTERM, grace, SIGKILL of the tree; exit 124
	Limits    sandbox.Limits
	TmpSize   int64 // size of each private tmpfs (0: bwrap's default)
	Trace     TraceOptions
	OwnsTTY   bool // the command gets a PTY on the caller's terminal

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Quiet          bool // no "limits enforced by" line on Options.Warn; no Changed count
}

// Result is how a command run ended, and (with a store) what it left.
type Result struct {
	sandbox.Result
	Direct   bool             // direct mode: nothing recorded
	Branch   string           // the branch it ran on
	Snapshot journal.Snapshot // the snapshot that ended the run
	Changed  int              // paths changed since the capture (not counted when Quiet)
	// Capture is what the capture before the command did (its Conflicts:
	// paths both the host and the branch had changed).
	Capture workspace.ImportStats
}

// Run runs one command in a sandbox over o's workspace and returns its
// exit status. With a store (o.Store) it is a session of its own: open,
// the command as one "run" operation, close, a snapshot. Without one
// (direct mode) the workspace is bound read-write and nothing is
// recorded. While the command runs, SIGINT and SIGQUIT sent to this
// process are passed on to it, and SIGTERM and SIGHUP stop it.
func Run(ctx context.Context, o Options, c Command) (Result, error) {
	endPrep := phase.Start("prepare sandbox config")
	cfg, err := sandboxConfig(o, c)
	if err != nil {
		return Result{}, err
	}
	release, err := protectPolicy(o.Store == "", o.Workspace, cfg)
	if err != nil {
		return Result{}, err
	}
	defer release()
	endPrep()
	if o.Store == "" {
		return runDirect(ctx, o, c, cfg)
	}
	if o.Warm > 0 {
		if c.Trace.Enabled() || c.Net == sandbox.NetAllow || o.At != "" {
			// The tracer and the allow-list proxy journal through the
			// mount's recorder, which is the daemon's.
			return Result{}, usagef("--warm cannot be used with --trace, --trace-log, --net allow or --at")
		}
		return runWarm(ctx, o, c, cfg)
	}
	return runOverlay(ctx, o, c, cfg)
}

// sandboxConfig is the sandbox of c's run over o's workspace, before
// protectPolicy: it reads the workspace's binds file and changes nothing.
func sandboxConfig(o Options, c Command) (*sandbox.Config, error) {
	name, err := workspace.Name(o.Workspace)
	if err != nil {
		return nil, err
	}
	fileBinds, err := readBindsFile(o.Workspace)
	if err != nil {
		return nil, err
	}
	cfg := &sandbox.Config{
		Command: c.Argv, Env: c.Env, Name: name, Workspace: o.Workspace,
		PolicyDir: filepath.Join(o.Workspace, sandbox.ArtDir),
		Binds:     append(fileBinds, c.Binds...), Net: c.Net,
		UID: o.UID, GID: o.GID, TmpSize: c.TmpSize, Limits: c.Limits, OwnsTTY: c.OwnsTTY,
	}
	// The deny-list (TIOCSTI, keyctl, bpf, the new mount API...) always;
	// with tracing, also the calls that stop for the tracer.
	if cfg.Seccomp, err = c.Trace.seccompProgram(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func runDirect(ctx context.Context, o Options, c Command, cfg *sandbox.Config) (Result, error) {
	if c.Trace.Enabled() && c.Trace.Log == "" {
		c.Trace.Log = "-" // no store to journal to: the original art's default, stderr
	}
	if msg := unwritableWorkspace(o.Workspace, cfg.UID, cfg.GID); msg != "" && o.Warn != nil {
		fmt.Fprintln(o.Warn, "art: warning: "+msg)
	}
	res, err := supervise(ctx, o, c, cfg, nil)
	return Result{Result: res, Direct: true}, err
}

// runOverlay runs c in the sandbox over a session's overlay and records
// the run: a run op with begin and end events and the snapshot it ended at.
func runOverlay(ctx context.Context, o Options, c Command, cfg *sandbox.Config) (r Result, err error) {
	// The store is written after the command ends, whatever signal ended
	// it: cleanup must not see a cancelled context.
	bg := context.WithoutCancel(ctx)
	desc := strings.Join(c.Argv, " ")
	var op *journal.Op
	status := -1
	endOpen := phase.Start("session open")
	s, err := Open(ctx, o, cfg, func(db *journal.DB, branch string) (*journal.Op, error) {
		defer phase.Start("begin op + begin event")()
		// One transaction: a run op is never without its begin event.
		var err error
		op, err = db.BeginOpWith(ctx, branch, "run", desc, func(tx *journal.Tx) error {
			return tx.Record(journal.Event{Kind: journal.EvBegin, PID: int64(os.Getpid()), Text: desc})
		})
		return op, err
	})
	released := func() {} // CloseAside's wait
	defer func() {
		if op != nil { // an early failure: close the op so the log is true
			op.End(bg, &status)
		}
		if s.DB != nil {
			endDB := phase.Start("db close")
			s.DB.Close()
			endDB()
		}
		released()
	}()
	endOpen()
	if err != nil {
		return r, err
	}
	var proxy *netproxy.Proxy
	if c.Net == sandbox.NetAllow {
		if proxy, err = setupNetAllow(bg, s.Dir, c.NetPolicy, s.FS, cfg); err != nil {
			return r, errors.Join(err, s.Close(bg))
		}
	}
	endBind := phase.Start("bind mount points")
	made := bindMountPoints(cfg)
	endBind()
	restoreLog := holdStdLog(s.log) // nothing of art's lands on the command's screen
	endSup := phase.Start("sandbox (start to exit)")
	res, runErr := supervise(ctx, o, c, cfg, s.FS.Record)
	endSup()
	restoreLog()
	removeMountPoints(made)
	if proxy != nil {
		// Before the unmount commits the run's Batch for the last time:
		// the proxy records through it.
		proxy.Close()
	}
	endClose := phase.Start("session close (unmount; the rest aside)")
	// The session's state (directories, locks) is released beside the
	// end's records and the store's close; the deferred function waits.
	released, uerr := s.CloseAside(bg)
	endClose()
	var failed *overlay.FailedError
	if errors.As(uerr, &failed) {
		// The session is over all the same: say so in the store.
		if runErr == nil {
			status = res.ExitCode
		}
		r = Result{Result: res, Branch: s.Branch, Capture: s.Capture}
		var rerr error
		if r.Snapshot, rerr = endFailed(bg, s.DB, op, status, desc, failed); rerr == nil {
			op = nil
		}
		return r, errors.Join(runErr, &FailedError{FailedError: failed, Unrecorded: rerr})
	}
	if runErr != nil {
		return r, errors.Join(runErr, uerr)
	}
	if uerr != nil {
		return r, uerr
	}
	status = res.ExitCode
	endSnap := phase.Start("end event + snapshot + op end")
	snap, err := recordEnd(bg, op, res, desc, status)
	if err != nil {
		return r, err // the op is still open: the deferred End closes it
	}
	endSnap()
	op = nil
	r = Result{Result: res, Branch: s.Branch, Snapshot: snap, Capture: s.Capture}
	if !c.Quiet {
		defer phase.Start("diff (changed count)")()
		journal.Diff(bg, s.DB.Objects(), s.Before.Root, snap.Root, func(journal.Change) error { r.Changed++; return nil })
	}
	return r, nil
}

// recordEnd records the end event of a run that ended with res, the
// snapshot it leaves and the op's end with status, in one transaction of
// op (one commit fewer than an update and an End): all of them or, when it
// fails, none, and the op is still open.
func recordEnd(ctx context.Context, op *journal.Op, res sandbox.Result, desc string, status int) (journal.Snapshot, error) {
	var snap journal.Snapshot
	err := op.EndWith(ctx, &status, func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvEnd, Status: int64(res.ExitCode), Text: DescribeExit(res)}); err != nil {
			return err
		}
		var err error
		snap, err = tx.Snapshot("run " + desc)
		return err
	})
	return snap, err
}

// endFailed ends the run op of a session whose mount failed: the pack a
// failed write left is given up (freeing what the lost transaction
// appended), the end event says why the run failed (journal.FailedPrefix),
// a snapshot records what the store kept, and the op gets the command's
// status. On a disk still too full for a snapshot the end event goes
// alone.
func endFailed(ctx context.Context, db *journal.DB, op *journal.Op, status int, desc string, failed *overlay.FailedError) (journal.Snapshot, error) {
	_, aerr := db.AbandonFailedPack()
	end := journal.Event{Kind: journal.EvEnd, Status: int64(status), Text: journal.FailedPrefix + failed.Reason()}
	var snap journal.Snapshot
	err := op.Update(ctx, func(tx *journal.Tx) error {
		if err := tx.Record(end); err != nil {
			return err
		}
		var err error
		snap, err = tx.Snapshot("run " + desc + " (failed)")
		return err
	})
	if err != nil {
		snap = journal.Snapshot{}
		err = op.Update(ctx, func(tx *journal.Tx) error { return tx.Record(end) })
	}
	if err == nil {
		err = op.End(ctx, &status)
	}
	if err != nil {
		return snap, errors.Join(aerr, err)
	}
	return snap, nil
}

// supervise starts the sandbox and waits for it, forwarding signals and
// enforcing the timeout.
// record journals trace records (nil: direct mode, nothing to journal to).
func supervise(ctx context.Context, o Options, c Command, cfg *sandbox.Config,
	record func(context.Context, ...journal.Event) error) (sandbox.Result, error) {
	warn := o.warn()
	// A missing command is the shell's 127 (126: not executable), not
	// bwrap's 1, with art's own message.
	endLook := phase.Start("look command")
	le := lookCommand(cfg)
	endLook()
	if le != nil {
		fmt.Fprintf(warn, "art: %s\n", termtext.Text(le.Message))
		code := 127
		if le.Code == execapi.CodeNoExec {
			code = 126
		}
		return sandbox.Result{ExitCode: code}, nil
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	var start sandbox.Starter
	if c.Trace.Enabled() {
		if record == nil {
			record = func(context.Context, ...journal.Event) error { return nil }
		}
		start = func(cmd *exec.Cmd) (func() (syscall.WaitStatus, *syscall.Rusage, error), error) {
			tr, finish, err := c.Trace.start(cmd, record, warn)
			if err != nil {
				return nil, err
			}
			return func() (syscall.WaitStatus, *syscall.Rusage, error) {
				ws, err := tr.Wait()
				if ferr := finish(); err == nil {
					err = ferr
				}
				return ws, nil, err
			}, nil
		}
	}
	endStart := phase.Start("sandbox start (to release)")
	p, err := sandbox.Start(cfg, sandbox.IO{Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr}, start)
	endStart()
	endWait := phase.Start("command (release to exit)")
	defer endWait()
	if err != nil {
		return sandbox.Result{}, err
	}
	if c.Limits != (sandbox.Limits{}) && !c.Quiet {
		fmt.Fprintf(warn, "art: limits enforced by %s\n", p.LimitedBy())
	}
	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	const grace = 5 * time.Second
	cancelled := ctx.Done()
	for {
		select {
		case <-p.Done():
			return p.Wait()
		case <-timeout:
			go p.Stop(grace, true)
			timeout = nil
		case s := <-sigs:
			switch s {
			case syscall.SIGINT, syscall.SIGQUIT:
				// A terminal's Ctrl-C reaches a PTY sandbox as a byte;
				// this one was sent to art: pass it on.
				p.Signal(s.(syscall.Signal))
			default: // SIGTERM, SIGHUP: the run is over
				go p.Stop(grace, false)
			}
		case <-cancelled:
			// The caller's context may also watch SIGINT and SIGTERM
			// (art's does); the signal itself is handled above.
			cancelled = nil
		}
	}
}

// DescribeExit says how a command ended, for people: "exit 3", "timed
// out (exit 124)", "killed by SIGKILL (exit 137)".
func DescribeExit(r sandbox.Result) string {
	switch {
	case r.TimedOut:
		return "timed out (exit 124)"
	case r.OOMKilled && r.Signal == syscall.SIGKILL:
		return fmt.Sprintf("killed: out of memory (exit %d)", r.ExitCode)
	case r.Signal != 0:
		return fmt.Sprintf("killed by %s (exit %d)", unix.SignalName(r.Signal), r.ExitCode)
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}

// unwritableWorkspace says, as root, when the sandbox's uid cannot write
// the direct-mode workspace (a root-owned project: the sandbox never runs
// as uid 0), and what to do; "" when it can, or art is not root.
func unwritableWorkspace(ws string, uid, gid int) string {
	if os.Geteuid() != 0 {
		return "" // the sandbox runs as art's own user
	}
	var st unix.Stat_t
	if unix.Stat(ws, &st) != nil {
		return ""
	}
	m := st.Mode
	if int(st.Uid) == uid && m&0o200 != 0 || int(st.Gid) == gid && m&0o020 != 0 || m&0o002 != 0 {
		return ""
	}
	return fmt.Sprintf("the sandbox runs as uid %d, which cannot write %s (owner %d, mode %04o): add -d FILE for an overlay the agent can write, or --user the owner (never 0), or chown the workspace",
		uid, ws, st.Uid, m&0o7777)
}
