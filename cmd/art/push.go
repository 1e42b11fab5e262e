package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
	"github.com/artrt/art/workspace"
	"github.com/urfave/cli/v2"
)

func newPushCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "capture the host workspace into the store (incremental) and snapshot it",
		UsageText: "art push -m DIR -d FILE [--branch B] [--replace] [--message TEXT] [--quiet] [--json]\n   art push -d FILE REMOTE [BRANCH...] [--force] [--json]",
		Description: `Imports DIR under /<basename of DIR>/ in the store. Unchanged files are skipped by
their (size, mtime, ctime, inode); changed files are re-chunked and only new chunks
are stored; deletions are recorded. Files, directories, symlinks, hard links, modes,
owners, ns mtimes and user.* xattrs are kept; fifos, sockets and devices are skipped
with a warning.

A push applies what changed on the host since art last captured, pushed or pulled DIR
on top of the branch, exactly like the capture that starts art run: what an agent
changed on the branch since then stays (a path both changed takes the host's version,
except that an edit beats a deletion; each such path is named). --replace instead makes
the branch equal to DIR, and names each change of the branch it drops; they stay in
history (art undo brings them back).

Ends with a snapshot, so after two pushes main~1 is the first - unless nothing changed:
with --quiet or --json and no --message, a push that changes nothing writes no op and
no snapshot; it reports the branch's head snapshot and "nothing_changed": true (when
the import records prove every entry unchanged, without writing to the store at all).
Entries whose ctime is within 2 s of the last push's start are always compared in
full.

With a REMOTE (a name from art remote, a store file, or s3://BUCKET/PREFIX), sends
BRANCHes (default: all) there instead: only objects the remote lacks move, and a
branch moves only as a fast-forward unless --force. See docs/remotes.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mount", Aliases: []string{"m", "workspace"}, Value: ".", Usage: "host workspace `DIR` (--workspace: the original art's spelling)"},
			dbFlag(), durabilityFlag(),
			branchFlag("branch to push to"),
			&cli.StringFlag{Name: "message", Usage: "snapshot message (default: push DIR)"},
			&cli.BoolFlag{Name: "replace", Usage: "make the branch equal to DIR, dropping (and naming) what the branch changed since the last capture"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "do not list every entry"},
			jsonFlag(), forceFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return remoteTransfer(c, e, true)
			}
			if err := checkCaptureDir(c, c.String("mount"), c.String("db"), procOwn()); err != nil {
				return err
			}
			var entries io.Writer = e.stdout
			if c.Bool("quiet") || c.Bool("json") {
				entries = nil
			}
			bar := newProgress(e.stderr)
			quiet := (c.Bool("quiet") || c.Bool("json")) && c.String("message") == ""
			opts := workspace.ImportOptions{
				Dir: c.String("mount"), Branch: branchName(c.String("branch")), Message: c.String("message"),
				Entries: entries, Warn: e.stderr, Capture: !c.Bool("replace"), SkipUnchanged: quiet, SoleWriter: true,
				Progress: func(s workspace.ImportStats) {
					bar.update("push: %d files, %s read, %s stored", s.Files, fmtBytes(s.BytesRead), fmtBytes(s.BytesStored))
				},
			}
			st, ok, err := pushUnchanged(c, opts)
			if err != nil {
				bar.done()
				return err
			}
			var before journal.State
			if !ok {
				st, before, err = pushImport(c, opts)
			}
			bar.done()
			if err != nil {
				return err
			}
			if st.Dropped > 0 {
				reportDropped(c, e, st, before)
			}
			if st.First {
				fmt.Fprint(e.stderr, session.FirstCaptureLine(c.String("mount"), st))
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, st)
			}
			taken := ""
			if st.NothingChanged {
				taken = " (nothing changed: no new snapshot)"
			}
			fmt.Fprintf(e.stdout, "push: %d new, %d changed, %d deleted, %d unchanged files; read %s, stored %s; snapshot %s%s\n",
				st.New, st.Changed, st.Deleted, st.Unchanged, fmtBytes(st.BytesRead), fmtBytes(st.BytesStored), st.Snapshot.ID.Short(), taken)
			return nil
		},
	}
}

// pushUnchanged runs the read-only no-op check (workspace.UnchangedAt)
// before the full import.
func pushUnchanged(c *cli.Context, opts workspace.ImportOptions) (workspace.ImportStats, bool, error) {
	// The check is short-lived and its heap bounded (it holds at most the
	// import records of one workspace, which Import bounds, and a bounded
	// read-ahead of listings): the collector waits for a fixed limit
	// instead of running each time the young heap doubles (measured: about
	// a tenth of a no-op push's CPU). The settings are the process's, so
	// the binary, which runs one push, sets them, not the library.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(256 << 20))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	return workspace.UnchangedAt(c.Context, c.String("db"), opts)
}

// pushImport runs the full import. It returns the branch's head before
// it, for a --replace that drops changes to say where they stay.
func pushImport(c *cli.Context, opts workspace.ImportOptions) (workspace.ImportStats, journal.State, error) {
	db, err := openStore(c, true)
	if err != nil {
		return workspace.ImportStats{}, journal.State{}, err
	}
	defer db.Close()
	// Before reading the workspace: a branch a session holds takes no
	// import (the journal refuses its first change anyway).
	branch := opts.Branch
	if err := db.BranchFree(branch); err != nil {
		return workspace.ImportStats{}, journal.State{}, err
	}
	var before journal.State
	if !opts.Capture {
		if before, err = db.Resolve(c.Context, opts.Branch, opts.Branch); err != nil {
			return workspace.ImportStats{}, journal.State{}, err
		}
	}
	prior, _ := db.Branch(c.Context, branch)
	st, err := workspace.Import(c.Context, db, opts)
	if err != nil && c.Context.Err() != nil {
		return st, before, importInterrupted(db, branch, prior.EventCount, err)
	}
	return st, before, err
}

// reportDropped names, on stderr, the changes of the branch a push
// --replace dropped and how to get them back.
func reportDropped(c *cli.Context, e *env, st workspace.ImportStats, before journal.State) {
	names := make([]string, 0, 10)
	for i, p := range st.DroppedList {
		if i == 10 {
			break
		}
		names = append(names, termtext.Quote(p))
	}
	more := ""
	if st.Dropped > len(names) {
		more = fmt.Sprintf(", and %d more", st.Dropped-len(names))
	}
	db := termtext.Word(c.String("db"))
	fmt.Fprintf(e.stderr, "art: push --replace dropped %d %s the branch had made since the last capture: %s%s; they stay in %s: art undo -d %s brings them back (or art checkout -d %s %s)\n",
		st.Dropped, plural(st.Dropped, "change", "changes"), strings.Join(names, ", "), more, describe(before), db, db, revOf(before))
}

// revOf is a revision that names state s: its snapshot id, or @seq.
func revOf(s journal.State) string {
	if !s.Snapshot.IsZero() {
		return s.Snapshot.Short()
	}
	return fmt.Sprintf("@%d", s.Seq)
}

// importInterrupted says what an import stopped by a signal recorded: the
// directories it committed before the signal stay on the branch (without
// a snapshot), and the next push continues from them.
func importInterrupted(db *journal.DB, branch string, before int64, err error) error {
	after, berr := db.Branch(context.Background(), branch)
	switch {
	case berr != nil:
		return &interruptedError{what: "push interrupted", err: err}
	case after.EventCount == before:
		return &interruptedError{what: "push interrupted: nothing recorded, branch " + termtext.Quote(branch) + " unchanged", err: err}
	}
	return &interruptedError{what: fmt.Sprintf("push interrupted: %d events recorded on branch %s before the signal, without a snapshot; art push -m again completes it, art undo drops it",
		after.EventCount-before, termtext.Quote(branch)), err: err}
}
