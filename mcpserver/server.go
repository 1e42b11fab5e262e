// Package mcpserver serves one art session and its store's history as
// Model Context Protocol tools (art mcp): a harness's model runs commands
// in the sandbox, snapshots, rewinds, diffs and reads its own history.
//
// The server holds one warm session, exactly as art exec --jsonl does: the
// overlay stays mounted between commands, each command is an operation of
// its own with a snapshot before and after. A checkout or undo ends the
// session (unmount: nothing of the old state stays cached in the kernel
// or open), moves the branch in the journal like the CLI does, and opens
// a new session on the moved branch for the next command.
//
// Nothing a tool call says can widen the sandbox: no tool takes binds,
// network, limits or policy; those come from art mcp's command line.
// Tool errors are results with isError set, whose text starts with the
// exec API's code (E1xxx-E6xxx, docs/exec-api.md).
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/mergeop"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is what art mcp wires.
type Config struct {
	// Open opens the warm session on Branch of the store: an executor of
	// exec API requests and the function that ends it.
	Open func(ctx context.Context, branch string) (execapi.Executor, func() error, error)
	// DB opens the store for the history tools and for moving the branch.
	DB     func(ctx context.Context) (*journal.DB, error)
	Branch string         // the session's branch at the start (the branch tool may switch it)
	Policy execapi.Policy // the host side's protection of the store
	// Version names the server to clients.
	Version string
}

// Server is the MCP server of one session.
type Server struct {
	cfg Config
	mcp *mcp.Server

	mu      sync.Mutex // one tool call at a time: they share the session and the branch (cfg.Branch)
	exec    *execapi.Server
	release func() error
}

// New builds the server; the session opens at the first command.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "art", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "art runs your commands in a sandbox over a journaled copy-on-write workspace (/home/agent). " +
			"Every command is recorded with a snapshot before and after it; you can diff, read past states, " +
			"see which command wrote a file, and move the workspace back to any snapshot with checkout or undo.",
	})
	s.addTools()
	return s
}

// Run serves t until the client goes away, then ends the session.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	if cerr := s.close(); err == nil {
		err = cerr
	}
	return err
}

// close ends the session if one is open. The caller holds no lock.
func (s *Server) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

func (s *Server) closeLocked() error {
	if s.release == nil {
		return nil
	}
	err := s.release()
	s.exec, s.release = nil, nil
	return err
}

// session returns the open session, opening it if needed. The caller
// holds s.mu.
func (s *Server) sessionLocked(ctx context.Context) (*execapi.Server, error) {
	if s.exec != nil {
		return s.exec, nil
	}
	ex, release, err := s.cfg.Open(ctx, s.cfg.Branch)
	if err != nil {
		return nil, toolError(execapi.CodeSetup, "open the session: %v", err)
	}
	s.exec = &execapi.Server{Executor: ex, Policy: s.cfg.Policy}
	s.release = release
	return s.exec, nil
}

// toolError is a tool's failure as the model sees it: the exec API's code,
// then what happened.
func toolError(c execapi.Code, format string, a ...any) error {
	return fmt.Errorf("%s: %s", c, fmt.Sprintf(format, a...))
}

// storeError is a store error as a tool's failure. MCP's tool errors
// carry the exec API's codes, so its table over the error classes is the
// exec API's (execapi.CodeOf).
func storeError(err error) error {
	return toolError(execapi.CodeOf(err), "%v", err)
}

// RunInput is the run tool's arguments.
type RunInput struct {
	Command    []string          `json:"command,omitempty" jsonschema:"the program and its arguments, run without a shell; give this or shell"`
	Shell      string            `json:"shell,omitempty" jsonschema:"a command line for sh -c (pipes, redirections, &&); give this or command"`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"absolute working directory in the sandbox; default the workspace directory under /home/agent"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"environment variables for the command (HOME, PATH and PWD are the sandbox's unless set here)"`
	Stdin      string            `json:"stdin,omitempty" jsonschema:"text written to the command's standard input"`
	TimeoutSec int64             `json:"timeout_sec,omitempty" jsonschema:"wall-time limit in seconds; the whole process tree is killed when it passes (default 300)"`
	Limits     *Limits           `json:"limits,omitempty" jsonschema:"resource limits of this command (each can only narrow the sandbox's own)"`
}

// Limits are a command's resource limits; 0 means none beyond the
// sandbox's own.
type Limits struct {
	MemoryMB       int64 `json:"memory_mb,omitempty" jsonschema:"memory of the process tree in MiB (OOM kill past it)"`
	MaxPids        int64 `json:"max_pids,omitempty" jsonschema:"number of processes and threads"`
	CPUSec         int64 `json:"cpu_sec,omitempty" jsonschema:"CPU seconds of the process tree"`
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty" jsonschema:"bytes of stdout and of stderr kept (default 1 MiB each)"`
}

// HistoryInput names a revision.
type revInput struct {
	Rev string `json:"rev" jsonschema:"a snapshot id (or a unique prefix), a branch name, BRANCH~N (N snapshots back) or @SEQ (the state after journal event SEQ)"`
}

func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "run", Description: "Run a command in the sandbox, in the workspace under /home/agent. " +
		"Returns the exit code, stdout and stderr (truncated past 1 MiB each, flagged), the snapshot taken after it and the paths it changed. " +
		"Files written persist for later commands; the host outside the workspace is read-only and there is no network unless the server was started with one."},
		s.run)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "snapshot", Description: "Record the workspace's current state as a named snapshot (every command already gets one after it); returns its id, for checkout and diff."},
		s.snapshot)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "checkout", Description: "Move the workspace back (or forward) to a snapshot or revision: the next command sees exactly that state. " +
		"Nothing is lost: the state before the checkout stays in history, and undo returns to it."},
		s.checkout)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "undo", Description: "Revert the branch's last operation (a command, a checkout, a snapshot); the next command sees the state before it."},
		s.undo)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "branch", Description: "List the store's branches, create one (from a revision, default the current branch's state) " +
		"for a parallel attempt, or switch the session to another branch: later commands run there (its files as that branch has them), " +
		"and checkout, undo, diff, log and blame work on it."},
		s.branch)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "merge", Description: "Merge another branch or revision (a parallel attempt) into a branch (default the session's) against their merge base: " +
		"a path one side left alone takes the other's version, text files both changed are merged line by line as git does, the rest conflicts. " +
		"The merge is one operation with a snapshot (undo reverts it). With conflicts, conflict=refuse (the default) changes nothing and lists them (applied false); " +
		"markers writes git's diff3 conflict markers into the files; ours or theirs takes that side for each conflict. Same result as art merge --json."},
		s.merge)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "diff", Description: "List the paths that differ between two revisions (default: from the last snapshot's predecessor... give both to be exact), with A added, D deleted, M modified, T type changed."},
		s.diff)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "log", Description: "The branch's operations, newest first: each command with its exit status and the snapshots it took, checkouts and undos."},
		s.log)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "blame", Description: "Every change of a path on the branch, oldest first, with the command (argv) whose process made it and the first snapshot holding it."},
		s.blame)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "read_file", Description: "Read a file as it is at a revision (default: the branch's current state). Text up to max_bytes (default 256 KiB), flagged when truncated."},
		s.readFile)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list", Description: "List a directory as it is at a revision (default: the branch's current state): name, kind, size, mode of each entry."},
		s.list)
}

// RunOutput is the run tool's result: the exec API's response.
type RunOutput = execapi.Response

func (s *Server) run(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, *RunOutput, error) {
	req := execapi.Request{Command: in.Command, Environment: in.Env, WorkingDirectory: in.Cwd, Stdin: in.Stdin}
	switch {
	case in.Shell != "" && len(in.Command) > 0:
		return nil, nil, toolError(execapi.CodeMalformed, "give command or shell, not both")
	case in.Shell != "":
		req.Command = []string{"sh", "-c", in.Shell}
	case len(in.Command) == 0:
		return nil, nil, toolError(execapi.CodeEmptyCommand, "give command (argv) or shell (a command line)")
	}
	if in.TimeoutSec < 0 || in.TimeoutSec > 24*3600 {
		return nil, nil, toolError(execapi.CodeLimitRange, "timeout_sec must be 1..86400")
	}
	req.TimeoutMS = in.TimeoutSec * 1000
	if l := in.Limits; l != nil {
		if l.MemoryMB < 0 || l.MaxPids < 0 || l.CPUSec < 0 || l.MaxOutputBytes < 0 ||
			l.MemoryMB > 1<<30 || l.CPUSec > 1<<30 {
			return nil, nil, toolError(execapi.CodeLimitRange, "limits must be positive")
		}
		req.Resources = execapi.Resources{MemoryBytes: l.MemoryMB << 20, MaxPids: l.MaxPids, CPUMS: l.CPUSec * 1000,
			MaxOutputBytes: l.MaxOutputBytes}
	}
	data, err := json.Marshal(&req)
	if err != nil {
		return nil, nil, toolError(execapi.CodeMalformed, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, err := s.sessionLocked(ctx)
	if err != nil {
		return nil, nil, err
	}
	resp := srv.Handle(ctx, data)
	if resp.Error != nil {
		// Not run, or ended by the sandbox (timeout, a limit): a tool error
		// the model can read, with the response as the structured part.
		res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(resp.Error.Code) + ": " + resp.Error.Message}}}
		return res, resp, nil
	}
	return nil, resp, nil
}

// BranchInput is the branch tool's arguments.
type BranchInput struct {
	Create string `json:"create,omitempty" jsonschema:"name of a branch to create"`
	From   string `json:"from,omitempty" jsonschema:"with create: the revision it starts at (default the current branch's state)"`
	Switch string `json:"switch,omitempty" jsonschema:"name of the branch the session moves to (after create, if both are given)"`
}

// BranchOutput lists the branches and the session's.
type BranchOutput struct {
	Current  string       `json:"current"`
	Branches []BranchInfo `json:"branches"`
}

// BranchInfo is one branch.
type BranchInfo struct {
	Name    string `json:"name"`
	HeadSeq int64  `json:"head_seq"`
	Events  int64  `json:"events"`
}

func (s *Server) branch(ctx context.Context, _ *mcp.CallToolRequest, in BranchInput) (*mcp.CallToolResult, BranchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Switch != "" && in.Switch != s.cfg.Branch {
		// The session serves one branch: end it; the next command opens
		// one on the other branch.
		if err := s.closeLocked(); err != nil {
			return nil, BranchOutput{}, toolError(execapi.CodeOf(err), "end the session: %v", err)
		}
	}
	var out BranchOutput
	err := s.withDB(ctx, func(db *journal.DB) error {
		if in.Create != "" {
			from := in.From
			if from == "" {
				from = s.cfg.Branch
			}
			st, err := db.Resolve(ctx, from, s.cfg.Branch)
			if err != nil {
				return storeError(err)
			}
			if _, err := db.CreateBranch(ctx, in.Create, st); err != nil {
				return toolError(execapi.CodeOf(err), "create branch %s: %v", in.Create, err)
			}
		}
		if in.Switch != "" {
			if _, err := db.Branch(ctx, in.Switch); err != nil {
				return storeError(err)
			}
			s.cfg.Branch = in.Switch
		}
		bs, err := db.Branches(ctx)
		if err != nil {
			return storeError(err)
		}
		out.Current = s.cfg.Branch
		for _, b := range bs {
			out.Branches = append(out.Branches, BranchInfo{Name: b.Name, HeadSeq: b.HeadSeq, Events: b.EventCount})
		}
		return nil
	})
	return nil, out, err
}

// SnapshotInput is the snapshot tool's arguments.
type SnapshotInput struct {
	Message string `json:"message,omitempty" jsonschema:"what the state is (shown by log)"`
}

// SnapshotOutput names a snapshot.
type SnapshotOutput struct {
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
}

func (s *Server) snapshot(ctx context.Context, _ *mcp.CallToolRequest, in SnapshotInput) (*mcp.CallToolResult, SnapshotOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out SnapshotOutput
	err := s.withDB(ctx, func(db *journal.DB) error {
		msg := in.Message
		if msg == "" {
			msg = "snapshot (mcp)"
		}
		snap, err := db.TakeSnapshot(ctx, s.cfg.Branch, msg)
		if err != nil {
			return storeError(err)
		}
		out = SnapshotOutput{ID: snap.ID.String(), Seq: snap.Seq}
		return nil
	})
	return nil, out, err
}

// MoveOutput is where checkout or undo left the branch.
type MoveOutput struct {
	Branch string `json:"branch"`
	Seq    int64  `json:"seq"`
	Root   string `json:"root"`
	Undone string `json:"undone,omitempty"` // undo: the operation reverted
}

func (s *Server) checkout(ctx context.Context, _ *mcp.CallToolRequest, in revInput) (*mcp.CallToolResult, MoveOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out MoveOutput
	err := s.moveLocked(ctx, func(db *journal.DB) error {
		to, err := db.Resolve(ctx, in.Rev, s.cfg.Branch)
		if err != nil {
			return storeError(err)
		}
		if _, err := db.Checkout(ctx, s.cfg.Branch, to); err != nil {
			return storeError(err)
		}
		return s.head(ctx, db, &out)
	})
	return nil, out, err
}

func (s *Server) undo(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, MoveOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out MoveOutput
	err := s.moveLocked(ctx, func(db *journal.DB) error {
		op, err := db.Undo(ctx, s.cfg.Branch)
		if err != nil {
			return storeError(err)
		}
		out.Undone = fmt.Sprintf("%s %s", op.Kind, op.Description)
		return s.head(ctx, db, &out)
	})
	return nil, out, err
}

func (s *Server) head(ctx context.Context, db *journal.DB, out *MoveOutput) error {
	st, err := db.Head(ctx, s.cfg.Branch)
	if err != nil {
		return storeError(err)
	}
	out.Branch, out.Seq, out.Root = st.Branch, st.Seq, st.Root.String()
	return nil
}

// moveLocked ends the session (the overlay is unmounted: no stale cache,
// no open file of the old state), moves the branch with fn, and leaves the
// next command to open a session on the new state. The caller holds s.mu.
func (s *Server) moveLocked(ctx context.Context, fn func(db *journal.DB) error) error {
	if err := s.closeLocked(); err != nil {
		return toolError(execapi.CodeOf(err), "end the session before moving the branch: %v", err)
	}
	return s.withDB(ctx, fn)
}

func (s *Server) withDB(ctx context.Context, fn func(db *journal.DB) error) error {
	db, err := s.cfg.DB(ctx)
	if err != nil {
		return storeError(err)
	}
	defer db.Close()
	return fn(db)
}

// DiffInput is the diff tool's arguments.
type DiffInput struct {
	From string `json:"from" jsonschema:"the older revision: a snapshot id, BRANCH~N, @SEQ"`
	To   string `json:"to,omitempty" jsonschema:"the newer revision (default: the branch's current state)"`
}

// MergeInput is the merge tool's arguments.
type MergeInput struct {
	Source   string `json:"source" jsonschema:"the revision to merge in: a branch name, a snapshot id (or unique prefix), BRANCH~N or @SEQ"`
	Into     string `json:"into,omitempty" jsonschema:"the branch to merge into; default the session's branch"`
	Conflict string `json:"conflict,omitempty" jsonschema:"refuse (default: change nothing, list the conflicts), markers (git-style conflict markers), ours or theirs (take that side for each conflict)"`
	Message  string `json:"message,omitempty" jsonschema:"the merge snapshot's message"`
}

// MergeOutput is art merge --json's result, ids as hex strings.
type MergeOutput struct {
	Into       MergeState     `json:"into"`
	Source     MergeState     `json:"source"`
	Base       *MergeState    `json:"base" jsonschema:"the merge base; null when the histories share nothing (the empty tree)"`
	UpToDate   bool           `json:"up_to_date" jsonschema:"the source holds nothing the branch lacks; nothing was recorded"`
	Merged     []mergeop.Path `json:"merged" jsonschema:"paths changed on the branch: action add, take, delete, meta or text"`
	Conflicts  []mergeop.Path `json:"conflicts" jsonschema:"conflicting paths with the reason and what they became (markers, ours, theirs; empty when refused)"`
	Conflicted bool           `json:"conflicted" jsonschema:"the merge was recorded with conflict markers to resolve"`
	Applied    bool           `json:"applied"`
	Op         int64          `json:"op,omitempty"`
	Snapshot   *MergeSnapshot `json:"snapshot,omitempty"`
}

// MergeState is a state of a merge.
type MergeState struct {
	Branch   string `json:"branch"`
	Seq      int64  `json:"seq"`
	Root     string `json:"root"`
	Snapshot string `json:"snapshot,omitempty"`
}

// MergeSnapshot is the snapshot a merge ends with.
type MergeSnapshot struct {
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	Message string `json:"message"`
}

func mergeState(st journal.State) MergeState {
	m := MergeState{Branch: st.Branch, Seq: st.Seq, Root: st.Root.String()}
	if !st.Snapshot.IsZero() {
		m.Snapshot = st.Snapshot.String()
	}
	return m
}

func (s *Server) merge(ctx context.Context, _ *mcp.CallToolRequest, in MergeInput) (*mcp.CallToolResult, MergeOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out MergeOutput
	mode, err := mergeop.ParseConflictMode(in.Conflict)
	if err != nil {
		return nil, out, toolError(execapi.CodeMalformed, "%v", err)
	}
	if in.Source == "" {
		return nil, out, toolError(execapi.CodeMalformed, "give source: the revision to merge in")
	}
	into := in.Into
	if into == "" {
		into = s.cfg.Branch
	}
	do := s.withDB
	if into == s.cfg.Branch {
		do = s.moveLocked // the session's own branch changes: end the session first, as checkout does
	}
	err = do(ctx, func(db *journal.DB) error {
		src, err := db.Resolve(ctx, in.Source, s.cfg.Branch)
		if err != nil {
			return storeError(err)
		}
		res, err := mergeop.Merge(ctx, db, mergeop.Options{Source: src, SourceName: in.Source, Into: into, Conflict: mode, Message: in.Message})
		if err != nil && !errors.Is(err, mergeop.ErrConflicts) {
			return storeError(err)
		}
		out = MergeOutput{Into: mergeState(res.Into), Source: mergeState(res.Source), UpToDate: res.UpToDate,
			Merged: res.Merged, Conflicts: res.Conflicts, Conflicted: res.Conflicted, Applied: res.Applied, Op: res.Op}
		if res.Base != nil {
			b := mergeState(*res.Base)
			out.Base = &b
		}
		if sn := res.Snapshot; sn != nil {
			out.Snapshot = &MergeSnapshot{ID: sn.ID.String(), Seq: sn.Seq, Message: sn.Message}
		}
		return nil
	})
	return nil, out, err
}

// DiffOutput lists changed paths.
type DiffOutput struct {
	Changes   []PathChange `json:"changes"`
	Truncated bool         `json:"truncated"`
}

// PathChange is one changed path.
type PathChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // A, D, M, T
}

const maxDiffPaths = 1000

func (s *Server) diff(ctx context.Context, _ *mcp.CallToolRequest, in DiffInput) (*mcp.CallToolResult, DiffOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := DiffOutput{Changes: []PathChange{}}
	err := s.withDB(ctx, func(db *journal.DB) error {
		a, err := db.Resolve(ctx, in.From, s.cfg.Branch)
		if err != nil {
			return storeError(err)
		}
		to := in.To
		if to == "" {
			to = s.cfg.Branch
		}
		b, err := db.Resolve(ctx, to, s.cfg.Branch)
		if err != nil {
			return storeError(err)
		}
		return journal.Diff(ctx, db.Objects(), a.Root, b.Root, func(c journal.Change) error {
			if len(out.Changes) == maxDiffPaths {
				out.Truncated = true
				return nil
			}
			out.Changes = append(out.Changes, PathChange{Path: string(c.Path), Kind: c.Kind.String()})
			return nil
		})
	})
	return nil, out, err
}

// LogInput is the log tool's arguments.
type LogInput struct {
	Limit int `json:"limit,omitempty" jsonschema:"how many operations, newest first (default 20, at most 1000)"`
}

// LogOutput is the branch's operations.
type LogOutput struct {
	Ops []LogOp `json:"ops"`
}

// LogOp is one operation of the branch.
type LogOp struct {
	ID          int64    `json:"id"`
	Kind        string   `json:"kind" jsonschema:"exec (a command), import (a capture), checkout, undo, snapshot..."`
	Description string   `json:"description"`
	Status      *int     `json:"status,omitempty" jsonschema:"the command's exit status (exec)"`
	StartNS     int64    `json:"start_ns"`
	EndNS       int64    `json:"end_ns"`
	Undoes      int64    `json:"undoes,omitempty" jsonschema:"the id of the operation an undo reverted"`
	Snapshots   []string `json:"snapshots,omitempty" jsonschema:"ids of the snapshots it took"`
}

func (s *Server) log(ctx context.Context, _ *mcp.CallToolRequest, in LogInput) (*mcp.CallToolResult, LogOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Limit <= 0 {
		in.Limit = 20
	}
	in.Limit = min(in.Limit, maxLogOps)
	out := LogOutput{Ops: []LogOp{}}
	err := s.withDB(ctx, func(db *journal.DB) error {
		ops, err := db.Ops(ctx, journal.LogQuery{Branch: s.cfg.Branch, Limit: in.Limit})
		if err != nil {
			return storeError(err)
		}
		for _, o := range ops {
			lo := LogOp{ID: o.ID, Kind: o.Kind, Description: o.Description, Status: o.Status, StartNS: o.Start, EndNS: o.End, Undoes: o.Undoes}
			for _, sn := range o.Snapshots {
				lo.Snapshots = append(lo.Snapshots, sn.ID.String())
			}
			out.Ops = append(out.Ops, lo)
		}
		return nil
	})
	return nil, out, err
}

// PathInput names a path, optionally at a revision.
type PathInput struct {
	Path     string `json:"path" jsonschema:"a path under /home/agent, e.g. /home/agent/ws/main.go or ws/main.go"`
	Rev      string `json:"rev,omitempty" jsonschema:"the revision to read (default: the branch's current state)"`
	MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"read_file: at most this many bytes (default 262144)"`
}

// BlameOutput is the changes of a path.
type BlameOutput struct {
	Changes   []journal.BlameLine `json:"changes"`
	Truncated bool                `json:"truncated"` // only the newest maxBlameLines
	// Forgotten lists stretches of history art forget removed: changes
	// there are not among Changes.
	Forgotten []journal.ForgottenRange `json:"forgotten,omitempty"`
}

func (s *Server) blame(ctx context.Context, _ *mcp.CallToolRequest, in PathInput) (*mcp.CallToolResult, BlameOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := BlameOutput{Changes: []journal.BlameLine{}}
	err := s.withDB(ctx, func(db *journal.DB) error {
		lines, err := db.Blame(ctx, s.cfg.Branch, guestPath(in.Path))
		if err != nil {
			return storeError(err)
		}
		if len(lines) > maxBlameLines {
			lines, out.Truncated = lines[len(lines)-maxBlameLines:], true
		}
		out.Changes = append(out.Changes, lines...)
		out.Forgotten, err = db.Forgotten(ctx, s.cfg.Branch)
		return err
	})
	return nil, out, err
}

// FileOutput is a file's content at a revision.
type FileOutput struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"`
	Binary    bool   `json:"binary"` // not UTF-8: content is empty
}

// capWriter keeps the first n bytes written to it.
type capWriter struct {
	buf []byte
	n   int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.n - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	if len(w.buf) >= w.n {
		return len(p), errFull
	}
	return len(p), nil
}

var errFull = errors.New("full")

func (s *Server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in PathInput) (*mcp.CallToolResult, FileOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := in.MaxBytes
	if limit <= 0 {
		limit = 256 << 10
	}
	limit = min(limit, 4<<20)
	out := FileOutput{Path: guestPath(in.Path)}
	err := s.withDB(ctx, func(db *journal.DB) error {
		ent, err := s.lookup(ctx, db, in)
		if err != nil {
			return err
		}
		if ent == nil || ent.Kind != cas.EntryFile {
			return toolError(execapi.CodeRevNotFound, "%s is not a file", out.Path)
		}
		out.Size = ent.Size
		w := &capWriter{n: int(limit)}
		if _, err := db.Objects().ReadFile(ctx, ent.Target, w); err != nil && !errors.Is(err, errFull) {
			return storeError(err)
		}
		out.Truncated = int64(len(w.buf)) < ent.Size
		if !utf8.Valid(w.buf) && !(out.Truncated && utf8.Valid(trimPartialRune(w.buf))) {
			out.Binary = true
			return nil
		}
		out.Content = string(w.buf)
		return nil
	})
	return nil, out, err
}

// trimPartialRune drops a rune cut by truncation.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// ListOutput is a directory at a revision.
type ListOutput struct {
	Path      string      `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"` // more than maxListEntries
}

// Bounds of what one tool result carries, whatever the store holds.
const (
	maxListEntries = 10000
	maxLogOps      = 1000
	maxBlameLines  = 1000
)

// ListEntry is one name in a directory.
type ListEntry struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // file, dir, symlink, fifo
	Size   int64  `json:"size"`
	Mode   string `json:"mode"` // octal permission bits
	Target string `json:"target,omitempty"`
}

func (s *Server) list(ctx context.Context, _ *mcp.CallToolRequest, in PathInput) (*mcp.CallToolResult, ListOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ListOutput{Path: guestPath(in.Path), Entries: []ListEntry{}}
	err := s.withDB(ctx, func(db *journal.DB) error {
		st, err := s.resolve(ctx, db, in.Rev)
		if err != nil {
			return err
		}
		id := st.Root
		if out.Path != "" {
			ent, err := db.Objects().LookupPath(ctx, st.Root, out.Path)
			if err != nil {
				return storeError(err)
			}
			if ent.Kind != cas.EntryDir {
				return toolError(execapi.CodeRevNotFound, "%s is not a directory", out.Path)
			}
			id = ent.Target
		}
		t, err := db.Objects().GetTree(ctx, id)
		if err != nil {
			return storeError(err)
		}
		for i := range t.Entries {
			if i == maxListEntries {
				out.Truncated = true
				break
			}
			e := &t.Entries[i]
			le := ListEntry{Name: string(e.Name), Kind: e.Kind.String(), Size: e.Size, Mode: fmt.Sprintf("%04o", e.Mode&0o7777)}
			if e.Kind == cas.EntrySymlink {
				le.Target = string(e.Link)
			}
			out.Entries = append(out.Entries, le)
		}
		return nil
	})
	return nil, out, err
}

func (s *Server) resolve(ctx context.Context, db *journal.DB, rev string) (journal.State, error) {
	if rev == "" {
		rev = s.cfg.Branch
	}
	st, err := db.Resolve(ctx, rev, s.cfg.Branch)
	if err != nil {
		return st, storeError(err)
	}
	return st, nil
}

func (s *Server) lookup(ctx context.Context, db *journal.DB, in PathInput) (*cas.Entry, error) {
	st, err := s.resolve(ctx, db, in.Rev)
	if err != nil {
		return nil, err
	}
	ent, err := db.Objects().LookupPath(ctx, st.Root, guestPath(in.Path))
	if err != nil {
		return nil, storeError(err)
	}
	return ent, nil
}

// guestPath accepts a path as the agent sees it (/home/agent/ws/f) or as
// the journal stores it (ws/f).
func guestPath(p string) string {
	const home = "/home/agent"
	if p == home || strings.HasPrefix(p, home+"/") {
		p = p[len(home):]
	}
	return strings.Trim(p, "/")
}
