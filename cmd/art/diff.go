package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newDiffCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show what changed between two states",
		UsageText: "art diff -d FILE [A [B]] [--stat | --name-status | --patch] [--json] [--no-pager] [--color WHEN]",
		Description: `With no REV: the branch's last snapshot against its head. With one: REV against the
head. With two: A against B. The comparison walks only subtrees whose ids differ, so
it costs what changed, not the size of the tree.

On a terminal the output goes through a pager (ART_PAGER, PAGER, else less) and
--patch is colored, as git does; never on a pipe. NO_COLOR or --color never turns
color off, --no-pager the pager.`,
		Flags: append([]cli.Flag{
			dbFlag(),
			branchFlag("branch whose head and snapshots the defaults refer to"),
			&cli.BoolFlag{Name: "stat", Usage: "per-file size change and a summary"},
			&cli.BoolFlag{Name: "name-status", Usage: "one line per changed path: A, D, M or T and the path (default)"},
			&cli.BoolFlag{Name: "patch", Aliases: []string{"p"}, Usage: "unified diff of text files"},
			jsonFlag(),
		}, pagerFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 2 {
				return usagef("diff takes at most two revisions")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			branch := c.String("branch")
			var a, b journal.State
			switch c.NArg() {
			case 0:
				if b, err = db.Resolve(c.Context, branch, branch); err != nil {
					return err
				}
				if a, err = db.Resolve(c.Context, branch+"~0", branch); err != nil {
					return err
				}
			case 1:
				if a, err = db.Resolve(c.Context, c.Args().Get(0), branch); err != nil {
					return err
				}
				if b, err = db.Resolve(c.Context, branch, branch); err != nil {
					return err
				}
			case 2:
				if a, err = db.Resolve(c.Context, c.Args().Get(0), branch); err != nil {
					return err
				}
				if b, err = db.Resolve(c.Context, c.Args().Get(1), branch); err != nil {
					return err
				}
			}
			var changes []journal.Change
			err = journal.Diff(c.Context, db.Objects(), a.Root, b.Root, func(ch journal.Change) error {
				changes = append(changes, ch)
				return nil
			})
			if err != nil {
				return err
			}
			color, done, err := humanOutput(c, e)
			if err != nil {
				return err
			}
			defer done()
			switch {
			case c.Bool("json"):
				return writeJSON(e.stdout, diffJSON(a, b, changes))
			case c.Bool("stat"):
				printStat(e, changes)
			case c.Bool("patch"):
				if !color {
					return printPatch(c.Context, e, db.Objects(), changes)
				}
				cw := &patchColorWriter{w: e.stdout}
				pe := *e
				pe.stdout = cw
				if err := printPatch(c.Context, &pe, db.Objects(), changes); err != nil {
					return err
				}
				return cw.Flush()
			default:
				for _, ch := range changes {
					if ch.Kind == journal.Modified && (ch.Old.Kind == cas.EntryDir) {
						continue // a directory's own metadata; its contents are listed
					}
					fmt.Fprintf(e.stdout, "%c\t%s\n", ch.Kind, termtext.QuotePath(ch.Path))
				}
			}
			return nil
		},
	}
}

type changeJSON struct {
	Kind    journal.ChangeKind `json:"kind"`
	Path    string             `json:"path"`
	Type    string             `json:"type"`
	OldSize int64              `json:"old_size,omitempty"`
	NewSize int64              `json:"new_size,omitempty"`
	Content bool               `json:"content_changed"`
}

func diffJSON(a, b journal.State, changes []journal.Change) any {
	out := struct {
		From    journal.State `json:"from"`
		To      journal.State `json:"to"`
		Changes []changeJSON  `json:"changes"`
	}{a, b, []changeJSON{}}
	for _, ch := range changes {
		cj := changeJSON{Kind: ch.Kind, Path: string(ch.Path), Content: ch.ContentChanged() || ch.Kind != journal.Modified}
		ent := ch.New
		if ent == nil {
			ent = ch.Old
		}
		cj.Type = ent.Kind.String()
		if ch.Old != nil {
			cj.OldSize = ch.Old.Size
		}
		if ch.New != nil {
			cj.NewSize = ch.New.Size
		}
		out.Changes = append(out.Changes, cj)
	}
	return out
}

func printStat(e *env, changes []journal.Change) {
	var files, added, deleted, modified int
	var grow, shrink int64
	for _, ch := range changes {
		ent := ch.New
		if ent == nil {
			ent = ch.Old
		}
		if ent.Kind == cas.EntryDir && ch.Kind != journal.TypeChanged {
			continue
		}
		files++
		var before, after int64
		if ch.Old != nil && ch.Old.Kind != cas.EntryDir {
			before = ch.Old.Size
		}
		if ch.New != nil && ch.New.Kind != cas.EntryDir {
			after = ch.New.Size
		}
		switch ch.Kind {
		case journal.Added:
			added++
		case journal.Deleted:
			deleted++
		default:
			modified++
		}
		if after > before {
			grow += after - before
		} else {
			shrink += before - after
		}
		note := fmt.Sprintf("%s -> %s", fmtBytes(before), fmtBytes(after))
		if ch.Kind == journal.Modified && !ch.ContentChanged() {
			note = "metadata"
		}
		fmt.Fprintf(e.stdout, " %-50s | %c %s\n", termtext.QuotePath(ch.Path), ch.Kind, note)
	}
	fmt.Fprintf(e.stdout, " %d paths changed: %d added, %d modified, %d deleted (+%s, -%s)\n",
		files, added, modified, deleted, fmtBytes(grow), fmtBytes(shrink))
}

func printPatch(ctx context.Context, e *env, objs *cas.Store, changes []journal.Change) error {
	read := func(ent *cas.Entry) ([]byte, error) {
		if ent == nil {
			return nil, nil
		}
		switch ent.Kind {
		case cas.EntryFile:
			if ent.Size > maxPatchBytes {
				return make([]byte, 0), nil
			}
			var buf bytes.Buffer
			_, err := objs.ReadFile(ctx, ent.Target, &buf)
			return buf.Bytes(), err
		case cas.EntrySymlink:
			return append(append([]byte{}, ent.Link...), '\n'), nil
		}
		return nil, nil
	}
	for _, ch := range changes {
		isContent := func(ent *cas.Entry) bool {
			return ent != nil && (ent.Kind == cas.EntryFile || ent.Kind == cas.EntrySymlink)
		}
		if !isContent(ch.Old) && !isContent(ch.New) {
			continue
		}
		// As git: a name that needs quoting is quoted whole, prefix
		// inside ("a/ws/bad\xff").
		nameA, nameB := termtext.Quote("a/"+string(ch.Path)), termtext.Quote("b/"+string(ch.Path))
		fmt.Fprintf(e.stdout, "diff --art %s %s\n", nameA, nameB)
		if ch.Kind == journal.Modified && !ch.ContentChanged() {
			fmt.Fprintf(e.stdout, "mode %04o -> %04o, mtime %s -> %s\n", ch.Old.Mode, ch.New.Mode, fmtTime(ch.Old.MTime), fmtTime(ch.New.MTime))
			continue
		}
		a, err := read(ch.Old)
		if err != nil {
			return err
		}
		b, err := read(ch.New)
		if err != nil {
			return err
		}
		if ch.Old == nil || !isContent(ch.Old) {
			nameA = "/dev/null"
		}
		if ch.New == nil || !isContent(ch.New) {
			nameB = "/dev/null"
		}
		writeUnified(e.stdout, nameA, nameB, a, b)
	}
	return nil
}
