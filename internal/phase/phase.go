// Package phase times the steps of one art process - a session's
// set-up and tear-down - for people measuring start-up. It is off unless
// the environment variable ART_PHASES is set to anything but "" or "0": then
// Report prints, on stderr, how long each named step took and when it
// began since the process started, so that "where do the milliseconds of
// art run -- true go" has an answer without a profiler. Off, every call is
// a load and a branch.
//
// Steps may overlap (one runs on another goroutine); each is reported
// with its own start and length.
package phase

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

var (
	on    = os.Getenv("ART_PHASES") != "" && os.Getenv("ART_PHASES") != "0"
	start = time.Now() // close to the process's start: Go runs this before main

	mu    sync.Mutex
	steps []step
	notes []string
)

type step struct {
	name       string
	begin, end time.Time
}

// On reports whether steps are being timed.
func On() bool { return on }

// Start begins timing a step named name; the returned function ends it.
// Safe from any goroutine.
func Start(name string) (end func()) {
	if !on {
		return func() {}
	}
	b := time.Now()
	return func() {
		e := time.Now()
		mu.Lock()
		steps = append(steps, step{name, b, e})
		mu.Unlock()
	}
}

// Note adds a line of counters (what a step did: the overlay's opens,
// copies, store reads) to the report; nothing when off.
func Note(format string, args ...any) {
	if !on {
		return
	}
	mu.Lock()
	notes = append(notes, fmt.Sprintf(format, args...))
	mu.Unlock()
}

// Report writes the steps timed so far, in the order they began, and the
// time since the process started, to w; nothing when off.
func Report(w io.Writer) {
	if !on {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	ss := append([]step(nil), steps...)
	for i := 1; i < len(ss); i++ { // few steps: insertion sort by begin
		for j := i; j > 0 && ss[j].begin.Before(ss[j-1].begin); j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.2f", float64(d.Microseconds())/1000) }
	fmt.Fprintf(w, "art: phases (ms):   at  length  step\n")
	for _, s := range ss {
		fmt.Fprintf(w, "art: phases: %s %s  %s\n", ms(s.begin.Sub(start)), ms(s.end.Sub(s.begin)), s.name)
	}
	fmt.Fprintf(w, "art: phases: %s          total since the process started\n", ms(time.Since(start)))
	for _, n := range notes {
		fmt.Fprintf(w, "art: phases: note: %s\n", n)
	}
}
