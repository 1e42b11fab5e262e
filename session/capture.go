package session

import (
	"context"
	"io"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// Progress is told the capture's running totals, and once more with done
// set when the capture is over (a progress bar clears its line then).
type Progress func(st workspace.ImportStats, done bool)

// Capture brings the host workspace dir into branch of db - an
// incremental push of what changed on the host since the branch's last
// capture - and ends with a snapshot named message. Every session starts
// with one (Open), and art mount -m before it serves the branch. Skipped
// special files are reported to warn.
func Capture(ctx context.Context, db *journal.DB, dir, branch, message string, warn io.Writer, progress Progress) (workspace.ImportStats, error) {
	opts := workspace.ImportOptions{Dir: dir, Branch: branch, Warn: warn, Message: message, Capture: true}
	if progress != nil {
		opts.Progress = func(st workspace.ImportStats) { progress(st, false) }
		defer progress(workspace.ImportStats{}, true)
	}
	return workspace.Import(ctx, db, opts)
}
