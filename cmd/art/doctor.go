package main

import (
	"fmt"

	"github.com/artrt/art/hostcheck"
	"github.com/urfave/cli/v2"
)

func newDoctorCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "doctor",
		Usage:     "check what this host offers the sandbox and the overlay, and what each missing piece disables",
		UsageText: "art doctor [--json]",
		Description: `Probes bwrap, user namespaces, FUSE (and, for a non-root user, fusermount3 and
user_allow_other), FUSE passthrough, cgroup delegation, seccomp, Landlock and ptrace.
Exits 1 when something every sandboxed run needs is missing, else 0.`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("art doctor takes no arguments")
			}
			checks := hostcheck.Run(c.Context)
			healthy := hostcheck.Healthy(checks)
			if c.Bool("json") {
				if err := writeJSON(e.stdout, struct {
					Healthy bool              `json:"healthy"`
					Checks  []hostcheck.Check `json:"checks"`
				}{healthy, checks}); err != nil {
					return err
				}
			} else {
				for _, ch := range checks {
					fmt.Fprintf(e.stdout, "%-17s %-8s %s\n", ch.Name, ch.Status, ch.Detail)
					if ch.Status != hostcheck.OK {
						if ch.Disables != "" {
							fmt.Fprintf(e.stdout, "%-17s %-8s without it: %s\n", "", "", ch.Disables)
						}
						if ch.Fix != "" {
							fmt.Fprintf(e.stdout, "%-17s %-8s fix: %s\n", "", "", ch.Fix)
						}
					}
				}
			}
			if !healthy {
				return &silentExit{code: exitFailure}
			}
			return nil
		},
	}
}
