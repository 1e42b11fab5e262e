package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/seccomp"
	"github.com/artrt/art/tracer"
)

// tracePolicy turns --trace-syscalls into a seccomp policy: "" is the
// default set (execs, connects, opens with write intent), "all" traces
// every call, otherwise a comma-separated list of names (an unknown name
// is a usage error naming it). "open" and "openat" in the list mean every
// such call, not only writes.
func tracePolicy(spec string) (seccomp.Policy, error) {
	spec = strings.TrimSpace(spec)
	switch spec {
	case "":
		return seccomp.DefaultTrace(), nil
	case "all":
		return seccomp.Policy{TraceAll: true}, nil
	}
	var p seccomp.Policy
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if _, ok := seccomp.Lookup(name); !ok {
			return seccomp.Policy{}, usagef("--trace-syscalls: unknown system call %q", name)
		}
		p.Trace = append(p.Trace, name)
	}
	return p, nil
}

// traceLog opens --trace-log's destination: "-" is stderr, anything else
// a file created (truncated) on the host. close flushes nothing extra; it
// closes the file.
func traceLog(spec string, stderr io.Writer) (sink *tracer.TextSink, close func() error, err error) {
	if spec == "-" {
		return &tracer.TextSink{W: stderr}, func() error { return nil }, nil
	}
	f, err := os.Create(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("trace log: %w", err)
	}
	return &tracer.TextSink{W: f}, f.Close, nil
}

// traceJournal is the tracer sink that appends records to the session's
// journal (exec -> EvExec, others -> EvSyscall) through record, which in
// art run is the overlay's (*overlay.FS).Record: the mount's Batch is the
// process's only journal writer.
type traceJournal struct {
	record func(context.Context, []journal.Event) error

	mu  sync.Mutex
	err error
}

func newTraceJournal(record func(context.Context, []journal.Event) error) *traceJournal {
	return &traceJournal{record: record}
}

// Records implements tracer.Sink.
func (j *traceJournal) Records(rs []tracer.Record) {
	evs := traceEvents(rs)
	if err := j.record(context.Background(), evs); err != nil {
		j.mu.Lock()
		if j.err == nil {
			j.err = err
		}
		j.mu.Unlock()
	}
}

// Err returns the first error appending records failed with.
func (j *traceJournal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// traceEvents encodes records as journal events: Text is the argv
// (NUL-separated) of an exec, the syscall name, or "exit"; Value is the
// record as JSON (see docs/store-format.md).
func traceEvents(rs []tracer.Record) []journal.Event {
	evs := make([]journal.Event, 0, len(rs))
	for _, r := range rs {
		value, err := json.Marshal(traceValue{Record: r, Source: "trace"})
		if err != nil {
			continue // a Record always marshals
		}
		ev := journal.Event{PID: int64(r.PID), Value: value}
		switch r.Kind {
		case tracer.KindExec:
			ev.Kind, ev.Text = journal.EvExec, strings.Join(r.Argv, "\x00")
		case tracer.KindExit:
			ev.Kind, ev.Text = journal.EvSyscall, "exit"
		default:
			ev.Kind, ev.Text = journal.EvSyscall, r.Syscall
		}
		evs = append(evs, ev)
	}
	return evs
}

// traceValue is the Value of exec and syscall events: a tracer record plus
// where it came from ("trace", or "proc" when the overlay named a caller
// from /proc).
type traceValue struct {
	tracer.Record
	Source string `json:"source"`
}

func decodeTraceValue(ev *journal.Event) traceValue {
	var v traceValue
	if err := json.Unmarshal(ev.Value, &v); err != nil || v.PID == 0 {
		// An exec event from before the JSON value: argv in Text.
		v.PID = int(ev.PID)
		if ev.Kind == journal.EvExec {
			v.Kind = tracer.KindExec
			v.Argv = strings.Split(ev.Text, "\x00")
		}
	}
	return v
}
