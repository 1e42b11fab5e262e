package main

import (
	"context"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/mcpserver"
	"github.com/urfave/cli/v2"
)

const mcpDescription = `For agent harnesses: serves the Model Context Protocol on stdin/stdout (one JSON-RPC
message per line) with one warm session on BRANCH of the store, like art exec --jsonl.
Tools: run (a command in the sandbox: exit code, output, snapshot, changed paths),
branch (list, create, switch the session), snapshot, checkout and undo (move the branch; the next command sees the new state), diff,
log, blame, read_file and list (at any revision). Sandbox policy (workspace, binds in
.art/config, network) comes from this command line and the host, never from a tool call.
Errors are tool results whose text starts with the exec API's code (E1xxx-E6xxx).
Setup for a harness: docs/mcp.md.

   art mcp -d ws.db -m ws`

func newMCPCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "mcp",
		Usage:       "serve the session and its history as MCP tools over stdio",
		UsageText:   "art mcp -d FILE [-m DIR] [--branch B]",
		Description: mcpDescription,
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			&cli.StringFlag{Name: "mount", Aliases: []string{"m"}, Value: ".", Usage: "host workspace `DIR`, at /home/agent/<basename>"},
			&cli.StringFlag{Name: "branch", Aliases: []string{"b"}, Usage: "`BRANCH` the session works on, created from main's head if new (default main)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("mcp takes no arguments")
			}
			o := execOptions{DB: c.String("db"), Mount: c.String("mount"), Branch: c.String("branch"),
				Durability: c.String("durability")}
			if err := checkCaptureDir(c, o.Mount, o.DB, procOwn()); err != nil {
				return err
			}
			policy, err := execPolicy(o)
			if err != nil {
				return err
			}
			branch := branchName(o.Branch)
			srv := mcpserver.New(mcpserver.Config{
				Open: func(ctx context.Context, branch string) (execapi.Executor, func() error, error) {
					o := o
					o.Branch = branch
					return sandboxExecutor(ctx, e, o)
				},
				DB: func(ctx context.Context) (*journal.DB, error) {
					return journal.Open(ctx, o.DB, journal.Options{Durability: journal.Durability(o.Durability)})
				},
				Branch:  branch,
				Policy:  policy,
				Version: currentVersion().Version,
			})
			return srv.Run(c.Context, mcpserver.NewStdioTransport(e.stdin, e.stdout))
		},
	}
}
