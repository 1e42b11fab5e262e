package session

import (
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/artrt/art/internal/termtext"
)

// heldLog keeps the messages of a session's overlay (and, while Run's
// command runs, of the standard logger) until the session ends: the
// sandboxed program may own the terminal that art's stderr is, and a line
// written under it would land in the middle of its screen. Bounded: the
// first heldLines lines, then a count.
type heldLog struct {
	mu    sync.Mutex
	lines []string
	more  int
}

const heldLines = 20

func (h *heldLog) add(line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lines) < heldLines {
		h.lines = append(h.lines, line)
	} else {
		h.more++
	}
}

// Write makes h a log.Logger's output: a line each.
func (h *heldLog) Write(p []byte) (int, error) {
	lineWriterFunc(h.add).Write(p)
	return len(p), nil
}

// flush writes what h holds to w and empties it.
func (h *heldLog) flush(w io.Writer) {
	h.mu.Lock()
	lines, more := h.lines, h.more
	h.lines, h.more = nil, 0
	h.mu.Unlock()
	for _, l := range lines {
		fmt.Fprintln(w, termtext.Text(l)) // an error's detail may hold a name the agent chose
	}
	if more > 0 {
		fmt.Fprintf(w, "art overlay: and %d more messages like these\n", more)
	}
}

// holdStdLog sends the standard logger's output (go-fuse logs there too)
// to h until the returned function restores it.
func holdStdLog(h *heldLog) (restore func()) {
	prev, flags := log.Writer(), log.Flags()
	log.SetOutput(h)
	log.SetFlags(0)
	return func() {
		log.SetOutput(prev)
		log.SetFlags(flags)
	}
}

type lineWriterFunc func(string)

func (w lineWriterFunc) Write(p []byte) (int, error) {
	start := 0
	for i, c := range p {
		if c == '\n' {
			w(string(p[start:i]))
			start = i + 1
		}
	}
	if start < len(p) {
		w(string(p[start:]))
	}
	return len(p), nil
}
