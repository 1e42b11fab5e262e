package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/artrt/art/internal/termtext"
)

func newUndoCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "undo",
		Usage:     "return a branch to where it was before its last operation",
		UsageText: "art undo -d FILE [--branch B]",
		Description: `Undo appends a checkout to the state before the branch's last operation (an import,
run, checkout...). Undos and already-undone operations are skipped, so repeating undo
walks further back. Nothing is deleted: art log shows every step. A branch a live
session (art run, mount, exec, mcp) holds is not moved: end it first.`,
		Flags: []cli.Flag{dbFlag(), durabilityFlag(), branchFlag("branch to undo on"), jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("undo takes no arguments")
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			branch := c.String("branch")
			undone, err := db.Undo(c.Context, branch)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, undone)
			}
			fmt.Fprintf(e.stdout, "undid op %d: %s; %s is back at @%d\n", undone.ID, termtext.Text(undone.Description), termtext.Quote(branch), undone.BeforeSeq)
			return nil
		},
	}
}
