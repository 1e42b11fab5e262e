package main

import (
	"fmt"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newVerifyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check every object's hash, every hash chain and snapshot; name damaged paths",
		UsageText: "art verify -d FILE [--rebuild] [--json]",
		Description: `Re-hashes every object, re-checks each branch's event chain against the count and
head kept outside it, checks every snapshot, and walks every recorded state to find
missing objects and the paths that depend on damaged ones. --rebuild also replays each
branch's whole journal and compares the result with its live tree (replacing a live
tree that disagrees: the journal is the source of truth). Exits 4 when anything is
damaged.`,
		Flags: []cli.Flag{
			dbFlag(),
			&cli.BoolFlag{Name: "rebuild", Usage: "replay every branch's journal and compare with its live tree"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("verify takes no arguments")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			bar := newProgress(e.stderr)
			rep, err := db.Verify(c.Context, journal.VerifyOptions{Rebuild: c.Bool("rebuild"),
				Progress: func(done, total int) { bar.update("verify: %d/%d objects", done, total) }})
			bar.done()
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if err := writeJSON(e.stdout, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.stdout, "verified %d objects, %d events, %d branches, %d snapshots\n", rep.Objects, rep.Events, rep.Branches, rep.Snapshots)
				for _, p := range rep.Problems {
					where := p.Object
					if where == "" {
						where = termtext.Quote(p.Branch)
						if p.Seq != 0 {
							where += fmt.Sprintf("@%d", p.Seq)
						}
					}
					fmt.Fprintf(e.stdout, "DAMAGED %s %s: %s\n", p.What, where, termtext.Text(p.Detail))
					for _, path := range p.Paths {
						fmt.Fprintf(e.stdout, "        affects %s\n", termtext.Quote(path))
					}
				}
				for _, b := range rep.Rebuilt {
					fmt.Fprintf(e.stdout, "rebuilt the live tree of branch %s from its journal\n", termtext.Quote(b))
				}
			}
			if !rep.OK() {
				return &exitCoder{code: exitCorrupt, err: fmt.Errorf("store %s is damaged: %d problems", termtext.Quote(c.String("db")), len(rep.Problems))}
			}
			if !c.Bool("json") {
				fmt.Fprintln(e.stdout, "ok")
			}
			return nil
		},
	}
}
