package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves a Server over in-memory transports: the history tools on
// a real store made by a push, and run on plain host processes (the
// sandboxed session is cmd/art's TestMCPSession). It counts opens and
// releases of the session.
func connect(t *testing.T) (*mcp.ClientSession, *int, *int) {
	t.Helper()
	cs, opens, releases, _ := connectStore(t)
	return cs, opens, releases
}

// connectStore is connect, also returning the store's path.
func connectStore(t *testing.T) (*mcp.ClientSession, *int, *int, string) {
	t.Helper()
	ctx := context.Background()
	base := t.TempDir()
	ws, store := filepath.Join(base, "ws"), filepath.Join(base, "s.db")
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "src", "a.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(ctx, store, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	opens, releases := new(int), new(int)
	s := New(Config{
		Open: func(context.Context, string) (execapi.Executor, func() error, error) {
			*opens++
			return execapi.NewProcessExecutor(ws, nil), func() error { *releases++; return nil }, nil
		},
		DB:     func(ctx context.Context) (*journal.DB, error) { return journal.Open(ctx, store, journal.Options{}) },
		Branch: journal.DefaultBranch,
	})
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		<-done
	})
	return cs, opens, releases, store
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func errText(res *mcp.CallToolResult) string {
	if !res.IsError || len(res.Content) == 0 {
		return ""
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestHistoryTools: read_file, list, snapshot, diff, log and checkout on a
// store, with the exec API's codes for what is not there.
func TestHistoryTools(t *testing.T) {
	cs, opens, releases := connect(t)
	var file FileOutput
	call(t, cs, "read_file", map[string]any{"path": "/home/agent/ws/src/a.go"}, &file)
	if file.Content != "package a\n" || file.Truncated || file.Binary {
		t.Fatalf("read_file: %+v", file)
	}
	call(t, cs, "read_file", map[string]any{"path": "ws/src/a.go", "max_bytes": 4}, &file)
	if file.Content != "pack" || !file.Truncated {
		t.Fatalf("read_file max_bytes 4: %+v", file)
	}
	var list ListOutput
	call(t, cs, "list", map[string]any{"path": "ws"}, &list)
	if len(list.Entries) != 1 || list.Entries[0].Name != "src" || list.Entries[0].Kind != "dir" {
		t.Fatalf("list: %+v", list)
	}
	var snap SnapshotOutput
	call(t, cs, "snapshot", map[string]any{"message": "m"}, &snap)
	if len(snap.ID) != 64 {
		t.Fatalf("snapshot: %+v", snap)
	}
	var diff DiffOutput
	call(t, cs, "diff", map[string]any{"from": snap.ID}, &diff)
	if len(diff.Changes) != 0 {
		t.Fatalf("diff of a state with itself: %+v", diff)
	}
	var log LogOutput
	call(t, cs, "log", map[string]any{}, &log)
	if len(log.Ops) < 2 || log.Ops[0].Kind != "snapshot" {
		t.Fatalf("log: %+v", log)
	}
	var moved MoveOutput
	if res := call(t, cs, "checkout", map[string]any{"rev": snap.ID}, &moved); res.IsError || moved.Root == "" {
		t.Fatalf("checkout: %s %+v", errText(res), moved)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"read_file", map[string]any{"path": "ws/nosuch"}, "E6002"},
		{"read_file", map[string]any{"path": "ws/src"}, "E6002"},
		{"list", map[string]any{"path": "ws/src/a.go"}, "E6002"},
		{"diff", map[string]any{"from": "nosuch"}, "E6002"},
		{"checkout", map[string]any{"rev": "@999999"}, "E6"},
		{"run", map[string]any{"command": []string{"true"}, "shell": "true"}, "E1001"},
		{"run", map[string]any{"shell": "true", "timeout_sec": -1}, "E1015"},
	} {
		if got := errText(call(t, cs, c.tool, c.args, nil)); !strings.HasPrefix(got, c.code) {
			t.Errorf("%s %v: error %q, want code %s", c.tool, c.args, got, c.code)
		}
	}
	// run opens the session once; a checkout ends it, the next run opens
	// another.
	var r execapi.Response
	call(t, cs, "run", map[string]any{"shell": "echo hi"}, &r)
	call(t, cs, "run", map[string]any{"command": []string{"sh", "-c", "exit 4"}}, &r)
	if r.ExitCode != 4 || *opens != 1 {
		t.Fatalf("run: exit %d, %d opens", r.ExitCode, *opens)
	}
	call(t, cs, "checkout", map[string]any{"rev": snap.ID}, nil)
	if *releases != 1 {
		t.Fatalf("checkout did not end the session: %d releases", *releases)
	}
	call(t, cs, "run", map[string]any{"shell": "echo again"}, &r)
	if r.Stdout != "again\n" || *opens != 2 {
		t.Fatalf("run after checkout: %+v, %d opens", r, *opens)
	}
}

// TestToolErrorsFollowTheCLI: a tool's error carries the exec API's code
// of the error's class (execapi.CodeOf), the class the CLI's exit status
// comes from: a bad revision is the caller's to fix (E1001, the CLI's
// usage), an ambiguous one names no single state (E6002, the CLI's not
// found). Before the one table both were E6001.
func TestToolErrorsFollowTheCLI(t *testing.T) {
	cs, _, _ := connect(t)
	for _, c := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"diff", map[string]any{"from": "main~x"}, "E1001"},
		{"read_file", map[string]any{"path": "ws/src/a.go", "rev": "main~x"}, "E1001"},
		{"read_file", map[string]any{"path": "ws/src/a.go", "rev": "nosuch"}, "E6002"},
		{"list", map[string]any{"path": "ws/nosuch"}, "E6002"},
	} {
		if got := errText(call(t, cs, c.tool, c.args, nil)); !strings.HasPrefix(got, c.code+": ") {
			t.Errorf("%s %v: error %q, want code %s", c.tool, c.args, got, c.code)
		}
	}
	for _, c := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("resolve 1234: %w", journal.ErrAmbiguous), "E6002"},
		{fmt.Errorf("resolve x: %w", journal.ErrBadRev), "E1001"},
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.ENOENT}, "E6002"},
		{fmt.Errorf("read: %w", cas.ErrCorrupt), "E6001"},
		{errors.New("disk on fire"), "E6001"},
	} {
		if got := storeError(c.err).Error(); got != c.code+": "+c.err.Error() {
			t.Errorf("storeError(%v) = %q, want code %s", c.err, got, c.code)
		}
	}
}

// TestMergeTool: an attempt on another branch folds back into the
// session's branch through the merge tool, with art merge --json's result
// shape; overlapping edits are refused (applied false, the path listed)
// and change nothing; markers then writes git's markers; a missing source
// is E6002, a bad mode E1001.
func TestMergeTool(t *testing.T) {
	cs, _, _, store := connectStore(t)
	ctx := context.Background()
	// write sets ws/src/a.go on branch, straight in the store (the tools
	// that change files run commands in a sandbox).
	write := func(branch, data string) {
		t.Helper()
		db, err := journal.Open(ctx, store, journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = db.Do(ctx, branch, "run", "edit", func(tx *journal.Tx) error {
			n, err := tx.Resolve([]byte("ws/src/a.go"))
			if err != nil {
				return err
			}
			id, _, err := tx.Objects().PutFile(ctx, strings.NewReader(data))
			if err != nil {
				return err
			}
			_, err = tx.Write(n.Ino, id, int64(len(data)), 1, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var br BranchOutput
	call(t, cs, "branch", map[string]any{"create": "try"}, &br)
	call(t, cs, "branch", map[string]any{"create": "other"}, &br)
	write("try", "package a\n\nfunc A() {}\n")

	var out MergeOutput
	if res := call(t, cs, "merge", map[string]any{"source": "try"}, &out); res.IsError || !out.Applied || out.Conflicted ||
		len(out.Merged) != 1 || out.Merged[0].Path != "ws/src/a.go" || out.Merged[0].Action != "take" || out.Snapshot == nil || out.Base == nil {
		t.Fatalf("merge try: %s %+v", errText(res), out)
	}
	var file FileOutput
	call(t, cs, "read_file", map[string]any{"path": "ws/src/a.go"}, &file)
	if file.Content != "package a\n\nfunc A() {}\n" {
		t.Fatalf("after the merge a.go = %q", file.Content)
	}
	if res := call(t, cs, "merge", map[string]any{"source": "try"}, &out); res.IsError || !out.UpToDate {
		t.Fatalf("merge try again: %s %+v", errText(res), out)
	}

	// other changed the same line: refused, nothing changed.
	write("other", "package b\n")
	var log1, log2 LogOutput
	call(t, cs, "log", map[string]any{}, &log1)
	if res := call(t, cs, "merge", map[string]any{"source": "other"}, &out); res.IsError || out.Applied ||
		len(out.Conflicts) != 1 || out.Conflicts[0].Path != "ws/src/a.go" || out.Conflicts[0].Reason != "overlapping changes" {
		t.Fatalf("merge other: %s %+v", errText(res), out)
	}
	call(t, cs, "log", map[string]any{}, &log2)
	if len(log1.Ops) != len(log2.Ops) {
		t.Fatal("a refused merge recorded an op")
	}
	if res := call(t, cs, "merge", map[string]any{"source": "other", "conflict": "markers"}, &out); res.IsError || !out.Applied || !out.Conflicted ||
		out.Conflicts[0].Resolution != "markers" {
		t.Fatalf("merge other with markers: %s %+v", errText(res), out)
	}
	call(t, cs, "read_file", map[string]any{"path": "ws/src/a.go"}, &file)
	if !strings.HasPrefix(file.Content, "<<<<<<< main\n") || !strings.Contains(file.Content, "||||||| ") || !strings.HasSuffix(file.Content, ">>>>>>> other\n") {
		t.Fatalf("markers: a.go = %q", file.Content)
	}

	if got := errText(call(t, cs, "merge", map[string]any{"source": "nosuch"}, nil)); !strings.HasPrefix(got, "E6002") {
		t.Errorf("merge of a missing source: %q", got)
	}
	if got := errText(call(t, cs, "merge", map[string]any{"source": "try", "conflict": "maybe"}, nil)); !strings.HasPrefix(got, "E1001") {
		t.Errorf("merge with a bad conflict mode: %q", got)
	}
}
