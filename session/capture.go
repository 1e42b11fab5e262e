package session

import (
	"context"
	"fmt"
	"io"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/internal/units"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// Progress is told the capture's running totals, and once more with done
// set when the capture is over (a progress bar clears its line then).
type Progress func(st workspace.ImportStats, done bool)

// Capture brings the host workspace dir into branch of db - an
// incremental push of what changed on the host since the branch's last
// capture - and ends with a snapshot named message, unless it changed
// nothing in the branch and the branch's head is a snapshot already: then
// it records no op and no snapshot (NothingChanged; Snapshot is the
// head's), so that art log and main~1 keep meaning "before the previous
// run". Every session starts with one (Open), and art mount -m before it
// serves the branch. Skipped special files are reported to warn.
func Capture(ctx context.Context, db *journal.DB, dir, branch, message string, warn io.Writer, progress Progress) (workspace.ImportStats, error) {
	// Checked read-only first: an import that finds nothing changed still
	// begins an op, commits its batch and discards the op - three write
	// transactions, ~1 ms of every session's start on a small workspace.
	// Unchanged proves it only where every entry's record does (none
	// racy: those the import reads again and rewrites); otherwise, or on
	// any error, the import decides everything again.
	// When it finds a change, the import takes the host listings it
	// read (workspace.CaptureChecked) rather than walking the tree again.
	opts := workspace.ImportOptions{Dir: dir, Branch: branch, Warn: warn, Message: message, Capture: true, SkipUnchanged: true}
	if progress != nil {
		opts.Progress = func(st workspace.ImportStats) { progress(st, false) }
	}
	st, same, err := workspace.CaptureChecked(ctx, db, opts)
	if progress != nil {
		progress(workspace.ImportStats{}, true)
	}
	if same {
		return st, nil
	}
	if err == nil && st.First && warn != nil {
		// Say what was taken: -m defaults to the current directory.
		fmt.Fprint(warn, FirstCaptureLine(dir, st))
	}
	return st, err
}

// FirstCaptureLine says that an import read the whole workspace dir (st
// is its stats), and why when the branch's records were of another host
// directory of that name.
func FirstCaptureLine(dir string, st workspace.ImportStats) string {
	why := ""
	if st.OtherDir {
		why = " (the branch's import records were of another directory of this name)"
	}
	return fmt.Sprintf("art: first capture of %s%s: %s, %s\n", termtext.Quote(dir), why, FilesCount(st.Files), units.FormatSize(st.BytesRead))
}

// FilesCount is "1 file" or "N files".
func FilesCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
