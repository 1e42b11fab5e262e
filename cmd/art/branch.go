package main

import (
	"fmt"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newBranchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "branch",
		Usage:     "list, create or delete branches",
		UsageText: "art branch -d FILE                     list branches\n   art branch -d FILE NAME [--from REV]   create NAME at REV (default: the head of main)\n   art branch -d FILE --delete NAME       retire NAME (its history stays)",
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			&cli.StringFlag{Name: "from", Usage: "start the new branch at `REV`", Value: journal.DefaultBranch},
			&cli.StringFlag{Name: "delete", Aliases: []string{"D"}, Usage: "delete branch `NAME`"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			switch {
			case c.IsSet("delete"):
				if c.NArg() > 0 {
					return usagef("--delete takes the branch name as its value")
				}
				name := c.String("delete")
				if err := db.DeleteBranch(c.Context, name); err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "deleted branch %s (its snapshots stay reachable by id)\n", termtext.Quote(name))
				return nil
			case c.NArg() == 1:
				name := c.Args().First()
				from, err := db.Resolve(c.Context, c.String("from"), journal.DefaultBranch)
				if err != nil {
					return err
				}
				b, err := db.CreateBranch(c.Context, name, from)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return writeJSON(e.stdout, b)
				}
				fmt.Fprintf(e.stdout, "created branch %s at %s\n", termtext.Quote(b.Name), describe(from))
				return nil
			case c.NArg() > 1:
				return usagef("branch takes one NAME")
			}
			bs, err := db.Branches(c.Context)
			if err != nil {
				return err
			}
			type row struct {
				journal.Branch
				Root     string `json:"root"`
				Snapshot string `json:"snapshot,omitempty"`
			}
			rows := make([]row, 0, len(bs))
			for _, b := range bs {
				st, err := db.Head(c.Context, b.Name)
				if err != nil {
					return err
				}
				r := row{Branch: b, Root: st.Root.String()}
				if !st.Snapshot.IsZero() {
					r.Snapshot = st.Snapshot.String()
				}
				rows = append(rows, r)
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rows)
			}
			for _, r := range rows {
				at := "root " + r.Root[:12]
				if r.Snapshot != "" {
					at = "snapshot " + r.Snapshot[:12]
				}
				fmt.Fprintf(e.stdout, "%-20s @%-7d %s  created %s\n", termtext.Quote(r.Name), r.HeadSeq, at, fmtTime(r.Created))
			}
			return nil
		},
	}
}
