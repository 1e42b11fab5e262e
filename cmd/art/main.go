// Command art runs AI coding agents in a sandbox and keeps a full,
// rewindable history of everything they did. See README.md.
package main

import (
	"context"
	"os"

	"github.com/artrt/art/internal/phase"
)

func main() {
	ctx, stop := notifySignals(context.Background())
	end := phase.Start("art (main to exit)")
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	end()
	phase.Report(os.Stderr)
	os.Exit(code)
}
