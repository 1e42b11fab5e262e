// Command art runs AI coding agents in a sandbox and keeps a full,
// rewindable history of everything they did. See README.md.
package main

import (
	"context"
	"os"

	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/sandbox"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == sandbox.StubArg {
		// A ready sandbox's stub (warm daemons start them): nothing of
		// art's own runs, it execs the command it is handed.
		sandbox.RunStub()
	}
	ctx, stop := notifySignals(context.Background())
	end := phase.Start("art (main to exit)")
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	end()
	phase.Report(os.Stderr)
	os.Exit(code)
}
