package main

import (
	"fmt"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

// newBranchCommand is art branch. It is longer than the guideline because
// the command is one cli.Command literal (help text, flag table, and an
// Action whose switch has one short arm per mode: list, create, rename,
// delete); each arm reads best beside the flags it checks.
func newBranchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "branch",
		Usage: "list, create, rename or delete branches",
		UsageText: "art branch -d FILE                       list branches\n" +
			"   art branch -d FILE NAME [--from REV]     create NAME at REV (default: the head of main)\n" +
			"   art branch -d FILE --rename OLD NEW      rename OLD to NEW\n" +
			"   art branch -d FILE --delete NAME         retire NAME (its history stays)",
		Description: `A deleted branch's events and snapshots stay: the delete prints the state its
head was at and the command that brings it back. The default branch (main) is
deleted or renamed only with --force: art run, log, checkout... default to it.
A branch a live session (art run, mount, exec, mcp) holds is not deleted,
renamed or moved: end the session first.`,
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			&cli.StringFlag{Name: "from", Usage: "start the new branch at `REV`", Value: journal.DefaultBranch},
			&cli.StringFlag{Name: "delete", Aliases: []string{"D"}, Usage: "delete branch `NAME`"},
			&cli.StringFlag{Name: "rename", Usage: "rename branch `OLD` to the NAME given after it"},
			&cli.BoolFlag{Name: "force", Usage: "allow deleting or renaming the default branch (" + journal.DefaultBranch + ")"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			open := openStore
			if !c.IsSet("delete") && !c.IsSet("rename") && c.NArg() == 0 {
				open = func(c *cli.Context, _ bool) (*journal.DB, error) { return openStoreRead(c) } // a listing
			}
			db, err := open(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			switch {
			case c.IsSet("delete") && c.IsSet("rename"):
				return usagef("--delete and --rename do not go together")
			case c.IsSet("delete"):
				if c.NArg() > 0 {
					return usagef("--delete takes the branch name as its value")
				}
				name := c.String("delete")
				if name == journal.DefaultBranch && !c.Bool("force") {
					return withHint(usagef("refusing to delete the default branch %s: art run, log, checkout... use it", name),
						"art branch --delete "+name+" --force, if you mean it")
				}
				head, err := db.DeleteBranch(c.Context, name)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return writeJSON(e.stdout, head)
				}
				fmt.Fprintf(e.stdout, "deleted branch %s at %s (root %s)\n", termtext.Quote(name), describe(head), head.Root.Short())
				fmt.Fprintf(e.stderr, "restore it with: art branch -d %s %s --from %s\n",
					termtext.Word(c.String("db")), termtext.Word(name), restoreRev(head))
				return nil
			case c.IsSet("rename"):
				if c.NArg() != 1 {
					return usagef("--rename OLD takes the new name after it: art branch --rename OLD NEW")
				}
				from, to := c.String("rename"), c.Args().First()
				if from == journal.DefaultBranch && !c.Bool("force") {
					return withHint(usagef("refusing to rename the default branch %s: art run, log, checkout... use it", from),
						"art branch --rename "+from+" "+termtext.Word(to)+" --force, if you mean it")
				}
				if err := db.RenameBranch(c.Context, from, to); err != nil {
					return err
				}
				if c.Bool("json") {
					return writeJSON(e.stdout, map[string]string{"from": from, "to": to})
				}
				fmt.Fprintf(e.stdout, "renamed branch %s to %s\n", termtext.Quote(from), termtext.Quote(to))
				return nil
			case c.NArg() == 1:
				name := c.Args().First()
				from, err := db.Resolve(c.Context, c.String("from"), journal.DefaultBranch)
				if err != nil {
					return err
				}
				b, err := db.CreateBranch(c.Context, name, from)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return writeJSON(e.stdout, b)
				}
				fmt.Fprintf(e.stdout, "created branch %s at %s\n", termtext.Quote(b.Name), describe(from))
				return nil
			case c.NArg() > 1:
				return usagef("branch takes one NAME")
			}
			bs, err := db.Branches(c.Context)
			if err != nil {
				return err
			}
			type row struct {
				journal.Branch
				Root     string `json:"root"`
				Snapshot string `json:"snapshot,omitempty"`
			}
			rows := make([]row, 0, len(bs))
			for _, b := range bs {
				st, err := db.Head(c.Context, b.Name)
				if err != nil {
					return err
				}
				r := row{Branch: b, Root: st.Root.String()}
				if !st.Snapshot.IsZero() {
					r.Snapshot = st.Snapshot.String()
				}
				rows = append(rows, r)
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rows)
			}
			for _, r := range rows {
				at := "root " + r.Root[:12]
				if r.Snapshot != "" {
					at = "snapshot " + r.Snapshot[:12]
				}
				fmt.Fprintf(e.stdout, "%-20s @%-7d %s  created %s\n", termtext.Quote(r.Name), r.HeadSeq, at, fmtTime(r.Created))
			}
			return nil
		},
	}
}

// restoreRev names a deleted branch's head for art branch NAME --from: its
// snapshot id when the head is exactly one, else @SEQ.
func restoreRev(st journal.State) string {
	if !st.Snapshot.IsZero() {
		return st.Snapshot.Short()
	}
	return fmt.Sprintf("@%d", st.Seq)
}
