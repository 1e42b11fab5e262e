package journal

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
)

// BlameLine is one change of a path (stable JSON: art blame --json and
// art mcp's blame tool).
type BlameLine struct {
	Seq      int64    `json:"seq"`
	Time     int64    `json:"time_ns"`
	Branch   string   `json:"branch"`
	Kind     string   `json:"kind"`
	Path     string   `json:"path"`
	PID      int64    `json:"pid,omitempty"`
	Argv     []string `json:"argv,omitempty"`
	Cwd      string   `json:"cwd,omitempty"`
	Snapshot string   `json:"snapshot,omitempty"` // first snapshot holding the change
	// Op is the operation that made the change, and its kind and
	// description ("import", "push /src/ws"): what names a change no
	// process made (a push, a pull, a checkout).
	Op     int64  `json:"op,omitempty"`
	OpKind string `json:"op_kind,omitempty"`
	OpDesc string `json:"op_description,omitempty"`
}

// IsChange reports whether an event kind changes a path.
func IsChange(k EventKind) bool {
	return k >= EvCreate && k <= EvRemovexattr
}

// Blame returns every change of path (relative to /home/agent) on branch
// ("" every branch), oldest first, each with the command whose process
// made it (when the tracer or the overlay named it) and the first
// snapshot holding it.
func (db *DB) Blame(ctx context.Context, branch, path string) ([]BlameLine, error) {
	evs, err := db.Events(ctx, EventQuery{Branch: branch, Path: []byte(path)})
	if err != nil {
		return nil, err
	}
	attr, err := db.LoadAttribution(ctx, branch)
	if err != nil {
		return nil, err
	}
	snaps, err := db.Snapshots(ctx, branch)
	if err != nil {
		return nil, err
	}
	var out []BlameLine
	ops := map[int64]OpInfo{}
	for i := range evs {
		ev := &evs[i]
		if !IsChange(ev.Kind) || (string(ev.Path) != path && string(ev.Path2) != path) {
			continue
		}
		l := BlameLine{Seq: ev.Seq, Time: ev.Time, Branch: db.BranchName(ctx, ev.Branch), Kind: ev.Kind.String(),
			Path: path, PID: ev.PID}
		if v, ok := attr.Command(ev); ok {
			l.Argv, l.Cwd = v.Argv, v.Cwd
		}
		if ev.Op != 0 {
			o, ok := ops[ev.Op]
			if !ok {
				if o, err = db.Op(ctx, ev.Op); err != nil {
					return nil, err
				}
				ops[ev.Op] = o
			}
			l.Op, l.OpKind, l.OpDesc = o.ID, o.Kind, o.Description
		}
		// Snapshots are newest first: the last one at or after the event
		// on its branch is the first to hold it.
		for _, s := range snaps {
			if s.BranchID == ev.Branch && s.Seq >= ev.Seq {
				l.Snapshot = s.ID.Short()
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// Attribution maps a journal event's pid to the command that process was
// running: exec events (from the tracer, or from /proc when the overlay
// named a caller) of the same operation, by pid.
type Attribution struct {
	byPid map[[2]int64][]execRef // (op, pid) -> execs in seq order
}

type execRef struct {
	seq int64
	v   ExecCommand
}

// ExecCommand is what an exec event says its process ran.
type ExecCommand struct {
	PID  int64    `json:"pid"`
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd"`
}

// decodeExec reads the command of an exec event: the fields of its JSON
// Value that attribution needs. The Value is a whole tracer record
// (docs/store-format.md), which package session writes and reads; the
// store layer reads only these fields and so does not import the tracer.
func decodeExec(ev *Event) ExecCommand {
	var v ExecCommand
	if err := json.Unmarshal(ev.Value, &v); err != nil || v.PID == 0 {
		// An exec event from before the JSON value: argv in Text.
		v.PID = ev.PID
		v.Argv = strings.Split(ev.Text, "\x00")
	}
	return v
}

// LoadAttribution reads the exec records of branch ("" every branch).
func (db *DB) LoadAttribution(ctx context.Context, branch string) (*Attribution, error) {
	evs, err := db.Events(ctx, EventQuery{Branch: branch})
	if err != nil {
		return nil, err
	}
	a := &Attribution{byPid: map[[2]int64][]execRef{}}
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != EvExec {
			continue
		}
		k := [2]int64{ev.Op, ev.PID}
		a.byPid[k] = append(a.byPid[k], execRef{seq: ev.Seq, v: decodeExec(ev)})
	}
	return a, nil
}

// Command returns the exec record naming ev's process: the latest exec of
// that pid before the event, else the first after it (tracer records
// reach the journal in batches, up to a flush interval after the changes
// they explain).
func (a *Attribution) Command(ev *Event) (ExecCommand, bool) {
	if ev.PID == 0 {
		return ExecCommand{}, false
	}
	refs := a.byPid[[2]int64{ev.Op, ev.PID}]
	if len(refs) == 0 {
		return ExecCommand{}, false
	}
	i := sort.Search(len(refs), func(i int) bool { return refs[i].seq > ev.Seq })
	if i > 0 {
		return refs[i-1].v, true
	}
	return refs[0].v, true
}
