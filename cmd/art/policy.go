package main

import (
	"fmt"
	"strings"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/urfave/cli/v2"
)

func newPolicyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "policy",
		Usage:     "network policy tools: suggest an allow-list from what a run tried to reach",
		UsageText: "art policy suggest -d FILE [--branch B | --all] [--session OP] [--json]",
		Subcommands: []*cli.Command{{
			Name:      "suggest",
			Usage:     "propose a --net allow list from the network decisions a store recorded",
			UsageText: "art policy suggest -d FILE [--branch B | --all] [--session OP] [--json]",
			Flags: []cli.Flag{
				dbFlag(),
				branchFlag("branch whose runs to read"),
				&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every branch"},
				&cli.Int64Flag{Name: "session", Usage: "only the run that is operation `OP` (art log shows op numbers)"},
				jsonFlag(),
			},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return usagef("policy suggest takes no arguments")
				}
				db, err := openStoreRead(c)
				if err != nil {
					return err
				}
				defer db.Close()
				q := journal.EventQuery{Branch: c.String("branch"), Kind: journal.EvNet, Op: c.Int64("session")}
				if c.Bool("all") || c.IsSet("session") && !c.IsSet("branch") {
					q.Branch = ""
				}
				evs, err := db.Events(c.Context, q)
				if err != nil {
					return err
				}
				attempts := make([]netpolicy.Attempt, 0, len(evs))
				for i := range evs {
					a, err := attemptOf(&evs[i])
					if err != nil {
						return err
					}
					attempts = append(attempts, a)
				}
				s := netpolicy.Suggest(attempts)
				if c.Bool("json") {
					return writeJSON(e.stdout, struct {
						netpolicy.Suggestion
						Config configFile `json:"config"`
					}{s, configFile{s.Config()}})
				}
				printSuggestion(e, s, len(attempts))
				return nil
			},
		}},
	}
}

// printSuggestion writes the proposal as flags, grouped by domain, then
// as a config file.
func printSuggestion(e *env, s netpolicy.Suggestion, n int) {
	w := e.stdout
	if n == 0 {
		fmt.Fprintln(w, "# no network decisions recorded (runs with --net allow record them)")
		return
	}
	fmt.Fprintf(w, "# %d targets from %d connection attempts\n", len(s.Allow), n)
	domain := ""
	for _, a := range s.Allow {
		if a.Domain != domain {
			domain = a.Domain
			fmt.Fprintf(w, "# %s\n", termtext.Text(domain))
		}
		note := fmt.Sprintf("%d allowed", a.Allowed)
		if a.Denied > 0 {
			note = fmt.Sprintf("%d denied: %s", a.Denied, termtext.Text(a.Reason))
			if a.Allowed > 0 {
				note = fmt.Sprintf("%d allowed, %s", a.Allowed, note)
			}
		}
		fmt.Fprintf(w, "--allow %-40s # %s\n", termtext.Word(a.Entry), note)
	}
	for _, wc := range s.Wildcards {
		fmt.Fprintf(w, "# or, for %s: --allow %s\n", termtext.Text(strings.Join(wc.Names, ", ")), termtext.Word(wc.Entry))
	}
	if len(s.KeptDenied) > 0 {
		fmt.Fprintln(w, "# refused by a --deny rule, not proposed:")
		for _, a := range s.KeptDenied {
			fmt.Fprintf(w, "#   %s (%d attempts)\n", termtext.Word(a.Entry), a.Attempts)
		}
	}
	fmt.Fprintln(w, "\n# the same as ~/.config/art/config.json:")
	writeJSON(w, configFile{s.Config()})
}

// configFile is the shape of ~/.config/art/config.json (the parts this
// verb writes).
type configFile struct {
	Net netpolicy.Config `json:"net"`
}
