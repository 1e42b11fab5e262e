// Command art runs AI coding agents in a sandbox and keeps a full,
// rewindable history of everything they did. See README.md.
package main

import (
	"context"
	"os"
)

func main() {
	ctx, stop := notifySignals(context.Background())
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
