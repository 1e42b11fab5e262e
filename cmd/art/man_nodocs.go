//go:build urfave_cli_no_docs

package main

import "github.com/urfave/cli/v2"

// manPage of a build without urfave/cli's documentation generator (see
// man.go) says where the page comes from.
func manPage(*cli.App) (string, error) {
	return "", usagef("this art was built without its man page generator (tag urfave_cli_no_docs): make man writes man/art.1")
}
