package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/session"
)

// namedInSummary bounds the paths a failed run's summary names; the rest
// are counted.
const namedInSummary = 10

// reportFailedRun prints the summary of a run whose store could not keep
// what the sandbox wrote (docs/architecture.md, "Commit failure"): why,
// the paths not kept and the changes refused (the first few of each,
// quoted, and a count), and what was recorded. It always prints, --quiet
// or not: the user must learn that writes were lost. The run's status is
// a failure (1).
func reportFailedRun(e *env, res session.Result, f *session.FailedError, err error) error {
	w := e.stderr
	fmt.Fprintf(w, "art: the store could not keep everything the sandbox wrote: %s\n", termtext.Text(f.Err.Error()))
	if n := len(f.NotKept) + f.MoreNotKept; n > 0 {
		fmt.Fprintf(w, "art: not kept (%d %s): %s\n", n, plural(n, "path", "paths"), namePaths(f.NotKept, n))
	} else {
		fmt.Fprintf(w, "art: not kept: nothing the sandbox was told had succeeded\n")
	}
	if f.Refused > 0 {
		fmt.Fprintf(w, "art: refused after the failure (%d %s): %s\n", f.Refused, plural(int(f.Refused), "change", "changes"),
			namePaths(f.RefusedPaths, int(f.Refused)))
	}
	if other := otherErrors(err, f); other != "" {
		fmt.Fprintf(w, "art: %s\n", termtext.Text(other))
	}
	what := "the run is recorded as failed"
	if f.Unrecorded != nil {
		what = "the failure could not be recorded (art log shows the run as interrupted): " + termtext.Text(f.Unrecorded.Error())
	} else if !res.Snapshot.ID.IsZero() {
		what += fmt.Sprintf("; snapshot %s on branch %s holds what the store kept", res.Snapshot.ID.Short(), res.Branch)
	}
	fmt.Fprintf(w, "art: %s in %s; %s\n", session.DescribeExit(res.Result), res.Wall.Round(time.Millisecond), what)
	return &silentExit{exitFailure}
}

// namePaths lists the first namedInSummary of paths (in the mount,
// /home/agent-relative), quoted for the terminal, and how many of total
// it leaves out.
func namePaths(paths []string, total int) string {
	var b strings.Builder
	shown := 0
	for _, p := range paths {
		if shown == namedInSummary {
			break
		}
		if shown > 0 {
			b.WriteString(", ")
		}
		b.WriteString(termtext.Quote(p))
		shown++
	}
	if total > shown {
		fmt.Fprintf(&b, " and %d more", total-shown)
	}
	return b.String()
}

// otherErrors is the text of err's parts other than f (a failure of the
// command's supervision joined to it), "" if none.
func otherErrors(err error, f *session.FailedError) string {
	u, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return ""
	}
	var out []string
	for _, e := range u.Unwrap() {
		if e != error(f) {
			out = append(out, e.Error())
		}
	}
	return strings.Join(out, "; ")
}
