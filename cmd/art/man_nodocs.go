//go:build urfave_cli_no_docs

package main

import "github.com/urfave/cli/v2"

// newManCommand is the hidden art man of a build without urfave/cli's
// documentation generator (see man.go): it says where the page comes from.
func newManCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "man",
		Hidden:    true,
		Usage:     "print the man page art(1) in roff (make man writes it to man/art.1)",
		UsageText: "art man > art.1",
		Action: func(c *cli.Context) error {
			return usagef("this art was built without its man page generator (tag urfave_cli_no_docs): make man writes man/art.1")
		},
	}
}
