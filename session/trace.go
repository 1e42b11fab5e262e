package session

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/seccomp"
	"github.com/artrt/art/tracer"
)

// TraceOptions say whether and how a run's system calls are traced.
type TraceOptions struct {
	Trace    bool   // --trace
	Log      string // --trace-log FILE ("-" = stderr); implies Trace
	Syscalls string // --trace-syscalls a,b,c | all; implies Trace
}

// Enabled reports whether anything asks for tracing.
func (o TraceOptions) Enabled() bool { return o.Trace || o.Log != "" || o.Syscalls != "" }

// seccompProgram is what bwrap gets with --seccomp FD: the deny-list, and
// when tracing SECCOMP_RET_TRACE for the traced set. (A traced call with
// no tracer attached fails with ENOSYS: use the tracing program only with
// start.)
func (o TraceOptions) seccompProgram() ([]byte, error) {
	if !o.Enabled() {
		return seccomp.Policy{}.Program()
	}
	p, err := TracePolicy(o.Syscalls)
	if err != nil {
		return nil, err
	}
	return p.Program()
}

// start starts cmd (bwrap, configured) under the tracer. Records go to
// the journal through record (in art run: the mount's (*overlay.FS).Record)
// and, with --trace-log, as text lines. Call finish after tr.Wait: it
// closes the log and returns the first error journaling records met.
func (o TraceOptions) start(cmd *exec.Cmd, record func(context.Context, ...journal.Event) error, stderr io.Writer) (tr *tracer.Tracer, finish func() error, err error) {
	j := NewTraceJournal(record)
	var sink tracer.Sink = j
	closeLog := func() error { return nil }
	if o.Log != "" {
		text, c, err := traceLog(o.Log, stderr)
		if err != nil {
			return nil, nil, err
		}
		sink, closeLog = tracer.Tee(j, text), c
	}
	// Changes under /home/agent are journaled by the overlay with their
	// caller's pid: recording those opens too would only slow them down.
	tr, err = tracer.Start(cmd, tracer.Options{Sink: sink, SkipOpensUnder: []string{sandbox.GuestHome},
		// The thread that forks bwrap carries the sandbox's Landlock scope.
		BeforeStart: func() error { return sandbox.PrepareThread(cmd) }})
	if err != nil {
		closeLog()
		return nil, nil, fmt.Errorf("trace %s: %w", cmd.Path, err)
	}
	return tr, func() error {
		cerr := closeLog()
		if err := j.Err(); err != nil {
			return fmt.Errorf("journal trace records: %w", err)
		}
		return cerr
	}, nil
}

// tracePolicy turns --trace-syscalls into a seccomp policy: "" is the
// default set (execs, connects, opens with write intent), "all" traces
// every call, otherwise a comma-separated list of names (an unknown name
// is a usage error naming it). "open" and "openat" in the list mean every
// such call, not only writes.
func TracePolicy(spec string) (seccomp.Policy, error) {
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

// TraceJournal is the tracer sink that appends records to the session's
// journal (exec -> EvExec, others -> EvSyscall) through record, which in
// art run is the overlay's (*overlay.FS).Record: the mount's Batch is the
// process's only journal writer.
type TraceJournal struct {
	record func(context.Context, ...journal.Event) error

	mu  sync.Mutex
	err error
}

func NewTraceJournal(record func(context.Context, ...journal.Event) error) *TraceJournal {
	return &TraceJournal{record: record}
}

// Records implements tracer.Sink.
func (j *TraceJournal) Records(rs []tracer.Record) {
	evs := traceEvents(rs)
	if err := j.record(context.Background(), evs...); err != nil {
		j.mu.Lock()
		if j.err == nil {
			j.err = err
		}
		j.mu.Unlock()
	}
}

// Err returns the first error appending records failed with.
func (j *TraceJournal) Err() error {
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
		value, err := json.Marshal(TraceValue{Record: r, Source: "trace"})
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

// TraceValue is the Value of exec and syscall events: a tracer record plus
// where it came from ("trace", or "proc" when the overlay named a caller
// from /proc).
type TraceValue struct {
	tracer.Record
	Source string `json:"source"`
}

// DecodeTraceValue reads an exec or syscall event's record (art log;
// journal.Attribution reads an exec's argv and cwd itself).
func DecodeTraceValue(ev *journal.Event) TraceValue {
	var v TraceValue
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
