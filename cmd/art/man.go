package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The man page is generated from the CLI's own definitions by urfave/cli,
// which renders it through a markdown library whose package
// initialisation (tables, regular expressions: ~0.2 MB of heap) every art
// process would pay. The art that make build ships is built with the tag
// urfave_cli_no_docs, which leaves that out (manPage in man_nodocs.go
// refuses); make man runs a build without the tag (man_docs.go).

func newManCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "man",
		Hidden:    true,
		Usage:     "print the man page art(1) in roff (make man writes it to man/art.1)",
		UsageText: "art man > art.1",
		Action: func(c *cli.Context) error {
			page, err := manPage(c.App)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, page)
			return err
		},
	}
}
