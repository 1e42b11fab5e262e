package main

import (
	"fmt"
	"io"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote"
	"github.com/urfave/cli/v2"
)

// newGCCommand is art gc. It is longer than the guideline because the
// command is one cli.Command literal whose help text (the S3 round's two
// phases) and flag table take half of it; the Action opens the store
// around a full disk and runs one gc.
func newGCCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "remove objects no recorded state references and give the space back (a store, or a remote)",
		UsageText: `art gc -d FILE [--dry-run] [--grace DURATION] [--json]
   art gc [-d FILE] REMOTE [--dry-run] [--grace DURATION] [--wait] [--history N] [--json]`,
		Description: `Marks every object reachable from a branch's live tree, a snapshot, any event in
the journal (so every state checkout, log, diff and @SEQ reach stays materializable)
or the import cache, removes the rest (e.g. chunks of an aborted transaction), then
returns the free pages to the file system (the first gc of an older store rewrites it
once with VACUUM). Objects written within --grace before gc started are kept, so a
writer in another process that stores chunks before referencing them loses nothing.
Safe to interrupt at any point.

With a REMOTE (a name from art remote, with -d; a store file; or s3://BUCKET/PREFIX)
the remote is collected instead. A store file gets the gc above. On S3, where nothing
can be locked, a round has two phases. Phase 1 reads every ref (with --history N also
each ref's N most recent earlier roots), walks the states they name, copies the live
objects out of packs more than a quarter dead into new packs, and writes a marker
naming the packs to delete: from then on pushes and pulls treat what only those packs hold as
absent, so they send it again rather than refer to it. Phase 2 runs once the marker is
older than --grace (by the server's clock): it reads the refs again, keeps any
condemned pack that a ref or a newer push turned out to need, then deletes the rest.
A run finishes the previous round if its grace is over and starts the next, so
periodic runs collect; --wait waits out the grace and finishes in one run. --grace
must exceed the time any push takes between looking at the marker and writing (art
looks again every minute): --grace 0 is safe only when no one else writes to the
remote. Interrupting at any point leaves a remote that pulls right; the next run
carries on. See docs/remotes.md, "Garbage collection".`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "db", Aliases: []string{"d"}, Usage: "store `FILE` (the SQLite file; its large contents are in FILE.packs/); with REMOTE, only to resolve remote names and cache pack indexes", EnvVars: []string{"ART_DB"}},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "report what would be removed; change nothing"},
			&cli.DurationFlag{Name: "grace", Value: time.Hour, Usage: "store: keep objects written less than `DURATION` before gc began; S3 remote: delete a round's packs only once its marker is this old"},
			&cli.BoolFlag{Name: "wait", Usage: "S3 remote: wait out the grace period and finish the round in this run"},
			&cli.IntFlag{Name: "history", Usage: "S3 remote: also keep each ref's `N` most recent earlier states"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("gc takes at most one REMOTE")
			}
			if c.Duration("grace") < 0 {
				return usagef("--grace must not be negative")
			}
			if c.Int("history") < 0 {
				return usagef("--history must not be negative")
			}
			if c.NArg() == 1 {
				return gcRemote(c, e)
			}
			if c.IsSet("wait") || c.IsSet("history") {
				return usagef("--wait and --history apply to gc REMOTE")
			}
			db, err := openStore(c, false)
			if err == nil {
				if ferr := db.FullErr(); ferr != nil {
					// Opened for reading only, the disk being full: gc must
					// write, so it first gives back what needs no write.
					db.Close()
					db, err = nil, ferr
				}
			}
			var early *journal.GCReport
			if err != nil && journal.DiskFull(err) && !c.Bool("dry-run") {
				// SQLite cannot open the store on a full file system:
				// give back what needs no write first, then try again.
				early, _ = journal.ReclaimPacks(c.Context, c.String("db"))
				if early != nil && early.PackBytesFreed > 0 {
					db, err = openStore(c, false)
				}
			}
			if err != nil {
				if journal.DiskFull(err) {
					return withHint(err, "the file system holding the store is full and art gc found no pack bytes to give back; free space there first")
				}
				return err
			}
			defer db.Close()
			bar := newProgress(e.stderr)
			rep, err := db.GC(c.Context, journal.GCOptions{DryRun: c.Bool("dry-run"), Grace: c.Duration("grace"),
				Progress: gcProgress(bar)})
			bar.done()
			if rep != nil && early != nil {
				rep.PackBytesFreed += early.PackBytesFreed
				rep.PacksRemoved += early.PacksRemoved
				rep.FileBefore = early.FileBefore
			}
			if err != nil && c.Context.Err() != nil {
				// The sweep is one transaction: it had not committed.
				return &interruptedError{what: "gc interrupted: nothing removed (the next art gc starts over)", err: err}
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rep)
			}
			printStoreGC(e.stdout, rep)
			return nil
		},
	}
}

func gcProgress(bar *progress) func(phase string, done, total int) {
	return func(phase string, done, total int) {
		if total > 0 {
			bar.update("gc: %s %d/%d", phase, done, total)
		} else {
			bar.update("gc: %s %d", phase, done)
		}
	}
}

func printStoreGC(w io.Writer, rep *journal.GCReport) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%d objects reachable, %s %d objects (%s stored)", rep.Reachable, verb, rep.Removed, fmtBytes(rep.RemovedBytes))
	if rep.Protected > 0 {
		fmt.Fprintf(w, ", kept %d unreferenced within the grace period", rep.Protected)
	}
	fmt.Fprintln(w)
	if !rep.DryRun {
		fmt.Fprintf(w, "store file and packs %s -> %s (vacuum: %s", fmtBytes(rep.FileBefore), fmtBytes(rep.FileAfter), rep.Vacuum)
		if rep.PackBytesFreed > 0 || rep.PacksRemoved > 0 {
			fmt.Fprintf(w, "; packs: %s freed, %d removed", fmtBytes(rep.PackBytesFreed), rep.PacksRemoved)
		}
		fmt.Fprintf(w, ") in %.1fs\n", rep.Seconds)
	}
}

// gcRemote runs `art gc [-d FILE] REMOTE`.
func gcRemote(c *cli.Context, e *env) error {
	var db *journal.DB
	if c.String("db") != "" {
		var err error
		if db, err = openStore(c, false); err != nil {
			return err
		}
		defer db.Close()
	}
	name := c.Args().First()
	r, err := openRemote(c, db, name, remote.OpenOptions{ReadOnly: c.Bool("dry-run")})
	if err != nil {
		return err
	}
	defer r.Close()
	if _, ok := r.(*remote.S3Remote); ok && !c.Bool("dry-run") && c.Duration("grace") < 2*time.Minute {
		fmt.Fprintf(e.stderr, "warning: --grace %s: a push running meanwhile may lose objects (safe only when no one else writes to the remote; see docs/remotes.md)\n", c.Duration("grace"))
	}
	bar := newProgress(e.stderr)
	rep, err := remote.GC(c.Context, r, remote.GCOptions{DryRun: c.Bool("dry-run"), Grace: c.Duration("grace"),
		Wait: c.Bool("wait"), History: c.Int("history"), Progress: gcProgress(bar)})
	bar.done()
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(e.stdout, rep)
	}
	if rep.File != nil {
		fmt.Fprintf(e.stdout, "gc %s: ", termtext.Quote(name))
		printStoreGC(e.stdout, rep.File)
		return nil
	}
	fmt.Fprintf(e.stdout, "gc %s: %d live objects; before %d packs, %d objects, %s; after %d packs, %d objects, %s\n",
		termtext.Quote(name), rep.Live, rep.PacksBefore, rep.ObjectsBefore, fmtBytes(rep.BytesBefore), rep.PacksAfter, rep.ObjectsAfter, fmtBytes(rep.BytesAfter))
	verb := "condemned"
	if rep.DryRun {
		verb = "would condemn"
	}
	fmt.Fprintf(e.stdout, "%s %d packs (%s), copied %d live objects into %d new packs; deleted %d packs (%s), rescued %d; %.1fs\n",
		verb, rep.Condemned, fmtBytes(rep.CondemnedBytes), rep.RewrittenObjects, rep.Rewritten, rep.Deleted, fmtBytes(rep.DeletedBytes), rep.Rescued, rep.Seconds)
	if rep.Pending {
		fmt.Fprintf(e.stdout, "a round waits for its grace period: run art gc %s again in %s (or with --wait) to delete its packs\n",
			termtext.Word(name), (time.Duration(rep.PendingSeconds) * time.Second).Round(time.Second))
	}
	return nil
}
