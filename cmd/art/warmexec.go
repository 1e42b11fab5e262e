package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

// serveRawRun is a warm daemon's parse of a raw run (session.WarmExec,
// sent by art's thin front): art run's own flags and option functions
// over the client's inputs, then, when the run is one the daemon serves
// on its sandbox started ahead, the run and its report - art run's
// messages, written to the client's stderr as art run writes them, and
// its exit status. Anything else is a fallback with nothing done or
// written: the front then runs the full client, which reports usage
// errors and serves every other case.
func serveRawRun(ctx context.Context, x *session.WarmExec) (int, string) {
	if !filepath.IsAbs(x.Cwd) {
		return 0, "not art run"
	}
	vars := map[string]string{}
	for _, kv := range x.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := vars[k]; !dup { // getenv's first match
				vars[k] = v
			}
		}
	}
	getenv := func(k string) string { return vars[k] }
	for _, k := range []string{"ART_CPUPROFILE", "ART_RUSAGE", "ART_PHASES"} {
		if getenv(k) != "" {
			return 0, "measurement aid " + k + " set" // they measure the client's process
		}
	}
	in := procInputs{getenv: getenv, cwd: x.Cwd, stdoutTTY: isTerminal(x.Stdio[1])}
	stderr := &stderrGate{out: x.Stdio[2]}
	e := &env{stdin: x.Stdio[0], stdout: x.Stdio[1], stderr: stderr}
	var (
		served   bool
		fallback = "art run's flags did not parse"
		code     int
	)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	parsed := parseRunArgs(ctx, x.Args, in, x.Stdio[0], func(c *cli.Context, o runOptions, err error) {
		if err != nil {
			fallback = "art run: " + err.Error()
			return
		}
		o.interactive = o.interactive && isTerminal(x.Stdio[0]) && isTerminal(x.Stdio[1])
		switch {
		case o.interactive:
			fallback = "a terminal: the PTY is the client's"
			return
		case o.retention.Enabled():
			fallback = "retention applies after the run, in the client"
			return
		}
		if !filepath.IsAbs(o.Store) {
			o.Store = in.abs(o.Store)
		}
		o.Warn, o.Stdin, o.Stdout, o.Stderr = e.stderr, x.Stdio[0], x.Stdio[1], x.Stdio[2]
		onSignal := func(sig syscall.Signal) {
			if sig == syscall.SIGINT || sig == syscall.SIGTERM {
				cancel(signalCause{sig: sig}) // as main's notifySignals, the first
			}
		}
		res, err, why := x.Serve(o.Options, o.Command, stderr.open, onSignal)
		if why != "" {
			fallback = why
			return
		}
		served = true
		code = exitStatus(ctx, finishRun(c, e, o, res, err), e.stderr)
	})
	if !parsed {
		return 0, "not art run"
	}
	if !served {
		return 0, fallback
	}
	return code, ""
}

// stderrGate is art run's stderr in a warm daemon serving a raw run: it
// holds what is written until the run is the daemon's to serve (open),
// then writes it, and all that follows, to the client's stderr, so that
// a fallback writes nothing and a served run's messages come in the
// order the full client's do around the command's output.
type stderrGate struct {
	mu   sync.Mutex
	out  io.Writer // the client's stderr
	held bytes.Buffer
	on   bool
}

func (g *stderrGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.on {
		return g.held.Write(p)
	}
	return g.out.Write(p)
}

// open passes on what was held and all later writes.
func (g *stderrGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.on {
		g.on = true
		g.out.Write(g.held.Bytes()) // as the client's writes: errors not reported
		g.held.Reset()
	}
}

// parseRunArgs parses args (art's, after the program name) as art run
// with inputs in and hands the options, or why they are wrong, to then;
// false when args are no art run (then is not called). Nothing is
// written anywhere: help and usage text are the full client's to write.
func parseRunArgs(ctx context.Context, args []string, in procInputs, stdin io.Reader, then func(*cli.Context, runOptions, error)) bool {
	if len(args) == 0 || args[0] != "run" {
		return false
	}
	app := newApp(&env{stdin: stdin, stdout: io.Discard, stderr: io.Discard})
	args, err := originalForm(app, append([]string{"art"}, args...))
	if err != nil || len(args) < 2 || args[1] != "run" {
		return false
	}
	called := false
	app.Command("run").Action = func(c *cli.Context) error {
		called = true
		o, err := parseRunOptions(c, in)
		then(c, o, err)
		return nil
	}
	return app.RunContext(ctx, permuteArgs(app, args)) == nil && called
}
