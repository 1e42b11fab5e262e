package main

import (
	"context"
	"fmt"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

type statusSession struct {
	PID    int       `json:"pid"`
	Branch string    `json:"branch"`
	Since  time.Time `json:"since"`
}

type statusReport struct {
	Branch       string            `json:"branch"`
	Head         journal.State     `json:"head"`
	LastSnapshot *journal.Snapshot `json:"last_snapshot,omitempty"`
	Changed      int               `json:"changed_since_snapshot"` // paths changed since the last snapshot (or since empty)
	Sessions     []statusSession   `json:"sessions"`
	Sizes        *journal.Sizes    `json:"sizes"`
	Reclaimable  int64             `json:"gc_reclaimable_bytes"` // what art gc (default grace) would remove
	InGrace      int64             `json:"gc_in_grace_bytes"`    // unreferenced, but within the grace period
}

func newStatusCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a branch's head, changes since its last snapshot, running sessions, store size",
		UsageText: "art status -d FILE [-b BRANCH] [--json]",
		Description: `Shows the branch's head and last snapshot with the number of paths changed since
it, the sessions running on this store (pid, branch, since when), the store's size on
disk split by kind (content chunks, manifests, trees, journal events, other) and what
art gc would reclaim.`,
		Flags: []cli.Flag{
			dbFlag(),
			branchFlag("`BRANCH` to describe"),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("status takes no arguments")
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			rep, err := status(c.Context, db, c.String("branch"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rep)
			}
			w := e.stdout
			fmt.Fprintf(w, "branch %s at @%d (root %s)\n", rep.Branch, rep.Head.Seq, rep.Head.Root.Short())
			if s := rep.LastSnapshot; s != nil {
				fmt.Fprintf(w, "last snapshot %s @%d %s %q; %d paths changed since\n", s.ID.Short(), s.Seq, fmtTime(s.Time), s.Message, rep.Changed)
			} else {
				fmt.Fprintf(w, "no snapshot; %d paths in the head\n", rep.Changed)
			}
			if len(rep.Sessions) == 0 {
				fmt.Fprintln(w, "no session running")
			}
			for _, s := range rep.Sessions {
				fmt.Fprintf(w, "session pid %d on branch %s since %s\n", s.PID, s.Branch, s.Since.Local().Format("2006-01-02 15:04:05"))
			}
			z := rep.Sizes
			fmt.Fprintf(w, "store %s: chunks %s, manifests %s, trees %s, events %s, other %s\n", fmtBytes(z.File),
				fmtBytes(z.Chunks), fmtBytes(z.Manifests), fmtBytes(z.Trees), fmtBytes(z.Events), fmtBytes(z.Other))
			fmt.Fprintf(w, "art gc would reclaim %s", fmtBytes(rep.Reclaimable))
			if rep.InGrace > 0 {
				fmt.Fprintf(w, " (%s more after the grace period)", fmtBytes(rep.InGrace))
			}
			fmt.Fprintln(w)
			return nil
		},
	}
}

// status gathers the report; sizes are stored (compressed) bytes.
func status(ctx context.Context, db *journal.DB, branch string) (*statusReport, error) {
	head, err := db.Head(ctx, branch)
	if err != nil {
		return nil, err
	}
	rep := &statusReport{Branch: branch, Head: head, Sessions: []statusSession{}}
	snaps, err := db.Snapshots(ctx, branch)
	if err != nil {
		return nil, err
	}
	b, _ := (&cas.Tree{}).Encode()
	from := cas.Sum(b) // the empty tree (every store has it: its first event's root)
	if len(snaps) > 0 {
		rep.LastSnapshot = &snaps[0]
		from = snaps[0].Root
	}
	if err := journal.Diff(ctx, db.Objects(), from, head.Root, func(journal.Change) error { rep.Changed++; return nil }); err != nil {
		return nil, err
	}
	if base, err := session.StateDir(); err == nil {
		live, _ := session.List(base, db.Path())
		for _, l := range live {
			rep.Sessions = append(rep.Sessions, statusSession{PID: l.PID, Branch: l.Branch, Since: l.Since})
		}
	}
	if rep.Sizes, err = db.Sizes(ctx); err != nil {
		return nil, err
	}
	gc, err := db.GC(ctx, journal.GCOptions{DryRun: true, Grace: time.Hour})
	if err != nil {
		return nil, err
	}
	rep.Reclaimable, rep.InGrace = gc.RemovedBytes, gc.ProtectedBytes
	return rep, nil
}
