package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/artrt/art/internal/termtext"
)

func newCheckoutCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "checkout",
		Usage:     "move a branch to any past state (non-destructive; art undo returns)",
		UsageText: "art checkout -d FILE [--branch B] REV",
		Description: `Appends a checkout event: nothing is deleted, art log shows the old head and
art undo returns to it. To write the state to the host directory, follow with art pull.
A branch a live session (art run, mount, exec, mcp) holds is not moved: end it first.`,
		Flags: []cli.Flag{dbFlag(), durabilityFlag(), branchFlag("branch to move"), jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("checkout takes exactly one REV")
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			branch := c.String("branch")
			to, err := db.Resolve(c.Context, c.Args().First(), branch)
			if err != nil {
				return err
			}
			if _, err := db.Checkout(c.Context, branch, to); err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, to)
			}
			fmt.Fprintf(e.stdout, "%s is now at %s (root %s)\n", termtext.Quote(branch), describe(to), to.Root.Short())
			fmt.Fprintf(e.stderr, "undo with: art undo -d %s --branch %s\n", termtext.Word(c.String("db")), termtext.Word(branch))
			return nil
		},
	}
}
