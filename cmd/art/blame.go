package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
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
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			branch := branchScope(c)
			lines, err := blame(c.Context, db, branch, guestPath(c.Args().First()))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if lines == nil {
					lines = []blameLine{}
				}
				return writeJSON(e.stdout, lines)
			}
			for _, l := range lines {
				fmt.Fprintln(e.stdout, l.String())
			}
			return nil
		},
	}
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
type blameLine struct {
	Seq      int64    `json:"seq"`
	Time     int64    `json:"time_ns"`
	Branch   string   `json:"branch"`
	Kind     string   `json:"kind"`
	Path     string   `json:"path"`
	PID      int64    `json:"pid,omitempty"`
	Argv     []string `json:"argv,omitempty"`
	Cwd      string   `json:"cwd,omitempty"`
	Snapshot string   `json:"snapshot,omitempty"` // first snapshot holding the change
}

func (l blameLine) String() string {
	who := "(unknown process)"
	if len(l.Argv) > 0 {
		who = shellQuote(l.Argv)
	} else if l.PID != 0 {
		who = fmt.Sprintf("(pid %d, not named)", l.PID)
	}
	snap := "(no snapshot yet)"
	if l.Snapshot != "" {
		snap = "snapshot " + l.Snapshot
	}
	return fmt.Sprintf("@%-6d %s  %-8s %-9s %s  pid %-7d %s", l.Seq, fmtTime(l.Time), l.Branch, l.Kind, snap, l.PID, who)
}

// isChange reports whether an event kind changes a path.
func isChange(k journal.EventKind) bool {
	return k >= journal.EvCreate && k <= journal.EvRemovexattr
}

func blame(ctx context.Context, db *journal.DB, branch, path string) ([]blameLine, error) {
	evs, err := db.Events(ctx, journal.EventQuery{Branch: branch, Path: []byte(path)})
	if err != nil {
		return nil, err
	}
	attr, err := loadAttribution(ctx, db, branch)
	if err != nil {
		return nil, err
	}
	snaps, err := db.Snapshots(ctx, branch)
	if err != nil {
		return nil, err
	}
	var out []blameLine
	for i := range evs {
		ev := &evs[i]
		if !isChange(ev.Kind) || (string(ev.Path) != path && string(ev.Path2) != path) {
			continue
		}
		l := blameLine{Seq: ev.Seq, Time: ev.Time, Branch: db.BranchName(ctx, ev.Branch), Kind: ev.Kind.String(),
			Path: path, PID: ev.PID}
		if v, ok := attr.command(ev); ok {
			l.Argv, l.Cwd = v.Argv, v.Cwd
		}
		// Snapshots are newest first: the last one at or after the event
		// on its branch is the first to hold it.
		for _, s := range snaps {
			if s.BranchID == ev.Branch && s.Seq >= ev.Seq {
				l.Snapshot = s.ID.Short()
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// attribution maps a journal event's pid to the command that process was
// running: exec events (from the tracer, or from /proc when the overlay
// named a caller) of the same operation, by pid.
type attribution struct {
	byPid map[[2]int64][]execRef // (op, pid) -> execs in seq order
}

type execRef struct {
	seq int64
	v   session.TraceValue
}

func loadAttribution(ctx context.Context, db *journal.DB, branch string) (*attribution, error) {
	evs, err := db.Events(ctx, journal.EventQuery{Branch: branch})
	if err != nil {
		return nil, err
	}
	a := &attribution{byPid: map[[2]int64][]execRef{}}
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != journal.EvExec {
			continue
		}
		k := [2]int64{ev.Op, ev.PID}
		a.byPid[k] = append(a.byPid[k], execRef{seq: ev.Seq, v: session.DecodeTraceValue(ev)})
	}
	return a, nil
}

// command returns the exec record naming ev's process: the latest exec of
// that pid before the event, else the first after it (tracer records
// reach the journal in batches, up to a flush interval after the changes
// they explain).
func (a *attribution) command(ev *journal.Event) (session.TraceValue, bool) {
	if ev.PID == 0 {
		return session.TraceValue{}, false
	}
	refs := a.byPid[[2]int64{ev.Op, ev.PID}]
	if len(refs) == 0 {
		return session.TraceValue{}, false
	}
	i := sort.Search(len(refs), func(i int) bool { return refs[i].seq > ev.Seq })
	if i > 0 {
		return refs[i-1].v, true
	}
	return refs[0].v, true
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./=:,+@%^-]+$`)

// shellQuote renders argv as a shell command line: sh -c 'echo x > f'.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if shellSafe.MatchString(a) {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
