package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newBlameCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "blame",
		Usage:     "show which command made each change of a path, with time and snapshot",
		UsageText: "art blame -d FILE [--branch B | --all] [--json] PATH   (PATH relative to /home/agent, e.g. ws/main.py)",
		Flags: []cli.Flag{
			dbFlag(),
			branchFlag("branch to show"),
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every branch"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("blame takes one PATH")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			branch := branchScope(c)
			path := guestPath(c.Args().First())
			lines, err := db.Blame(c.Context, branch, path)
			if err != nil {
				return err
			}
			if len(lines) == 0 {
				if err := blameKnown(c, db, path); err != nil {
					return err
				}
			}
			// Changes older than a forget are gone: say so rather than
			// let the first line look like the path's origin.
			gone, err := db.Forgotten(c.Context, branch)
			if err != nil {
				return err
			}
			if len(gone) > 0 {
				newest := gone[len(gone)-1]
				fmt.Fprintf(e.stderr, "art: %d stretch(es) of history were forgotten (art forget); changes there are not shown, the newest: %s on %s\n",
					len(gone), newest, termtext.Quote(newest.Branch))
			}
			if c.Bool("json") {
				if lines == nil {
					lines = []blameLine{}
				}
				return writeJSON(e.stdout, lines)
			}
			for _, l := range lines {
				fmt.Fprintln(e.stdout, blameString(l))
			}
			return nil
		},
	}
}

// blameKnown returns a not-found error for a path no change names and the
// branch's head does not hold (a typo, a path that never existed); a path
// whose changes were all forgotten (art forget) is still known.
func blameKnown(c *cli.Context, db *journal.DB, path string) error {
	st, err := db.Resolve(c.Context, "", c.String("branch"))
	if err != nil {
		return err
	}
	if _, err := db.Objects().LookupPath(c.Context, st.Root, path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blame %s: no change recorded, and not in branch %s: %w", termtext.Quote(path), termtext.Quote(st.Branch), fs.ErrNotExist)
		}
		return err
	}
	return nil
}

// guestHome is where the sandbox sees the store's tree; journal paths are
// relative to it.
const guestHome = "/home/agent"

// guestPath accepts a path as the agent saw it (/home/agent/ws/f) or as the
// journal stores it (ws/f).
func guestPath(p string) string {
	if p == guestHome || strings.HasPrefix(p, guestHome+"/") {
		p = p[len(guestHome):]
	}
	return strings.Trim(p, "/")
}

// blameLine is one change of the path (stable JSON).
type blameLine = journal.BlameLine

func blameString(l blameLine) string {
	who := "(unknown process)"
	if len(l.Argv) > 0 {
		who = termtext.Argv(l.Argv)
	} else if l.PID != 0 {
		who = fmt.Sprintf("(pid %d, not named)", l.PID)
	} else if l.Op != 0 {
		// No process made it: an operation did (a push, a pull, a checkout).
		who = fmt.Sprintf("(op %d: %s %s)", l.Op, l.OpKind, termtext.Text(l.OpDesc))
	}
	snap := "(no snapshot yet)"
	if l.Snapshot != "" {
		snap = "snapshot " + l.Snapshot
	}
	return fmt.Sprintf("@%-6d %s  %-8s %-9s %s  pid %-7d %s", l.Seq, fmtTime(l.Time), termtext.Quote(l.Branch), l.Kind, snap, l.PID, who)
}
