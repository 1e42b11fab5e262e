package main

import (
	"fmt"
	"time"

	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newGCCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "gc",
		Usage:     "remove objects no recorded state references and give the space back",
		UsageText: "art gc -d FILE [--dry-run] [--grace DURATION] [--json]",
		Description: `Marks every object reachable from a branch's live tree, a snapshot, any event in
the journal (so every state checkout, log, diff and @SEQ reach stays materializable)
or the import cache, removes the rest (e.g. chunks of an aborted transaction), then
returns the free pages to the file system (the first gc of an older store rewrites it
once with VACUUM). Objects written within --grace before gc started are kept, so a
writer in another process that stores chunks before referencing them loses nothing.
Safe to interrupt at any point.`,
		Flags: []cli.Flag{
			dbFlag(),
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "report what would be removed; change nothing"},
			&cli.DurationFlag{Name: "grace", Value: time.Hour, Usage: "keep objects written less than `DURATION` before gc began"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("gc takes no arguments")
			}
			if c.Duration("grace") < 0 {
				return usagef("--grace must not be negative")
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			bar := newProgress(e.stderr)
			rep, err := db.GC(c.Context, journal.GCOptions{DryRun: c.Bool("dry-run"), Grace: c.Duration("grace"),
				Progress: func(phase string, done, total int) {
					if total > 0 {
						bar.update("gc: %s %d/%d objects", phase, done, total)
					} else {
						bar.update("gc: %s %d objects", phase, done)
					}
				}})
			bar.done()
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rep)
			}
			verb := "removed"
			if rep.DryRun {
				verb = "would remove"
			}
			fmt.Fprintf(e.stdout, "%d objects reachable, %s %d objects (%s stored)", rep.Reachable, verb, rep.Removed, fmtBytes(rep.RemovedBytes))
			if rep.Protected > 0 {
				fmt.Fprintf(e.stdout, ", kept %d unreferenced within the grace period", rep.Protected)
			}
			fmt.Fprintln(e.stdout)
			if !rep.DryRun {
				fmt.Fprintf(e.stdout, "store file %s -> %s (vacuum: %s) in %.1fs\n", fmtBytes(rep.FileBefore), fmtBytes(rep.FileAfter), rep.Vacuum, rep.Seconds)
			}
			return nil
		},
	}
}
