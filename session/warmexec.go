package session

// A raw warm run (docs/architecture.md, "Warm mounts"): art's thin front
// (cmd/art-front) sends the daemon of a branch an "exec" request with
// what art run would read from its own process - its argv, environment,
// working directory, umask, ignored signals, procKey - and its stdio,
// and has parsed nothing. The daemon parses the run with art run's own
// code (the ExecHandler cmd/art gives ServeWarm), serves it exactly as a
// begin on its sandbox started ahead, writing the full client's messages
// to the client's stderr as the full client would, in the same order
// around the command's output, and answers with its exit status. Anything
// it would not serve that way it answers with a fallback, having done
// nothing (not a byte written to the client's stderr), and the front runs
// the full client.

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/artrt/art/internal/warmwire"
	"github.com/artrt/art/sandbox"
)

// WarmExec is a raw warm run, as the daemon got it. The client's
// identity is the kernel's (SO_PEERCRED): its uid is the daemon's.
type WarmExec struct {
	Args  []string // art's argv after the program name
	Env   []string // the client's environment
	Cwd   string   // the client's working directory
	Stdio [3]*os.File

	// Serve runs the parsed run on the daemon's sandbox started ahead and
	// returns what Run would have. fallback != "" says why it did not
	// (and then nothing was done). serving is called once the run is
	// the daemon's to serve (no fallback from then on), before anything
	// is written to o.Warn; onSignal hears of each signal the client
	// passes on while the command runs.
	Serve func(o Options, c Command, serving func(), onSignal func(syscall.Signal)) (res Result, err error, fallback string)
}

// ExecHandler parses x as art run would have in the client, serves it
// with x.Serve (writing the client's messages to x.Stdio[2] only once
// Serve said serving) and returns its exit status, or why the full
// client must run it instead (fallback, with nothing done or written).
type ExecHandler func(ctx context.Context, x *WarmExec) (code int, fallback string)

// execRun is a raw run being served by warmDaemon.run.
type execRun struct {
	o        Options
	c        Command
	serving  func() // the run is served: no fallback from now on
	onSignal func(syscall.Signal)
	look     *hostLook // begun as the request arrived (lookAhead), or nil
	fallback string
	res      Result
	err      error
}

// started is runOnReady's part before the command's end.
func (x *execRun) started(r warmReply) {
	if x.c.Limits != (sandbox.Limits{}) && !x.c.Quiet {
		fmt.Fprintf(x.o.warn(), "art: limits enforced by %s\n", r.LimitedBy)
	}
}

// ended is runOnReady's part after it.
func (x *execRun) ended(r, e warmReply, res sandbox.Result) {
	x.res, x.err = warmEnded(x.o, r, e, res)
}

// exec answers an exec request (c its connection).
func (d *warmDaemon) exec(w *warmConn, c net.Conn, req warmRequest, files []*os.File) {
	fallback := func(why string) { w.enc.Encode(warmReply{Fallback: why}) }
	cred, err := peerCred(c)
	switch {
	case d.execHandler == nil:
		fallback("this daemon serves no raw runs")
		return
	case err != nil:
		fallback("peer credentials: " + err.Error())
		return
	case int(cred.Uid) != os.Geteuid() || int(cred.Gid) != os.Getegid() || os.Getuid() != os.Geteuid():
		// The ids art run's options default from are the daemon's own.
		fallback("another user or group")
		return
	case len(files) != 3:
		fallback("no stdio sent")
		return
	}
	// Whatever the handler decides, the look is over when it returns: a
	// served run waited for it, a fallback needs it no more.
	lookCtx, endLook := context.WithCancel(d.bg)
	defer endLook()
	look := d.lookAhead(lookCtx)
	x := &WarmExec{Args: req.Args, Env: req.Env, Cwd: req.Cwd, Stdio: [3]*os.File{files[0], files[1], files[2]}}
	x.Serve = func(o Options, cmd Command, serving func(), onSignal func(syscall.Signal)) (Result, error, string) {
		switch {
		case o.Store == "" || o.Warm <= 0 || o.At != "":
			return Result{}, nil, "not a warm run"
		case warmwire.StoreKey(o.Store) != warmwire.StoreKey(d.o.Store):
			return Result{}, nil, "another store"
		case o.Branch != d.s.Branch:
			return Result{}, nil, "another branch"
		}
		cfg, err := sandboxConfig(o, cmd)
		if err != nil {
			return Result{}, nil, "sandbox: " + err.Error()
		}
		stdio, ready := readyStdio(o, cmd, cfg)
		if !ready || stdio != [3]*os.File(x.Stdio) {
			return Result{}, nil, "not for a sandbox started ahead"
		}
		breq := beginRequest(o, cmd, cfg, int(cred.Pid), true, req.Umask, req.SigIgn, true, req.Proc)
		if breq.Sandbox == nil {
			return Result{}, nil, "the client's umask is unknown"
		}
		xr := &execRun{o: o, c: cmd, serving: serving, onSignal: onSignal, look: look}
		d.run(w, breq, files, xr)
		return xr.res, xr.err, xr.fallback
	}
	code, why := d.execHandler(d.bg, x)
	if why != "" {
		warmLogf("art warm daemon: raw run not served: %s\n", why)
		fallback(why)
		return
	}
	w.enc.Encode(warmReply{Code: code})
}

// SandboxConfig is the sandbox Run would start for c over o's workspace
// (before its policy directory is protected): for tests that compare the
// client's with a warm daemon's.
func SandboxConfig(o Options, c Command) (*sandbox.Config, error) { return sandboxConfig(o, c) }
