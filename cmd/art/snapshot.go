package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func newSnapshotCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "snapshot",
		Usage:     "record the head of a branch as a snapshot",
		UsageText: "art snapshot -d FILE [--branch B] [--message TEXT] [--json]",
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			branchFlag("branch to snapshot"),
			&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "snapshot `TEXT`"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("snapshot takes no arguments (use --message TEXT)")
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := db.TakeSnapshot(c.Context, c.String("branch"), c.String("message"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, s)
			}
			fmt.Fprintln(e.stdout, s.ID.Short())
			return nil
		},
	}
}
