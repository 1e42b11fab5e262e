package overlay

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// FUSE request counts for measurement: with ART_FUSE_COUNTS=FILE in the
// environment a mount counts the requests it serves, by opcode, and
// appends them to FILE at unmount, a line each ("LOOKUP 17150", then the
// first such request as go-fuse printed it). It rides
// on go-fuse's debug log (each request is formatted, so the mount is
// slower): use it for counts, not timings. Round trips per user-level
// operation are what the metadata path's speed is made of (docs/benchmarks.md).
// SIGUSR1 to the daemon appends the counts so far and starts a new tally,
// so one session splits into its runs (a no-op build after a cold one in
// the same session, whose files the session wrote, has no other way to be
// counted alone).

// opCounter counts go-fuse's debug lines "rx N: OPCODE ...".
type opCounter struct {
	path string
	mu   sync.Mutex
	n    map[string]int64
	ex   map[string]string // the first request of each opcode, as go-fuse printed it
	// queries, if set, is a line of the daemon's own query counts so
	// far, appended after the requests' (a measurement aid too).
	queries func() string
}

func newOpCounter() *opCounter {
	p := os.Getenv("ART_FUSE_COUNTS")
	if p == "" {
		return nil
	}
	return &opCounter{path: p, n: map[string]int64{}, ex: map[string]string{}}
}

// onSignal appends the counts so far at every SIGUSR1 until stop is
// called (at unmount, before the last counts are written).
func (c *opCounter) onSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		defer close(done)
		for range ch {
			c.write()
		}
	}()
	return func() {
		signal.Stop(ch)
		close(ch)
		<-done
	}
}

func (c *opCounter) line(l string) {
	rest, ok := strings.CutPrefix(l, "rx ")
	if !ok {
		return
	}
	_, rest, ok = strings.Cut(rest, ": ")
	if !ok {
		return
	}
	op, _, _ := strings.Cut(rest, " ")
	c.mu.Lock()
	if c.n[op]++; c.n[op] == 1 {
		c.ex[op] = l
	}
	c.mu.Unlock()
}

// write appends the counts to the file (best effort: a measurement aid).
func (c *opCounter) write() {
	c.mu.Lock()
	ops := make([]string, 0, len(c.n))
	for op := range c.n {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "%s %d\t(first: %s)\n", op, c.n[op], c.ex[op])
	}
	clear(c.n)
	clear(c.ex)
	q := c.queries
	c.mu.Unlock()
	if q != nil {
		b.WriteString(q() + "\n")
	}
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	f.WriteString(b.String() + "--\n")
	f.Close()
}
