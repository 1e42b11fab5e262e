package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

// duRow is one measured state of art du --json.
type duRow struct {
	Rev   string `json:"rev"`
	Root  string `json:"root"`
	Total bool   `json:"total,omitempty"` // the row of every state together
	journal.Footprint
}

func newDuCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "du",
		Usage:     "show how much file content branches or states reference, and how much only each of them",
		UsageText: "art du -d FILE [REV...] [--json]   (no REV: the head of every branch)",
		Description: "For each state (a branch's head, a snapshot id, BRANCH~N, @SEQ): its distinct files,\n" +
			"the chunks of their content and the bytes those occupy in the store, and the bytes only\n" +
			"it references among the states measured together - what keeping it costs. A last row\n" +
			"counts all of them together. Snapshots and history keep more than heads do: art status\n" +
			"shows the whole store.",
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			revs := c.Args().Slice()
			if len(revs) == 0 {
				bs, err := db.Branches(c.Context)
				if err != nil {
					return err
				}
				for _, b := range bs {
					revs = append(revs, b.Name)
				}
			}
			if len(revs) > journal.MaxFootprintStates {
				return usagef("du measures at most %d states at once", journal.MaxFootprintStates)
			}
			rows := make([]duRow, 0, len(revs)+1)
			roots := make([]journal.State, 0, len(revs))
			for _, r := range revs {
				st, err := db.Resolve(c.Context, r, journal.DefaultBranch)
				if err != nil {
					return err
				}
				roots = append(roots, st)
			}
			ids := make([]cas.ID, len(roots))
			for i, st := range roots {
				ids[i] = st.Root
			}
			fps, total, err := db.Footprints(c.Context, ids)
			if err != nil {
				return err
			}
			for i, fp := range fps {
				rows = append(rows, duRow{Rev: revs[i], Root: roots[i].Root.String(), Footprint: fp})
			}
			rows = append(rows, duRow{Rev: "(together)", Total: true, Footprint: total})
			if c.Bool("json") {
				return writeJSON(e.stdout, rows)
			}
			w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "FILES\tCONTENT\tSTORED\tONLY HERE\t\tSTATE")
			for _, r := range rows {
				only := fmtBytes(r.Exclusive)
				if r.Total {
					only = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\t%s\n", fmtCount(r.Files), fmtBytes(r.Bytes), fmtBytes(r.Stored), only, termtext.Quote(r.Rev))
			}
			return w.Flush()
		},
	}
}
