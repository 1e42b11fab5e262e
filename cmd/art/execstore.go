package main

import (
	"context"
	"errors"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
)

// execRunFunc runs one request in the overlay of the executor's branch,
// with the file events it causes journaled under op. When it returns,
// every change the command made must be committed (the overlay flushed),
// so the snapshot that follows sees it. It is the sandbox's part.
type execRunFunc func(ctx context.Context, req *execapi.Request, op *journal.Op) *execapi.Response

// journaledExecutor is the store's side of art exec: each request is an
// "exec" operation in art log (begin and end events, exit status), with
// a snapshot before and after it and the changes between them in the
// response. Requests of a stream chain: when nothing changed the branch
// in between, a request's snapshot_before is the previous snapshot_after.
// It serves one branch (the one whose overlay is mounted).
type journaledExecutor struct {
	db     *journal.DB
	branch string
	run    execRunFunc
}

func (x *journaledExecutor) Exec(ctx context.Context, req *execapi.Request) *execapi.Response {
	if req.Branch != "" && req.Branch != x.branch || req.At != "" {
		return execapi.Failed(execapi.Errorf(execapi.CodeUnsupported,
			"this art exec serves branch %s; start another with --branch (and art branch NAME --from REV for at)", x.branch))
	}
	// The store is written after the command whatever ended it.
	bg := context.WithoutCancel(ctx)
	var before journal.State
	if req.WantSnapshot() {
		var e *execapi.Error
		if before, e = x.snapshotHead(ctx, req.ExecutionID); e != nil {
			return execapi.Failed(e)
		}
	}
	desc := req.ExecutionID + " " + strings.Join(req.Command, " ")
	op, err := x.db.BeginOp(ctx, x.branch, "exec", desc)
	if err != nil {
		return execapi.Failed(storeError(err))
	}
	status := execapi.ExitNotRun
	defer func() {
		if op != nil { // an early failure: close the op so the log is true
			op.End(bg, &status)
		}
	}()
	if err := op.Update(ctx, func(tx *journal.Tx) error {
		return tx.Record(journal.Event{Kind: journal.EvBegin, Text: desc})
	}); err != nil {
		return execapi.Failed(storeError(err))
	}
	resp := x.run(ctx, req, op)
	status = resp.ExitCode
	var after journal.Snapshot
	err = op.Update(bg, func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvEnd, Status: int64(resp.ExitCode), Text: string(resp.Status)}); err != nil {
			return err
		}
		if !req.WantSnapshot() {
			return nil
		}
		var err error
		after, err = tx.Snapshot("exec " + req.ExecutionID)
		return err
	})
	if err == nil {
		err = op.End(bg, &status)
		op = nil
	}
	if err != nil {
		if resp.Error == nil {
			resp.Error = execapi.Errorf(execapi.CodeSnapshot, "record the end of %s: %v", req.ExecutionID, err)
		}
		return resp
	}
	if !req.WantSnapshot() {
		return resp
	}
	resp.SnapshotBefore, resp.SnapshotAfter = before.Snapshot.String(), after.ID.String()
	changes, err := execChanges(bg, x.db.Objects(), before.Root, after.Root)
	if err != nil && resp.Error == nil {
		resp.Error = execapi.Errorf(execapi.CodeStore, "changes of %s: %v", req.ExecutionID, err)
	}
	resp.Changes = changes
	return resp
}

// snapshotHead returns the branch's head as a snapshot: the snapshot it
// already is (the previous request's snapshot_after, when nothing wrote
// the branch since), or a new one.
func (x *journaledExecutor) snapshotHead(ctx context.Context, id string) (journal.State, *execapi.Error) {
	head, err := x.db.Head(ctx, x.branch)
	if err != nil {
		return head, storeError(err)
	}
	if !head.Snapshot.IsZero() {
		return head, nil
	}
	s, err := x.db.TakeSnapshot(ctx, x.branch, "before exec "+id)
	if err != nil {
		return head, execapi.Errorf(execapi.CodeSnapshot, "snapshot before %s: %v", id, err)
	}
	return journal.State{Branch: s.Branch, Seq: s.Seq, Root: s.Root, Snapshot: s.ID}, nil
}

func storeError(err error) *execapi.Error {
	if errors.Is(err, journal.ErrBranchNotFound) || errors.Is(err, journal.ErrRevNotFound) {
		return execapi.Errorf(execapi.CodeRevNotFound, "%v", err)
	}
	return execapi.Errorf(execapi.CodeStore, "%v", err)
}

// execChanges summarises the difference between two roots for a response.
func execChanges(ctx context.Context, objs *cas.Store, a, b cas.ID) (*execapi.Changes, error) {
	c := &execapi.Changes{Paths: []execapi.PathChange{}}
	err := journal.Diff(ctx, objs, a, b, func(ch journal.Change) error {
		switch ch.Kind {
		case journal.Added:
			c.Add(string(ch.Path), "added")
		case journal.Deleted:
			c.Add(string(ch.Path), "deleted")
		default: // Modified, TypeChanged
			c.Add(string(ch.Path), "modified")
		}
		return nil
	})
	return c, err
}
