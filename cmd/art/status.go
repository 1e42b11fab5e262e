package main

import (
	"fmt"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

// statusReport is art status --json.
type statusReport struct {
	Store    string         `json:"store"`
	Branch   journal.State  `json:"branch"`
	Branches int            `json:"branches"`
	Last     *lastSnapshot  `json:"last_snapshot,omitempty"`
	Sessions []liveSession  `json:"sessions"`
	Usage    journal.Usage  `json:"usage"`
	Changes  map[string]int `json:"changes_since_snapshot"`
	// GC is what art gc (default grace) would remove now: a dry run.
	GC *journal.GCReport `json:"gc"`
	// ConflictedMerge is the branch's newest op when it is a merge that
	// left conflict markers (art merge --conflict=markers): resolved by
	// the next op, such as art snapshot after editing them away.
	ConflictedMerge *journal.OpInfo `json:"conflicted_merge,omitempty"`
}

type lastSnapshot struct {
	journal.Snapshot
	Age string `json:"age"`
}

type liveSession struct {
	PID    int       `json:"pid"`
	Branch string    `json:"branch"`
	Since  time.Time `json:"since"`
}

func newStatusCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a branch's head, its changes since the last snapshot, running sessions and the store's size",
		UsageText: "art status -d FILE [-b BRANCH] [--json]",
		Description: "The head of the branch and its last snapshot, with the paths changed since that snapshot\n" +
			"(added, modified, deleted); the sessions running on this store (art run, art exec, art mount)\n" +
			"with their pid, branch and start; and what the store occupies: the file and its WAL, the\n" +
			"bytes of file content, trees, the journal, the branches' projections and the import cache,\n" +
			"and the free pages inside the file.",
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			branchFlag("`BRANCH` to describe"),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("status takes no arguments")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			rep := statusReport{Store: db.Path(), Changes: map[string]int{}}
			if rep.Branch, err = db.Head(c.Context, c.String("branch")); err != nil {
				return err
			}
			bs, err := db.Branches(c.Context)
			if err != nil {
				return err
			}
			rep.Branches = len(bs)
			if rep.ConflictedMerge, err = conflictedMerge(c, db, c.String("branch")); err != nil {
				return err
			}
			snaps, err := db.Snapshots(c.Context, c.String("branch"))
			if err != nil {
				return err
			}
			if len(snaps) > 0 { // newest first
				s := snaps[0]
				rep.Last = &lastSnapshot{Snapshot: s, Age: fmtAge(time.Since(time.Unix(0, s.Time)))}
				err := journal.Diff(c.Context, db.Objects(), s.Root, rep.Branch.Root, func(ch journal.Change) error {
					switch ch.Kind {
					case journal.Added:
						rep.Changes["added"]++
					case journal.Deleted:
						rep.Changes["deleted"]++
					default:
						rep.Changes["modified"]++
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("changes since snapshot %s: %w", s.ID.Short(), err)
				}
			}
			if base, err := session.StateDir(); err == nil {
				live, err := session.List(base, db.Path())
				if err != nil {
					return err
				}
				for _, l := range live {
					rep.Sessions = append(rep.Sessions, liveSession{PID: l.PID, Branch: l.Branch, Since: l.Since})
				}
			}
			if rep.Sessions == nil {
				rep.Sessions = []liveSession{}
			}
			if rep.Usage, err = db.Usage(c.Context); err != nil {
				return err
			}
			if rep.GC, err = db.GC(c.Context, journal.GCOptions{DryRun: true, Grace: time.Hour}); err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rep)
			}
			printStatus(e, &rep)
			return nil
		},
	}
}

func printStatus(e *env, rep *statusReport) {
	w := e.stdout
	b := rep.Branch
	fmt.Fprintf(w, "branch %s: head @%d (root %s)", termtext.Quote(b.Branch), b.Seq, b.Root.Short())
	if rep.Branches > 1 {
		fmt.Fprintf(w, "; %d branches in the store", rep.Branches)
	}
	fmt.Fprintln(w)
	if rep.Last == nil {
		fmt.Fprintf(w, "no snapshot on branch %s yet\n", termtext.Quote(b.Branch))
	} else {
		s := rep.Last
		fmt.Fprintf(w, "last snapshot %s %s, %s ago", s.ID.Short(), termtext.Quoted(s.Message), s.Age)
		if n := rep.Changes["added"] + rep.Changes["modified"] + rep.Changes["deleted"]; n == 0 {
			fmt.Fprintln(w, "; nothing changed since")
		} else {
			fmt.Fprintf(w, "; since then %d added, %d modified, %d deleted\n",
				rep.Changes["added"], rep.Changes["modified"], rep.Changes["deleted"])
		}
	}
	if m := rep.ConflictedMerge; m != nil {
		fmt.Fprintf(w, "conflicted merge: op %d %s left conflict markers; resolve them, then art snapshot\n", m.ID, termtext.Quoted(m.Description))
	}
	if len(rep.Sessions) == 0 {
		fmt.Fprintln(w, "no session running on this store")
	}
	for _, s := range rep.Sessions {
		fmt.Fprintf(w, "session: pid %d on branch %s since %s (%s)\n", s.PID, termtext.Quote(s.Branch),
			s.Since.Local().Format("2006-01-02 15:04:05"), fmtAge(time.Since(s.Since)))
	}
	u := &rep.Usage
	fmt.Fprintf(w, "store %s: %s on disk", termtext.Quote(rep.Store), fmtBytes(u.FileBytes+u.WALBytes+u.PacksBytes))
	if u.PacksBytes > 0 {
		fmt.Fprintf(w, " (packs %s)", fmtBytes(u.PacksBytes))
	}
	if u.WALBytes > 0 {
		fmt.Fprintf(w, " (WAL %s)", fmtBytes(u.WALBytes))
	}
	if u.FreeBytes > 0 {
		fmt.Fprintf(w, ", %s of it free pages", fmtBytes(u.FreeBytes))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  content     %s in %s chunks (%s before compression), %s in %s file manifests\n",
		fmtBytes(u.Chunks.Stored), fmtCount(u.Chunks.Count), fmtBytes(u.Chunks.Size), fmtBytes(u.Manifests.Stored), fmtCount(u.Manifests.Count))
	fmt.Fprintf(w, "  trees       %s in %s trees\n", fmtBytes(u.Trees.Stored), fmtCount(u.Trees.Count))
	fmt.Fprintf(w, "  journal     %s in %s events, %s snapshots, %s ops\n",
		fmtBytes(u.Events.Bytes), fmtCount(u.Events.Rows), fmtCount(u.Snapshots), fmtCount(u.Ops))
	fmt.Fprintf(w, "  projection  %s in %s rows (the branches' live trees)\n", fmtBytes(u.Projection.Bytes), fmtCount(u.Projection.Rows))
	fmt.Fprintf(w, "  import      %s in %s records of captured host paths\n", fmtBytes(u.ImportCache.Bytes), fmtCount(u.ImportCache.Rows))
	if g := rep.GC; g != nil {
		fmt.Fprintf(w, "art gc would reclaim %s in %s objects", fmtBytes(g.RemovedBytes), fmtCount(g.Removed))
		if g.OrphanPackBytes > 0 {
			fmt.Fprintf(w, " and %s of pack bytes no object names (a failed or killed writer's)", fmtBytes(g.OrphanPackBytes))
		}
		if g.Protected > 0 {
			fmt.Fprintf(w, " (and %s in %s unreferenced objects younger than the 1h grace period)", fmtBytes(g.ProtectedBytes), fmtCount(g.Protected))
		}
		fmt.Fprintln(w)
	}
}

// conflictedMerge returns branch's newest op when it is a merge recorded
// as conflicted (exit status 1), nil otherwise.
func conflictedMerge(c *cli.Context, db *journal.DB, branch string) (*journal.OpInfo, error) {
	ops, err := db.Ops(c.Context, journal.LogQuery{Branch: branch, Limit: 1})
	if err != nil || len(ops) == 0 {
		return nil, err
	}
	if o := ops[0]; o.Kind == "merge" && o.Status != nil && *o.Status != 0 {
		return &o, nil
	}
	return nil, nil
}

// fmtAge prints a duration for people, to the unit that matters.
func fmtAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// fmtCount prints a count with thousands separators.
func fmtCount(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
