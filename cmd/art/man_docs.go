//go:build !urfave_cli_no_docs

package main

import "github.com/urfave/cli/v2"

// manPage renders the man page with urfave/cli's generator (see man.go).
func manPage(app *cli.App) (string, error) { return app.ToManWithSection(1) }
