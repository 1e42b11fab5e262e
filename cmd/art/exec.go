package main

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

const execDescription = `For orchestrators: reads an ExecutionRequest (JSON) and writes an ExecutionResponse
(JSON) on stdout, one line each. --json answers one request (all of stdin, or --request
FILE); --jsonl answers a request per line, in order, until EOF, keeping the sandbox's
overlay mounted between them. A bad request gets an error response (code E1xxx-E6xxx)
and a stream goes on. The command's outcome is in its response: art exits 0 when every
response was written. Fields, codes and schemas: docs/exec-api.md.

   echo '{"command":["make","test"],"timeout_ms":600000}' | art exec -d ws.db --json`

// execOptions is what art exec hands to the executor it wires.
type execOptions struct {
	DB         string // store file (-d)
	Mount      string // host workspace (-m)
	Branch     string // default branch of requests without one ("" main)
	Durability string
	Mode       execapi.Mode
}

func newExecCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "exec",
		Usage:       "run commands for an orchestrator: JSON request in, JSON response out",
		UsageText:   "art exec -d FILE [-m DIR] [--branch B] (--json | --jsonl) [--request FILE]",
		Description: execDescription,
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			&cli.StringFlag{Name: "mount", Aliases: []string{"m"}, Value: ".", Usage: "host workspace `DIR`, at /home/agent/<basename>"},
			&cli.StringFlag{Name: "branch", Aliases: []string{"b"}, Usage: "`BRANCH` of requests that name none (default main)"},
			&cli.BoolFlag{Name: "json", Usage: "read one request, write one response"},
			&cli.BoolFlag{Name: "jsonl", Usage: "read a request per line until EOF, write a response per line, in order"},
			&cli.StringFlag{Name: "request", Usage: "read requests from `FILE` instead of stdin"},
			&cli.BoolFlag{Name: "unsandboxed-for-tests", Hidden: true,
				Usage: "run requests as plain host processes: no sandbox, no store, no snapshots (tests of the engine only)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("exec takes no arguments: the command is in the request (see docs/exec-api.md)")
			}
			if c.Bool("json") == c.Bool("jsonl") {
				return usagef("exec needs exactly one of --json and --jsonl")
			}
			o := execOptions{DB: c.String("db"), Mount: c.String("mount"), Branch: c.String("branch"),
				Durability: c.String("durability"), Mode: execapi.One}
			if !c.Bool("unsandboxed-for-tests") {
				if err := checkCaptureDir(c, o.Mount, o.DB, procOwn()); err != nil {
					return err
				}
			}
			if c.Bool("jsonl") {
				o.Mode = execapi.JSONL
			}
			in := e.stdin
			if f := c.String("request"); f != "" {
				file, err := os.Open(f)
				if err != nil {
					return err
				}
				defer file.Close()
				in = file
			}
			return runExec(c.Context, e, o, in, c.Bool("unsandboxed-for-tests"))
		},
	}
}

// runExec serves the requests of in with the sandboxed executor (or, for
// tests, plain processes) and writes the responses to e.stdout.
func runExec(ctx context.Context, e *env, o execOptions, in io.Reader, unsandboxed bool) error {
	policy, err := execPolicy(o)
	if err != nil {
		return err
	}
	var ex execapi.Executor
	release := func() error { return nil }
	if unsandboxed {
		dir, err := filepath.Abs(o.Mount)
		if err != nil {
			return err
		}
		ex = execapi.NewProcessExecutor(dir, nil)
	} else {
		ex, release, err = sandboxExecutor(ctx, e, o)
		if err != nil {
			return err
		}
	}
	srv := &execapi.Server{Executor: ex, Policy: policy}
	err = srv.Serve(ctx, in, e.stdout, o.Mode)
	if rerr := release(); err == nil {
		err = rerr
	}
	return err
}

// execPolicy protects the store and art's state of this workspace from
// the requests' bind mounts. It comes from the command line, never from a
// request or from anything the agent can write.
func execPolicy(o execOptions) (execapi.Policy, error) {
	if o.DB == "" {
		return execapi.Policy{}, usagef("-d FILE is required")
	}
	mount, err := filepath.Abs(o.Mount)
	if err != nil {
		return execapi.Policy{}, err
	}
	return execapi.Policy{
		Protected:     append(execapi.StorePaths(o.DB), filepath.Join(mount, ".art")),
		ResolveSource: filepath.EvalSymlinks,
	}, nil
}

// sandboxExecutor opens the session art exec serves requests over.
// Messages about the capture go to stderr; stdout carries only responses.
func sandboxExecutor(ctx context.Context, e *env, o execOptions) (execapi.Executor, func() error, error) {
	abs, err := filepath.Abs(o.Mount)
	if err != nil {
		return nil, nil, err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, nil, usagef("workspace %s is not a directory", o.Mount)
	}
	uid, gid, err := sandboxUser("", abs, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	return session.NewExecutor(ctx, session.Options{Store: o.DB, Durability: o.Durability, Workspace: abs,
		Branch: branchName(o.Branch), NamedBranch: o.Branch != "", UID: uid, GID: gid,
		Warn: e.stderr, Progress: captureProgress(e, abs)})
}
