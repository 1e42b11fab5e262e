package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/mergeop"
)

func newMergeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "merge another branch or state into a branch (three-way, line merges of text files)",
		UsageText: "art merge -d FILE SOURCE [--into BRANCH] [--conflict=markers | --ours | --theirs] [--json]",
		Description: `Merges the state SOURCE (any revision: a branch, snapshot id, @SEQ, REV~N) into BRANCH
against their merge base, the newest state both histories contain. Per path: a side that
left it as in the base takes the other side's version; both sides the same is kept once;
a text file (UTF-8, no NUL, at most 8 MiB) both changed is merged line by line as git
merge-file does; anything else - overlapping edits, deleted on one side and changed on the
other, a kind, mode, xattr or symlink changed both ways, a directory one side replaced while
the other changed inside - is a conflict. A rename is a delete and an add.

The merge is one operation on BRANCH: a merge event naming SOURCE, the path changes as
ordinary events (art log --path and art blame see them) and a snapshot; art undo reverts it.
By default a merge with conflicts changes nothing and lists them (exit 1).
--conflict=markers writes git's diff3-style markers into conflicting text files (other
conflicts keep BRANCH's version) and records the merge as conflicted (art status, art log):
edit the markers away, then art snapshot. --ours / --theirs take that side for each conflict
(each conflicting hunk of a text file). A branch a live session (art run, mount, exec, mcp)
holds is refused.`,
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			&cli.StringFlag{Name: "into", Value: journal.DefaultBranch, Usage: "`BRANCH` to merge into"},
			&cli.StringFlag{Name: "conflict", Value: "refuse", Usage: "what to do with conflicts: `refuse` (change nothing, exit 1) or markers (write git-style markers)"},
			&cli.BoolFlag{Name: "ours", Usage: "resolve each conflict to BRANCH's side"},
			&cli.BoolFlag{Name: "theirs", Usage: "resolve each conflict to SOURCE's side"},
			&cli.StringFlag{Name: "message", Usage: "the snapshot's `MESSAGE` (default: merge SOURCE into BRANCH)"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("merge takes exactly one SOURCE")
			}
			mode, err := mergeMode(c)
			if err != nil {
				return err
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			into := c.String("into")
			src, err := db.Resolve(c.Context, c.Args().First(), into)
			if err != nil {
				return err
			}
			res, err := mergeop.Merge(c.Context, db, mergeop.Options{
				Source: src, SourceName: c.Args().First(), Into: into, Conflict: mode, Message: c.String("message"),
			})
			if res != nil {
				if c.Bool("json") {
					if werr := writeJSON(e.stdout, res); werr != nil {
						return werr
					}
				} else {
					printMerge(e, c.String("db"), res)
				}
			}
			if errors.Is(err, mergeop.ErrConflicts) {
				return withHint(fmt.Errorf("merge of %s into %s refused: %s, nothing changed",
					termtext.Quoted(c.Args().First()), termtext.Quote(into), paths(len(res.Conflicts), "conflicting")),
					"--conflict=markers writes git-style markers to resolve by hand; --ours or --theirs takes one side")
			}
			return err
		},
	}
}

func mergeMode(c *cli.Context) (mergeop.ConflictMode, error) {
	n := 0
	for _, f := range []string{"ours", "theirs"} {
		if c.Bool(f) {
			n++
		}
	}
	if c.IsSet("conflict") {
		n++
	}
	if n > 1 {
		return 0, usagef("--conflict, --ours and --theirs exclude each other")
	}
	switch {
	case c.Bool("ours"):
		return mergeop.Ours, nil
	case c.Bool("theirs"):
		return mergeop.Theirs, nil
	}
	switch c.String("conflict") {
	case "refuse":
		return mergeop.Refuse, nil
	case "markers":
		return mergeop.Markers, nil
	}
	return 0, usagef("--conflict is refuse or markers, not %s", termtext.Quoted(c.String("conflict")))
}

func printMerge(e *env, db string, res *mergeop.Result) {
	w := e.stdout
	if res.UpToDate {
		fmt.Fprintf(w, "%s is up to date with %s: nothing to merge\n", termtext.Quote(res.Into.Branch), describe(res.Source))
		return
	}
	base := "no common history (base: the empty tree)"
	if res.Base != nil {
		base = "base " + describe(*res.Base)
	}
	switch {
	case res.Applied && res.Conflicted:
		fmt.Fprintf(w, "merged %s into %s with conflicts (%s): %s, %s\n",
			describe(res.Source), termtext.Quote(res.Into.Branch), base, paths(len(res.Merged), "merged"), paths(len(res.Conflicts), "conflicting"))
	case res.Applied:
		fmt.Fprintf(w, "merged %s into %s (%s): %s", describe(res.Source), termtext.Quote(res.Into.Branch), base, paths(len(res.Merged), "merged"))
		if len(res.Conflicts) > 0 {
			fmt.Fprintf(w, ", %s resolved", plural(len(res.Conflicts), "conflict", "conflicts"))
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "not merged: %s (%s)\n", paths(len(res.Conflicts), "conflicting"), base)
	}
	for _, p := range res.Merged {
		fmt.Fprintf(w, "  %-8s %s\n", p.Action, termtext.Quote(p.Path))
	}
	for _, p := range res.Conflicts {
		line := fmt.Sprintf("  %-8s %s: %s", "conflict", termtext.Quote(p.Path), termtext.Text(p.Reason))
		if p.Hunks > 0 {
			line += fmt.Sprintf(" (%d %s)", p.Hunks, plural(p.Hunks, "hunk", "hunks"))
		}
		if p.Resolution != "" {
			line += "; " + p.Resolution
		}
		fmt.Fprintln(w, line)
	}
	if res.Snapshot != nil {
		fmt.Fprintf(w, "snapshot %s %s\n", res.Snapshot.ID.Short(), termtext.Quoted(res.Snapshot.Message))
		if res.Conflicted {
			fmt.Fprintln(e.stderr, "resolve the conflict markers, then: art snapshot")
		}
		fmt.Fprintf(e.stderr, "undo with: art undo -d %s --branch %s\n", termtext.Word(db), termtext.Word(res.Into.Branch))
	}
}

// paths is "1 merged path", "2 conflicting paths".
func paths(n int, adj string) string {
	return fmt.Sprintf("%d %s %s", n, adj, plural(n, "path", "paths"))
}
