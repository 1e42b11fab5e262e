package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"github.com/urfave/cli/v2"
)

// newLogCommand is art log. It is longer than the guideline because the
// command is one cli.Command literal: its flag table, and an Action that
// checks which view the flags chose and hands each to its own function,
// the events listing (interleaved with forgotten stretches) written inline.
func newLogCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "log",
		Usage:     "show the operation log (imports, runs, snapshots, checkouts) or the journal's events",
		UsageText: "art log -d FILE [--branch B | --all] [--graph [--html FILE] | --events | --execs | --syscalls | --net] [--path P] [-n N] [--json] [--no-pager] [--color WHEN]",
		Flags: append([]cli.Flag{
			dbFlag(),
			branchFlag("branch to show"),
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every branch"},
			&cli.BoolFlag{Name: "events", Aliases: []string{"e"}, Usage: "list journal events instead of operations"},
			&cli.BoolFlag{Name: "net", Usage: "list network decisions (--net allow runs): host, port, allow or deny, the rule"},
			&cli.StringFlag{Name: "path", Aliases: []string{"p"}, Usage: "only events touching `P` (relative to /home/agent, e.g. ws/main.py) or below it; implies --events"},
			&cli.BoolFlag{Name: "execs", Usage: "the commands each session ran, as a process tree (from the tracer, or named from /proc)"},
			&cli.BoolFlag{Name: "syscalls", Usage: "the system calls the tracer recorded (art run --trace)"},
			&cli.BoolFlag{Name: "graph", Usage: "the history as a graph, one line per operation and branches as columns: forks, merges, checkouts and undos (with --all every branch, deleted ones too; --json gives each op's parents)"},
			&cli.StringFlag{Name: "html", Usage: "with --graph: write the graph as a self-contained HTML page to `FILE` (no scripts, no network assets)"},
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Usage: "show at most `N` entries"},
			jsonFlag(),
		}, pagerFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("log takes no arguments")
			}
			graph := c.Bool("graph") || c.IsSet("html")
			if graph && (c.Bool("events") || c.IsSet("path") || c.Bool("net") || c.Bool("execs") || c.Bool("syscalls")) {
				return usagef("--graph shows operations: it does not go with --events, --path, --net, --execs or --syscalls")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			if c.IsSet("html") {
				return logGraphHTML(c, e, db)
			}
			color, done, err := humanOutput(c, e)
			if err != nil {
				return err
			}
			defer done()
			branch := branchScope(c)
			switch {
			case graph:
				return logGraph(c, e, db, color)
			case c.Bool("net"):
				return logNet(c, e, db, branch)
			case c.Bool("execs"):
				return logExecs(c.Context, db, branch, c.Bool("json"), e.stdout)
			case c.Bool("syscalls"):
				return logSyscalls(c.Context, db, branch, c.Bool("json"), e.stdout)
			}
			if c.Bool("events") || c.IsSet("path") {
				q := journal.EventQuery{Branch: branch, Limit: c.Int("limit")}
				if c.IsSet("path") {
					q.Path = []byte(guestPath(c.String("path")))
				}
				evs, err := db.Events(c.Context, q)
				if err != nil {
					return err
				}
				attr, err := db.LoadAttribution(c.Context, branch)
				if err != nil {
					return err
				}
				gone, err := db.Forgotten(c.Context, branch)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					if len(gone) > 0 {
						fmt.Fprintf(e.stderr, "art: %d stretch(es) of history were forgotten (art forget); their events are not listed\n", len(gone))
					}
					out := make([]eventJSON, len(evs))
					for i := range evs {
						out[i] = toEventJSON(&evs[i])
						if v, ok := attr.Command(&evs[i]); ok && journal.IsChange(evs[i].Kind) {
							out[i].Argv = v.Argv
						}
					}
					return writeJSON(e.stdout, out)
				}
				// Where events were forgotten, say so in their place.
				mark := func(upTo int64) {
					for len(gone) > 0 && gone[0].FromSeq < upTo {
						fmt.Fprintf(e.stdout, "%s\n", paint(color, sgrYellow, fmt.Sprintf("-- %s: %s --", termtext.Quote(gone[0].Branch), gone[0])))
						gone = gone[1:]
					}
				}
				for i := range evs {
					mark(evs[i].Seq)
					line := formatEvent(&evs[i], db.BranchName(c.Context, evs[i].Branch))
					if v, ok := attr.Command(&evs[i]); ok && journal.IsChange(evs[i].Kind) {
						line += fmt.Sprintf("  <- pid %d %s", evs[i].PID, termtext.Argv(v.Argv))
					}
					fmt.Fprintln(e.stdout, line)
				}
				if c.Int("limit") == 0 {
					mark(math.MaxInt64)
				}
				return nil
			}
			ops, err := db.Ops(c.Context, journal.LogQuery{Branch: branch, Limit: c.Int("limit")})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if ops == nil {
					ops = []journal.OpInfo{}
				}
				return writeJSON(e.stdout, ops)
			}
			for _, o := range ops {
				fmt.Fprintln(e.stdout, opLine(color, &o))
				for _, s := range o.Snapshots {
					fmt.Fprintf(e.stdout, "        snapshot %s  @%d  %s\n", paint(color, sgrYellow, s.ID.Short()), s.Seq, termtext.Text(s.Message))
				}
			}
			return nil
		},
	}
}

// opLine is an op's line in art log: id, start, branch, kind,
// description and what became of it.
func opLine(color bool, o *journal.OpInfo) string {
	return fmt.Sprintf("%s %s  %-8s %-9s %s%s", paint(color, sgrBold, fmt.Sprintf("op %-4d", o.ID)),
		fmtTime(o.Start), termtext.Quote(o.Branch), termtext.Text(o.Kind), termtext.Text(o.Description), opStatus(color, o))
}

// opStatus is what became of an op, when that is worth a word: its exit
// status, a failure, an interruption, forgotten events.
func opStatus(color bool, o *journal.OpInfo) string {
	status := ""
	if o.Status != nil && *o.Status != 0 {
		status = "  " + paint(color, sgrRed, fmt.Sprintf("[exit %d]", *o.Status))
		if *o.Status == workspace.InterruptedStatus && (o.Kind == "import" || o.Kind == "export") {
			status = "  " + paint(color, sgrRed, "[interrupted]") // a signal stopped art push/pull -m
		}
		if o.Kind == "merge" {
			status = "  " + paint(color, sgrRed, "[conflicted]") // art merge --conflict=markers left markers
		}
	}
	if o.Failed != "" { // the store could not keep the run's changes
		status = "  " + paint(color, sgrRed, "[failed: "+termtext.Text(o.Failed)+"]")
	}
	if o.EndSeq == 0 {
		status = "  " + paint(color, sgrYellow, "[running or interrupted]")
	} else if o.Events == 0 && o.EndSeq > o.BeforeSeq {
		status += "  " + paint(color, sgrYellow, "[events forgotten]")
	}
	return status
}

// eventJSON is the stable JSON form of an event: paths as strings (invalid
// UTF-8 escaped by encoding/json), ids as hex.
type eventJSON struct {
	journal.Event
	Path  string `json:"path,omitempty"`
	Path2 string `json:"path2,omitempty"`
	// Argv names the command that made a change (exec events by pid).
	Argv []string `json:"argv,omitempty"`
}

func toEventJSON(ev *journal.Event) eventJSON {
	return eventJSON{Event: *ev, Path: string(ev.Path), Path2: string(ev.Path2)}
}

func formatEvent(ev *journal.Event, branch string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%-6d %s  %-8s %-11s", ev.Seq, fmtTime(ev.Time), termtext.Quote(branch), ev.Kind)
	switch ev.Kind {
	case journal.EvBranch, journal.EvCheckout:
		fmt.Fprintf(&b, " root %s  %s", ev.Root.Short(), termtext.Text(ev.Text))
	case journal.EvSnapshot:
		fmt.Fprintf(&b, " %s  %s", ev.Hash.Short(), termtext.Text(ev.Text))
	case journal.EvMerge: // the state merged in: its seq and root
		fmt.Fprintf(&b, " from @%d root %s  %s", ev.FromSeq, ev.Root.Short(), termtext.Text(ev.Text))
	case journal.EvRename, journal.EvLink:
		fmt.Fprintf(&b, " %s -> %s", agentPath(ev.Path), agentPath(ev.Path2))
	case journal.EvWrite:
		fmt.Fprintf(&b, " %s (%d bytes)", agentPath(ev.Path), ev.Attr.Size)
	case journal.EvCreate:
		fmt.Fprintf(&b, " %s (%d bytes, mode %04o)", agentPath(ev.Path), ev.Attr.Size, ev.Attr.Mode)
	case journal.EvSymlink:
		fmt.Fprintf(&b, " %s -> %s", agentPath(ev.Path), termtext.Quoted(string(ev.Attr.Link)))
	case journal.EvSetxattr, journal.EvRemovexattr:
		fmt.Fprintf(&b, " %s %s", agentPath(ev.Path), termtext.Quote(ev.Name))
	case journal.EvExec: // Text is the argv, NUL-separated
		fmt.Fprintf(&b, " %s", termtext.Argv(strings.Split(ev.Text, "\x00")))
	case journal.EvBegin, journal.EvEnd, journal.EvSyscall:
		fmt.Fprintf(&b, " %s", termtext.Text(ev.Text))
	default:
		fmt.Fprintf(&b, " %s", agentPath(ev.Path))
	}
	return strings.TrimRight(b.String(), " ")
}

// agentPath shows a journal path as /home/agent-relative text (/ws/f),
// quoted for the terminal (termtext.Quote: "/ws/evil\033]0;x\a").
func agentPath(p []byte) string {
	return termtext.Quote("/" + string(p))
}

// logNet lists the network decisions recorded on branch ("" = all).
func logNet(c *cli.Context, e *env, db *journal.DB, branch string) error {
	evs, err := db.Events(c.Context, journal.EventQuery{Branch: branch, Kind: journal.EvNet, Limit: c.Int("limit")})
	if err != nil {
		return err
	}
	out := make([]netLogJSON, 0, len(evs))
	for i := range evs {
		a, err := attemptOf(&evs[i])
		if err != nil {
			return err
		}
		out = append(out, netLogJSON{Seq: evs[i].Seq, Branch: db.BranchName(c.Context, evs[i].Branch), Op: evs[i].Op, Attempt: a})
	}
	if c.Bool("json") {
		return writeJSON(e.stdout, out)
	}
	for i := range out {
		fmt.Fprintln(e.stdout, formatNet(&evs[i], out[i].Branch, out[i].Attempt))
	}
	return nil
}
