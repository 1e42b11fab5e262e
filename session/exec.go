package session

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/seccomp"
)

// execSandbox runs exec requests in the sandbox over one mounted session:
// the overlay stays mounted between requests (warm exec), each request is
// a bwrap of its own, journaled under the request's op.
type execSandbox struct {
	s    *Session
	base sandbox.Config // what every request shares: workspace, home, hiding, seccomp, uid
}

// NewExecutor mounts o's branch once and returns the executor of the
// JSON exec API (execapi) that serves requests over it, and the function
// that releases it (unmount, close the store) after the last response.
// Each request is a sandbox of its own and an "exec" operation in the
// journal, with snapshots before and after it; the overlay stays mounted
// between requests (warm exec). o.Warn gets the capture's messages.
func NewExecutor(ctx context.Context, o Options) (execapi.Executor, func() error, error) {
	if o.Durability == "" {
		o.Durability = string(journal.DurabilityNormal)
	}
	fileBinds, err := readBindsFile(o.Workspace)
	if err != nil {
		return nil, nil, err
	}
	prog, err := (seccomp.Policy{}).Program()
	if err != nil {
		return nil, nil, err
	}
	x := &execSandbox{base: sandbox.Config{Name: filepath.Base(o.Workspace), Workspace: o.Workspace,
		PolicyDir: filepath.Join(o.Workspace, sandbox.ArtDir), Binds: fileBinds, UID: o.UID, GID: o.GID, Seccomp: prog}}
	s, err := Open(ctx, o, &x.base, nil)
	if err != nil {
		if s.DB != nil {
			s.DB.Close()
		}
		return nil, nil, err
	}
	x.s = s
	release := func() error {
		err := s.Close(context.WithoutCancel(ctx))
		if cerr := s.DB.Close(); err == nil {
			err = cerr
		}
		return err
	}
	jx := &journaledExecutor{db: s.DB, branch: s.Branch, run: x.run}
	if st := s.Capture; st.Conflicts > 0 {
		c := &execapi.WorkspaceCapture{Conflicts: st.Conflicts}
		for _, k := range st.ConflictList {
			c.Paths = append(c.Paths, execapi.CaptureConflict{Path: k.Path, Kept: k.Kept, Why: k.Why})
		}
		jx.capture.Store(c)
	}
	return jx, release, nil
}

// run executes one validated request, its file changes journaled under op.
func (x *execSandbox) run(ctx context.Context, req *execapi.Request, op *journal.Op) *execapi.Response {
	fsys := x.s.FS
	if err := fsys.SetOp(op); err != nil {
		return execapi.Failed(storeError(err, "journal under "+req.ExecutionID))
	}
	defer fsys.SetOp(nil)
	fsys.SetQuota(req.Resources.DiskBytes)
	defer fsys.SetQuota(0)

	cfg := x.base
	cfg.Command = req.Command
	cfg.Cwd = req.WorkingDirectory
	cfg.Net = sandbox.NetNone
	if req.Isolation.Network {
		cfg.Net = sandbox.NetHost
	}
	keys := make([]string, 0, len(req.Environment))
	for k := range req.Environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cfg.Env = append(cfg.Env, k+"="+req.Environment[k])
	}
	cfg.Binds = append([]sandbox.Bind(nil), x.base.Binds...)
	for _, b := range req.Isolation.BindMounts {
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: b.Source, Guest: b.Destination, ReadOnly: b.ReadOnly})
	}
	cfg.Limits = sandbox.Limits{MemoryBytes: req.Resources.MemoryBytes, Pids: req.Resources.MaxPids,
		CPUSeconds: (req.Resources.CPUMS + 999) / 1000}
	if e := lookCommand(&cfg); e != nil {
		return execapi.Failed(e)
	}

	stdout, stderr := execapi.NewCapture(req.OutputLimit()), execapi.NewCapture(req.OutputLimit())
	var stdin *strings.Reader
	stdio := sandbox.IO{Stdout: stdout, Stderr: stderr}
	if req.Stdin != "" {
		stdin = strings.NewReader(req.Stdin)
		stdio.Stdin = stdin
	}
	made := bindMountPoints(&cfg)
	started := time.Now()
	p, err := sandbox.Start(&cfg, stdio, nil)
	if err != nil {
		removeMountPoints(made)
		return execapi.Failed(execapi.Errorf(execapi.CodeSetup, "start the sandbox: %v", err))
	}
	timeout := time.Duration(req.Timeout()) * time.Millisecond
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	cancelled := false
	select {
	case <-p.Done():
	case <-timer.C:
		p.Stop(execapi.DefaultKillGrace, true)
	case <-ctx.Done():
		cancelled = true
		p.Stop(0, false)
	}
	res, werr := p.Wait()
	removeMountPoints(made)
	if werr != nil {
		return execapi.Failed(execapi.Errorf(execapi.CodeExecFailed, "%v", werr))
	}
	// Whatever the command left dirty (written through a mapping after
	// its last close) is journaled before the snapshot.
	if err := fsys.Flush(context.WithoutCancel(ctx)); err != nil {
		return execapi.Failed(storeError(err, "journal the changes of "+req.ExecutionID))
	}
	out := execapi.Outcome{Started: started, Wall: res.Wall, User: res.UserTime, Kernel: res.SysTime,
		MaxMemory: res.MaxMemory, IORead: res.IORead, IOWritten: res.IOWritten,
		Signal: res.Signal, TimedOut: res.TimedOut, Timeout: timeout, Cancelled: cancelled}
	if res.Signal == 0 {
		out.ExitCode = res.ExitCode
	}
	switch {
	case res.OOMKilled:
		out.Limit = execapi.LimitError(execapi.CodeMemoryLimit, req)
	case res.Signal == syscall.SIGXCPU || (req.Resources.CPUMS > 0 && res.Signal == syscall.SIGKILL && res.UserTime+res.SysTime >= time.Duration(req.Resources.CPUMS)*time.Millisecond):
		out.Limit = execapi.LimitError(execapi.CodeCPULimit, req)
	case req.Resources.DiskBytes > 0 && fsys.Used() >= req.Resources.DiskBytes && res.ExitCode != 0:
		out.Limit = execapi.LimitError(execapi.CodeDiskLimit, req)
	}
	return out.Response(stdout, stderr)
}

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
	db      *journal.DB
	branch  string
	run     execRunFunc
	capture atomic.Pointer[execapi.WorkspaceCapture] // for the first response
}

func (x *journaledExecutor) Exec(ctx context.Context, req *execapi.Request) *execapi.Response {
	resp := x.exec(ctx, req)
	if c := x.capture.Swap(nil); c != nil {
		resp.Capture = c
	}
	return resp
}

func (x *journaledExecutor) exec(ctx context.Context, req *execapi.Request) *execapi.Response {
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
		return execapi.Failed(storeError(err, ""))
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
		return execapi.Failed(storeError(err, ""))
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
		resp.Error = storeError(err, "changes of "+req.ExecutionID)
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
		return head, storeError(err, "")
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

// storeError is an error of the store around a request as the exec API
// reports it: the code is its class's (execapi.CodeOf, the exec API's one
// table), the message says what failed when what is not "".
func storeError(err error, what string) *execapi.Error {
	if what != "" {
		return execapi.Errorf(execapi.CodeOf(err), "%s: %v", what, err)
	}
	return execapi.Errorf(execapi.CodeOf(err), "%v", err)
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
