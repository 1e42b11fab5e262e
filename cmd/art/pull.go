package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"github.com/urfave/cli/v2"
)

func newPullCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "write a state of the workspace back to the host directory",
		UsageText: "art pull -m DIR -d FILE [--branch B] [--at REV] [--checksum] [--same-owner] [--quiet] [--json]\n   art pull -d FILE REMOTE [BRANCH...] [--force] [--json]",
		Description: `Makes DIR equal to /<basename of DIR>/ of the branch head (or of --at REV), writing
only what differs, deletions included. Every tree is read and checked before anything
is written, new contents are staged and verified inside DIR first, and no path in the
store can reach outside DIR. DIR/.art (sandbox policy) is never written, replaced or
deleted. A store is treated as someone else's data: files are not made setuid or setgid
and new files belong to DIR's owner, unless --same-owner; a file with other hard links
(that may be outside DIR) is replaced, never changed in place.

With a REMOTE (a name from art remote, a store file, or s3://BUCKET/PREFIX), fetches
BRANCHes (default: all) from there instead: every object is verified before a branch
moves, and a branch moves only as a fast-forward unless --force.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mount", Aliases: []string{"m", "workspace"}, Value: ".", Usage: "host workspace `DIR` (--workspace: the original art's spelling)"},
			dbFlag(), durabilityFlag(),
			branchFlag("branch whose head to pull"),
			&cli.StringFlag{Name: "at", Usage: "pull the state at `REV` instead of the branch head"},
			&cli.BoolFlag{Name: "checksum", Usage: "compare the bytes of files whose size and mtime match"},
			&cli.BoolFlag{Name: "same-owner", Usage: "apply the stored owners and setuid/setgid bits (root restoring a store of its own)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "do not list every entry"},
			jsonFlag(), forceFlag(),
			&cli.Int64Flag{Name: "max-entries", Usage: "refuse a state naming more than `N` paths once expanded (default 10000000)"},
			&cli.Int64Flag{Name: "max-bytes", Usage: "refuse a state holding more than `N` bytes of files once expanded (default 1 TiB)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return remoteTransfer(c, e, false)
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			rev := c.String("branch")
			if c.IsSet("at") {
				rev = c.String("at")
			}
			st, err := db.Resolve(c.Context, rev, c.String("branch"))
			if err != nil {
				return err
			}
			var entries io.Writer = e.stdout
			if c.Bool("quiet") || c.Bool("json") {
				entries = nil
			}
			dir := c.String("mount")
			abs, _ := filepath.Abs(dir)
			op, err := db.BeginOp(c.Context, c.String("branch"), "export", fmt.Sprintf("pull %s to %s", describe(st), abs))
			if err != nil {
				return err
			}
			bar := newProgress(e.stderr)
			written := map[string]journal.StatCache{}
			began := time.Now()
			stats, err := workspace.Export(c.Context, db.Objects(), workspace.ExportOptions{
				Dir: dir, State: st, Checksum: c.Bool("checksum"), Entries: entries, Warn: e.stderr, Keep: workspace.StoreFiles(db.Path()),
				SameOwner: c.Bool("same-owner"), MaxEntries: c.Int64("max-entries"), MaxBytes: c.Int64("max-bytes"),
				Progress: func(done, total int64) { bar.update("pull: %s of %s", fmtBytes(done), fmtBytes(total)) },
				Written:  func(p string, sc journal.StatCache) { written[p] = sc },
			})
			bar.done()
			if err == nil {
				// The host now holds the pulled state: the branch's next
				// capture must see that, not edits to bring in (which would
				// undo the branch's newer work with the pulled files).
				// Recorded even if a signal came meanwhile: the host
				// holds the pulled state now, whatever the signal.
				err = op.Update(context.WithoutCancel(c.Context), func(tx *journal.Tx) error {
					return workspace.RecordPulled(tx, dir, written, began)
				})
			}
			status := 0
			if err != nil {
				status = 1
				if c.Context.Err() != nil {
					status = workspace.InterruptedStatus
				}
			}
			// Ended even after a signal: the op says it was interrupted.
			if endErr := op.End(context.WithoutCancel(c.Context), &status); err == nil {
				err = endErr
			}
			if err != nil && c.Context.Err() != nil && stats.Written+stats.Deleted+stats.Updated == 0 {
				// Export writes nothing before it has planned and staged
				// everything, and then does not stop.
				return &interruptedError{what: "pull interrupted: " + termtext.Quote(dir) + " unchanged, nothing recorded", err: err}
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, struct {
					State journal.State         `json:"state"`
					Stats workspace.ExportStats `json:"stats"`
				}{st, stats})
			}
			fmt.Fprintf(e.stdout, "pull: %d written, %d updated, %d deleted, %d unchanged; wrote %s from %s\n",
				stats.Written, stats.Updated, stats.Deleted, stats.Unchanged, fmtBytes(stats.BytesWritten), describe(st))
			return nil
		},
	}
}

// describe names a state for people: its snapshot id, or branch@seq.
func describe(st journal.State) string {
	if !st.Snapshot.IsZero() {
		return "snapshot " + st.Snapshot.Short()
	}
	return fmt.Sprintf("%s@%d", st.Branch, st.Seq)
}
