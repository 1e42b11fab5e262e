package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
	"github.com/artrt/art/tracer"
)

// traceEventJSON is one exec or syscall event in `art log --syscalls
// --json` / `--execs --json` (stable): the journal position plus the
// tracer record.
type traceEventJSON struct {
	Seq    int64  `json:"seq"`
	Op     int64  `json:"op"`
	Branch string `json:"branch"`
	session.TraceValue
}

func traceEventsOf(ctx context.Context, db *journal.DB, branch string, kinds ...journal.EventKind) ([]traceEventJSON, error) {
	evs, err := db.Events(ctx, journal.EventQuery{Branch: branch})
	if err != nil {
		return nil, err
	}
	out := []traceEventJSON{}
	for i := range evs {
		ev := &evs[i]
		for _, k := range kinds {
			if ev.Kind == k {
				v := session.DecodeTraceValue(ev)
				if v.Syscall == "" && ev.Kind == journal.EvSyscall && ev.Text != "exit" {
					v.Syscall = ev.Text
				}
				out = append(out, traceEventJSON{Seq: ev.Seq, Op: ev.Op, Branch: db.BranchName(ctx, ev.Branch), TraceValue: v})
			}
		}
	}
	return out, nil
}

// logSyscalls prints traced system calls (and process exits) one per line.
func logSyscalls(ctx context.Context, db *journal.DB, branch string, asJSON bool, w io.Writer) error {
	recs, err := traceEventsOf(ctx, db, branch, journal.EvSyscall)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, recs)
	}
	for _, r := range recs {
		fmt.Fprintf(w, "@%-6d %s\n", r.Seq, r.Record.String())
	}
	return nil
}

// logExecs prints the commands run in each session as a tree: a command
// under the nearest ancestor that ran a command of its own.
func logExecs(ctx context.Context, db *journal.DB, branch string, asJSON bool, w io.Writer) error {
	recs, err := traceEventsOf(ctx, db, branch, journal.EvExec, journal.EvSyscall)
	if err != nil {
		return err
	}
	var execs []traceEventJSON
	exits := map[[2]int64]tracer.Record{} // (op, pid) -> exit record
	for _, r := range recs {
		switch {
		case r.Kind == tracer.KindExec:
			execs = append(execs, r)
		case r.Kind == tracer.KindExit:
			exits[[2]int64{r.Op, int64(r.PID)}] = r.Record
		}
	}
	if asJSON {
		return writeJSON(w, execs)
	}
	byOp := map[int64][]traceEventJSON{}
	var ops []int64
	for _, r := range execs {
		if _, ok := byOp[r.Op]; !ok {
			ops = append(ops, r.Op)
		}
		byOp[r.Op] = append(byOp[r.Op], r)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	for _, op := range ops {
		fmt.Fprintf(w, "op %d (%s)\n", op, termtext.Quote(byOp[op][0].Branch))
		printExecTree(w, byOp[op], exits)
	}
	return nil
}

func printExecTree(w io.Writer, execs []traceEventJSON, exits map[[2]int64]tracer.Record) {
	// Journal order is not exec order: tracer records arrive in batches,
	// after the changes (and /proc namings) they explain.
	execs = slices.Clone(execs)
	sort.SliceStable(execs, func(i, j int) bool { return execs[i].Time.Before(execs[j].Time) })
	// A process's node is its latest exec so far; a child hangs under
	// its parent's node (ExecParent from the tracer, PPID from /proc).
	node := map[int]int{} // pid -> index of its latest exec
	children := map[int][]int{}
	var roots []int
	for i, r := range execs {
		if prev, ok := node[r.PID]; ok && (r.Source == "proc" || execs[prev].Source == "proc") &&
			slices.Equal(execs[prev].Argv, r.Argv) {
			// The same program named twice (tracer and /proc, in either
			// order): keep the first line.
			continue
		}
		parent := r.ExecParent
		if parent == 0 {
			parent = r.PPID
		}
		if p, ok := node[parent]; ok {
			children[p] = append(children[p], i) // a re-exec nests under the program it replaced
		} else {
			roots = append(roots, i)
		}
		node[r.PID] = i
	}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		r := execs[i]
		status := ""
		if x, ok := exits[[2]int64{r.Op, int64(r.PID)}]; ok && node[r.PID] == i {
			status = "  [exit " + tracer.ExitString(x.Status) + "]"
		}
		fmt.Fprintf(w, "%s%d  %s%s\n", strings.Repeat("  ", depth+1), r.PID, termtext.Argv(r.Argv), status)
		for _, c := range children[i] {
			walk(c, depth+1)
		}
	}
	for _, i := range roots {
		walk(i, 0)
	}
}
