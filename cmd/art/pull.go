package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/merge"
	"github.com/artrt/art/workspace"
	"github.com/urfave/cli/v2"
)

func newPullCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "write a state of the workspace back to the host directory",
		UsageText: "art pull -m DIR -d FILE [--branch B] [--at REV] [--merge [--conflict=markers] | --force] [--checksum] [--same-owner] [--quiet] [--json]\n   art pull -d FILE REMOTE [BRANCH...] [--force] [--json]",
		Description: `Makes DIR equal to /<basename of DIR>/ of the branch head (or of --at REV), writing
only what differs, deletions included. Every tree is read and checked before anything
is written, new contents are staged and verified inside DIR first, and no path in the
store can reach outside DIR. DIR/.art (sandbox policy) is never written, replaced or
deleted. A store is treated as someone else's data: files are not made setuid or setgid
and new files belong to DIR's owner, unless --same-owner; a file with other hard links
(that may be outside DIR) is replaced, never changed in place.

A pull never writes over host work the store does not have: a path of DIR that the pull
would change and that was changed, created or deleted on the host since art last captured,
pushed or pulled DIR is named, and the pull refused (exit 1, nothing written): art push
first (the host's changes go on top of the branch), or --force: the host's state is then
first recorded in the store as an operation of its own (a snapshot, with the branch checked
out back to its head), and art undo followed by art pull brings it back.

--merge lands the state on the host's changes instead (git stash; git pull; git stash pop),
by art merge's rules with the host as one side and what art last captured or pulled there as
the base: a path the state did not change keeps the host's version; a text file both changed
is merged line by line as git merge-file does; host-only new files stay. A conflict
(overlapping lines, deleted on one side and changed on the other, binary files, kinds or
modes changed both ways) refuses the pull, listed, nothing written (exit 1), unless
--conflict=markers: text files then get git's diff3 markers and other conflicting paths keep
the host's version. Paths left with the host's or merged content (or kept deleted) are not
recorded as in sync: the next capture (art push -m, art run) records them on the branch.

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
			jsonFlag(),
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "remote form: move branches that are not fast-forwards; with -m: write over host changes, recorded in the store first"},
			&cli.BoolFlag{Name: "merge", Usage: "with -m: merge the state with the host's own changes instead of refusing"},
			&cli.StringFlag{Name: "conflict", Value: "refuse", Usage: "with --merge: what to do with conflicts: `refuse` (write nothing, exit 1) or markers (git-style markers; other conflicts keep the host's version)"},
			&cli.Int64Flag{Name: "max-entries", Usage: "refuse a state naming more than `N` paths once expanded (default 10000000)"},
			&cli.Int64Flag{Name: "max-bytes", Usage: "refuse a state holding more than `N` bytes of files once expanded (default 1 TiB)"},
		},
		Action: func(c *cli.Context) error { return runPull(c, e) },
	}
}

// runPull is art pull: a REMOTE's branches, or a state onto the host
// directory (refusing, recording or merging the host's own changes).
func runPull(c *cli.Context, e *env) error {
	if c.NArg() > 0 {
		return remoteTransfer(c, e, false)
	}
	if err := pullMergeFlags(c); err != nil {
		return err
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
	bar := newProgress(e.stderr)
	written := map[string]journal.StatCache{}
	began := time.Now()
	plan, err := workspace.PlanExport(c.Context, db.Objects(), workspace.ExportOptions{
		Dir: dir, State: st, Checksum: c.Bool("checksum"), Entries: entries, Warn: e.stderr, Keep: workspace.StoreFiles(db.Path()),
		SameOwner: c.Bool("same-owner"), MaxEntries: c.Int64("max-entries"), MaxBytes: c.Int64("max-bytes"),
		Progress: func(done, total int64) { bar.update("pull: %s of %s", fmtBytes(done), fmtBytes(total)) },
		Written:  func(p string, sc journal.StatCache) { written[p] = sc },
	})
	if err != nil {
		return err
	}
	defer plan.Close()
	var merged *workspace.HostMerge
	var saved *savedHost
	if c.Bool("merge") {
		merged, err = mergeHostChanges(c, e, db, plan, dir, rev)
	} else {
		saved, err = keepHostChanges(c, e, db, plan, dir)
	}
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(dir)
	op, err := db.BeginOp(c.Context, c.String("branch"), "export", fmt.Sprintf("pull %s to %s", describe(st), abs))
	if err != nil {
		return err
	}
	stats, err := plan.Apply()
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
	return pullReport{dir: dir, st: st, stats: stats, saved: saved, merged: merged}.print(e, c.Bool("json"))
}

// pullReport is what a pull of st into dir did.
type pullReport struct {
	dir    string
	st     journal.State
	stats  workspace.ExportStats
	saved  *savedHost           // pull --force: the host's changes recorded first
	merged *workspace.HostMerge // pull --merge
}

// print says it on e's streams, or as JSON.
func (r pullReport) print(e *env, asJSON bool) error {
	dir, st, stats, saved, merged := r.dir, r.st, r.stats, r.saved, r.merged
	if saved != nil && saved.note != "" {
		fmt.Fprint(e.stderr, saved.note)
	}
	if asJSON {
		return writeJSON(e.stdout, struct {
			State journal.State         `json:"state"`
			Stats workspace.ExportStats `json:"stats"`
			Saved *savedHost            `json:"saved_host_changes,omitempty"`
			Merge *workspace.HostMerge  `json:"merge,omitempty"`
		}{st, stats, saved, merged})
	}
	if merged != nil {
		printHostMerge(e, dir, merged)
		if merged.Conflicts > 0 {
			fmt.Fprintf(e.stderr, "art: pull: %d %s written with conflicts (git-style markers in text files; other conflicting paths keep the host's version): resolve them, then art push -m %s\n",
				merged.Conflicts, plural(merged.Conflicts, "path", "paths"), termtext.Word(dir))
		}
	}
	fmt.Fprintf(e.stdout, "pull: %d written, %d updated, %d deleted, %d unchanged; wrote %s from %s\n",
		stats.Written, stats.Updated, stats.Deleted, stats.Unchanged, fmtBytes(stats.BytesWritten), describe(st))
	return nil
}

// savedHost is what pull --force recorded of the host before writing over
// it.
type savedHost struct {
	Changes  []workspace.HostChange `json:"paths"`
	Snapshot journal.Snapshot       `json:"snapshot"` // the branch with the host's changes taken in
	Op       int64                  `json:"op"`       // the checkout that returned the branch to its head
	note     string                 // what to tell the user once the pull has written
}

// keepHostChanges refuses a pull that would write over what the host
// changed since art last captured or pulled the workspace (the import
// records of the branch say what that was), unless --force. With --force
// the host's state is first captured into the branch as an operation of
// its own, and the branch is then checked out back to where it was: the
// host's changes stay in history (art undo brings the branch to them).
func keepHostChanges(c *cli.Context, e *env, db *journal.DB, plan *workspace.ExportPlan, dir string) (*savedHost, error) {
	branch := branchName(c.String("branch"))
	changes, err := plan.HostChanges(c.Context, db, branch)
	if err != nil || len(changes) == 0 {
		return nil, err
	}
	name, _ := workspace.Name(dir)
	list := hostChangeList(name, changes, 10)
	if !c.Bool("force") {
		return nil, withHint(fmt.Errorf("pull would overwrite %d %s changed on the host since art last captured or pulled %s, that the store does not have: %s",
			len(changes), plural(len(changes), "path", "paths"), termtext.Quote(dir), list), "art push first, or --force")
	}
	// --force captures DIR: the same care as any capture of a defaulted -m.
	if err := checkCaptureDir(c, dir, c.String("db"), procOwn()); err != nil {
		return nil, err
	}
	head, err := db.Resolve(c.Context, branch, branch)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(dir)
	st, err := workspace.Import(c.Context, db, workspace.ImportOptions{Dir: dir, Branch: branch, Capture: true, Warn: e.stderr,
		Message: "host changes to " + abs + " kept by pull --force"})
	if err != nil {
		return nil, fmt.Errorf("record the host's changes before pulling: %w", err)
	}
	saved := &savedHost{Changes: changes, Snapshot: st.Snapshot}
	if st.NothingChanged {
		return saved, nil // the branch already had all of them
	}
	op, err := db.Checkout(c.Context, branch, head)
	if err != nil {
		return nil, fmt.Errorf("return %s to its head after recording the host's changes (they are in snapshot %s): %w", branch, st.Snapshot.ID.Short(), err)
	}
	saved.Op = op.ID
	db0 := c.String("db")
	// Said once the pull has written: if it fails, DIR is unchanged and
	// the error is the one line the user needs.
	saved.note = fmt.Sprintf("art: pull: kept the host's %d %s (%s) in snapshot %s before writing over them; to get them back: art undo -d %s, then art pull -m %s -d %s (or art cat -d %s %s:/%s/PATH)\n",
		len(changes), plural(len(changes), "change", "changes"), list, st.Snapshot.ID.Short(),
		termtext.Word(db0), termtext.Word(dir), termtext.Word(db0), termtext.Word(db0), st.Snapshot.ID.Short(), termtext.Quote(name))
	return saved, nil
}

// pullMergeFlags checks --merge and --conflict against the rest.
func pullMergeFlags(c *cli.Context) error {
	if !c.Bool("merge") {
		if c.IsSet("conflict") {
			return usagef("--conflict goes with --merge")
		}
		return nil
	}
	if c.Bool("force") {
		return usagef("--merge and --force exclude each other")
	}
	if v := c.String("conflict"); v != "refuse" && v != "markers" {
		return usagef("--conflict is refuse or markers, not %s", termtext.Quoted(v))
	}
	return nil
}

// mergeHostChanges makes the plan a merge of the state with what the host
// changed since art last captured or pulled it (workspace.MergeHost); with
// conflicts and no --conflict=markers it refuses, listing them.
func mergeHostChanges(c *cli.Context, e *env, db *journal.DB, plan *workspace.ExportPlan, dir, rev string) (*workspace.HostMerge, error) {
	hm, err := plan.MergeHost(c.Context, db, workspace.HostMergeOptions{
		Branch: c.String("branch"), Markers: c.String("conflict") == "markers",
		Labels: mergeLabels(dir, rev),
	})
	if !errors.Is(err, workspace.ErrHostConflicts) {
		return hm, err
	}
	if c.Bool("json") {
		// What would conflict, for a program to act on; the error says it too.
		if werr := writeJSON(e.stdout, struct {
			Merge *workspace.HostMerge `json:"merge"`
		}{hm}); werr != nil {
			return nil, werr
		}
	}
	name, _ := workspace.Name(dir)
	var list []string
	for _, p := range hm.Paths {
		if p.Action == "conflict" {
			list = append(list, termtext.Quote(name+"/"+p.Path)+": "+termtext.Text(p.Reason))
		}
	}
	return nil, withHint(fmt.Errorf("pull --merge refused (%w), nothing written: %s: %s",
		err, paths(hm.Conflicts, "conflicting"), strings.Join(list, "; ")),
		"--conflict=markers writes git-style markers into the host's files; or art push first, then art merge")
}

// mergeLabels name the sides in conflict markers: the host directory and
// the state pulled.
func mergeLabels(dir, rev string) merge.Labels {
	return merge.Labels{Ours: "host " + dir, Base: "base", Theirs: rev}
}

func printHostMerge(e *env, dir string, hm *workspace.HostMerge) {
	name, _ := workspace.Name(dir)
	for _, p := range hm.Paths {
		line := fmt.Sprintf("  %-8s %s", p.Action, termtext.Quote(name+"/"+p.Path))
		if p.Reason != "" {
			line += ": " + termtext.Text(p.Reason)
		}
		if p.Hunks > 0 {
			line += fmt.Sprintf(" (%d %s)", p.Hunks, plural(p.Hunks, "hunk", "hunks"))
		}
		fmt.Fprintln(e.stdout, line)
	}
}

// hostChangeList names up to max host changes on one line:
// "ws/b (changed), ws/new (new)", and how many more.
func hostChangeList(name string, changes []workspace.HostChange, max int) string {
	var b strings.Builder
	for i, hc := range changes {
		if i == max {
			fmt.Fprintf(&b, ", and %d more", len(changes)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(termtext.Quote(name+"/"+hc.Path) + " (" + hc.What + ")")
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// describe names a state for people: its snapshot id, or branch@seq.
func describe(st journal.State) string {
	if !st.Snapshot.IsZero() {
		return "snapshot " + st.Snapshot.Short()
	}
	return fmt.Sprintf("%s@%d", termtext.Quote(st.Branch), st.Seq)
}
