package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/internal/units"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

// newForgetCommand is art forget. It is longer than the guideline because
// the command is one cli.Command literal whose help text and flag table
// (one line per --keep rule) take half of it; the Action is short.
func newForgetCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "forget",
		Usage: "drop snapshots a retention policy does not keep, and the history only they need",
		UsageText: "art forget -d FILE (-b BRANCH... | --all) [--keep-last N] [--keep-within DURATION]\n" +
			"   [--keep-hourly N] [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--keep-snapshot REV...]\n" +
			"   [--dry-run] [--prune [--grace DURATION]] [--json]",
		Description: `A snapshot any --keep rule selects stays, with the events that led to it since
the previous snapshot (so @SEQ, blame and log stay exact there). The others go,
with their events; where a kept stretch of history follows, the dropped
snapshot's event stays as the root it replays from. The branch head, the work
after its last snapshot and everything since a running operation began always
stay. Naming a forgotten snapshot, @SEQ or REV~N afterwards says when and by
which op it was forgotten; art log shows the forget op (who, what policy).

Forget only drops history; the content only it referenced is removed by
art gc (or --prune here). Forgetting cannot be undone.

Rules count back from the newest snapshot, in local time: --keep-daily 7 keeps
the newest snapshot of each of the last 7 days that have one. DURATION is a Go
duration (90m, 36h) or a number of days or weeks (7d, 2w).`,
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringSliceFlag{Name: "branch", Aliases: []string{"b"}, Usage: "apply the policy to `BRANCH` (repeatable)"},
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "apply the policy to every branch"},
			&cli.IntFlag{Name: "keep-last", Usage: "keep the newest `N` snapshots"},
			&cli.StringFlag{Name: "keep-within", Usage: "keep snapshots taken within `DURATION` of now"},
			&cli.IntFlag{Name: "keep-hourly", Usage: "keep the newest snapshot of each of the last `N` hours that have one"},
			&cli.IntFlag{Name: "keep-daily", Usage: "keep the newest snapshot of each of the last `N` days that have one"},
			&cli.IntFlag{Name: "keep-weekly", Usage: "keep the newest snapshot of each of the last `N` ISO weeks that have one"},
			&cli.IntFlag{Name: "keep-monthly", Usage: "keep the newest snapshot of each of the last `N` months that have one"},
			&cli.StringSliceFlag{Name: "keep-snapshot", Usage: "keep the snapshot `REV` (repeatable)"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "list what would be kept and forgotten; change nothing"},
			&cli.BoolFlag{Name: "prune", Usage: "run art gc afterwards to give the space back"},
			&cli.DurationFlag{Name: "grace", Value: time.Hour, Usage: "with --prune: gc's --grace `DURATION`"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("forget takes no arguments (branches with -b BRANCH, or --all)")
			}
			branches := c.StringSlice("branch")
			if c.Bool("all") == (len(branches) > 0) {
				return usagef("forget needs -b BRANCH (repeatable) or --all, not both")
			}
			pol, err := retentionFlags(c)
			if err != nil {
				return err
			}
			db, err := openStore(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			for _, rev := range c.StringSlice("keep-snapshot") {
				st, err := db.Resolve(c.Context, rev, "")
				if err != nil {
					return fmt.Errorf("--keep-snapshot %s: %w", termtext.Quote(rev), err)
				}
				if st.Snapshot.IsZero() {
					return usagef("--keep-snapshot %s: names %s, not a snapshot", termtext.Quote(rev), describe(st))
				}
				pol.Snapshots = append(pol.Snapshots, st.Snapshot)
			}
			if pol.Empty() {
				return usagef("forget needs at least one --keep rule (it would keep no snapshot)")
			}
			rep, err := db.Forget(c.Context, journal.ForgetOptions{Branches: branches, All: c.Bool("all"), Policy: pol,
				DryRun: c.Bool("dry-run"), Who: who()})
			if err != nil {
				return err
			}
			var gc *journal.GCReport
			if c.Bool("prune") && !rep.DryRun {
				bar := newProgress(e.stderr)
				gc, err = db.GC(c.Context, journal.GCOptions{Grace: c.Duration("grace"), Progress: func(phase string, done, total int) {
					bar.update("gc: %s %d objects", phase, done)
				}})
				bar.done()
				if err != nil {
					return err
				}
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, struct {
					*journal.ForgetReport
					GC *journal.GCReport `json:"gc,omitempty"`
				}{rep, gc})
			}
			printForget(e, rep)
			if gc != nil {
				fmt.Fprintf(e.stdout, "gc: removed %d objects (%s stored); store file %s -> %s\n",
					gc.Removed, fmtBytes(gc.RemovedBytes), fmtBytes(gc.FileBefore), fmtBytes(gc.FileAfter))
				if gc.Protected > 0 {
					// What was forgotten was mostly written recently: without
					// this line a prune that frees nothing looks broken.
					fmt.Fprintf(e.stdout, "gc: kept %d unreferenced objects (%s) written within the grace period (%s); --grace 0 frees them now, safe when nothing else writes the store\n",
						gc.Protected, fmtBytes(gc.ProtectedBytes), shortDuration(c.Duration("grace")))
				}
			} else if !rep.DryRun {
				fmt.Fprintln(e.stdout, "run art gc to give the space back")
			}
			return nil
		},
	}
}

func printForget(e *env, rep *journal.ForgetReport) {
	verb := "forgot"
	if rep.DryRun {
		verb = "would forget"
	}
	for _, b := range rep.Branches {
		fmt.Fprintf(e.stdout, "%s: keep %d, %s %d snapshots and %d events", termtext.Quote(b.Branch), len(b.Keep), verb, len(b.Forget), b.Events)
		if b.Op != 0 {
			fmt.Fprintf(e.stdout, " (op %d)", b.Op)
		}
		fmt.Fprintln(e.stdout)
		if b.Protected != "" {
			fmt.Fprintf(e.stdout, "  %s\n", termtext.Text(b.Protected))
		}
		for _, s := range b.Keep {
			fmt.Fprintf(e.stdout, "  keep   %s  %s  %-30s (%s)\n", s.ID.Short(), fmtTime(s.Time), quoteMsg(s.Message), strings.Join(s.Reasons, ", "))
		}
		for _, s := range b.Forget {
			fmt.Fprintf(e.stdout, "  forget %s  %s  %s\n", s.ID.Short(), fmtTime(s.Time), quoteMsg(s.Message))
		}
	}
}

// quoteMsg shows a snapshot message in quotes, escaped for the terminal,
// cut to about 60 bytes at a character boundary.
func quoteMsg(m string) string {
	if len(m) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut--
		}
		return termtext.Quoted(m[:cut]) + "..."
	}
	return termtext.Quoted(m)
}

// who names the user and process running a forget, for the op log.
func who() string {
	name := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return fmt.Sprintf("%s (pid %d)", name, os.Getpid())
}

// retentionFlags reads the --keep-* flags (not --keep-snapshot, which needs
// the store).
func retentionFlags(c *cli.Context) (journal.Retention, error) {
	var r journal.Retention
	for _, f := range []struct {
		name string
		into *int
	}{{"keep-last", &r.Last}, {"keep-hourly", &r.Hourly}, {"keep-daily", &r.Daily}, {"keep-weekly", &r.Weekly}, {"keep-monthly", &r.Monthly}} {
		n := c.Int(f.name)
		if n < 0 {
			return r, usagef("--%s must not be negative", f.name)
		}
		*f.into = n
	}
	if s := c.String("keep-within"); s != "" {
		d, err := units.ParseAge(s)
		if err != nil {
			return r, usagef("--keep-within %q: %v", s, err)
		}
		r.Within = d
	}
	return r, nil
}

// shortDuration prints d without zero tails: 1h, 1h30m, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
