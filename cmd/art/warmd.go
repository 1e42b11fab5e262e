package main

import (
	"os"

	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

// newWarmDaemonCommand is the warm daemon of art run --warm
// (session.ServeWarm): art's binary re-executed by the first warm run of
// a branch, detached (its own session, no terminal, stdout and stderr
// to its log), with its ready line written to fd 3. Not for people.
func newWarmDaemonCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      session.WarmDaemonCommand,
		Hidden:    true,
		Usage:     "serve a branch's overlay between art run --warm runs (started by art run itself)",
		UsageText: "art " + session.WarmDaemonCommand + " --db FILE --mount DIR --branch B --uid N --gid N --idle DURATION",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "db", Required: true, Usage: "store `FILE` (absolute)"},
			&cli.StringFlag{Name: "mount", Required: true, Usage: "host workspace `DIR` (absolute)"},
			&cli.StringFlag{Name: "branch", Required: true, Usage: "the `BRANCH` served"},
			&cli.IntFlag{Name: "uid", Usage: "the sandbox's `UID`"},
			&cli.IntFlag{Name: "gid", Usage: "the sandbox's `GID`"},
			&cli.StringFlag{Name: "durability", Usage: "the store's `MODE`"},
			&cli.BoolFlag{Name: "journal-writes", Usage: "forensic mode"},
			&cli.DurationFlag{Name: "idle", Required: true, Usage: "exit after `DURATION` without a run"},
		},
		Action: func(c *cli.Context) error {
			ready := os.NewFile(3, "ready")
			if ready == nil {
				return usagef("%s is started by art run --warm", session.WarmDaemonCommand)
			}
			o := session.Options{Store: c.String("db"), Workspace: c.String("mount"), Branch: c.String("branch"),
				UID: c.Int("uid"), GID: c.Int("gid"), Durability: c.String("durability"), JournalWrites: c.Bool("journal-writes")}
			if c.Duration("idle") <= 0 {
				return usagef("--idle must be positive")
			}
			return session.ServeWarm(c.Context, o, c.Duration("idle"), ready, serveRawRun)
		},
	}
}
