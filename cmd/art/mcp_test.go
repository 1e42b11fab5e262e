package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCall calls tool with args and decodes its structured result into
// out (when not nil). It returns the result.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", tool, b, err)
		}
	}
	if testing.Verbose() {
		a, _ := json.Marshal(args)
		r, _ := json.Marshal(res.StructuredContent)
		if len(r) > 300 {
			r = append(r[:300], "..."...)
		}
		text := ""
		if res.IsError && len(res.Content) > 0 {
			text = " isError: " + res.Content[0].(*mcp.TextContent).Text
		}
		t.Logf("-> %s %s\n<- %s%s", tool, a, r, text)
	}
	return res
}

// TestMCPSession drives art mcp with the SDK's own client as a harness
// would: run a build, snapshot, break the tree, check the snapshot out,
// and read, diff, blame and log the history; every tool has an input
// schema, and malformed calls get clean errors without ending the server.
func TestMCPSession(t *testing.T) {
	testutil.Require(t, "bwrap")
	ws, db := overlayWorkspace(t)
	var stderr bytes.Buffer
	cmd := artCmd(t, "mcp", "-d", db, "-m", ws)
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "art-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %s)", err, stderr.String())
	}
	closed := false
	defer func() {
		if !closed {
			cs.Close()
		}
	}()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s lacks a description or an input schema", tl.Name)
		}
		if s, _ := json.Marshal(tl.InputSchema); !strings.Contains(string(s), `"type":"object"`) {
			t.Errorf("tool %s: input schema %s is not an object schema", tl.Name, s)
		}
	}
	if got, want := strings.Join(names, ","), "blame,branch,checkout,diff,list,log,merge,read_file,run,snapshot,undo"; got != want {
		t.Fatalf("tools %s, want %s", got, want)
	}

	type runOut struct {
		ExitCode       int    `json:"exit_code"`
		Stdout         string `json:"stdout"`
		SnapshotBefore string `json:"snapshot_before"`
		SnapshotAfter  string `json:"snapshot_after"`
		Changes        struct {
			Added int `json:"added"`
		} `json:"changes"`
	}
	var r runOut
	res := mcpCall(t, cs, "run", map[string]any{"shell": "mkdir -p build && echo 'package main' > build/main.go && echo built"}, &r)
	if res.IsError || r.ExitCode != 0 || r.Stdout != "built\n" || r.SnapshotAfter == "" || r.Changes.Added < 2 {
		t.Fatalf("run build: %+v isError %v (stderr %s)", r, res.IsError, stderr.String())
	}
	beforeBuild := r.SnapshotBefore
	var snap struct{ ID string }
	mcpCall(t, cs, "snapshot", map[string]any{"message": "good build"}, &snap)
	if len(snap.ID) != 64 {
		t.Fatalf("snapshot id %q", snap.ID)
	}
	res = mcpCall(t, cs, "run", map[string]any{"command": []string{"sh", "-c", "rm -rf build && echo broken > main.py && exit 3"}}, &r)
	if res.IsError || r.ExitCode != 3 {
		t.Fatalf("run break: %+v isError %v", r, res.IsError)
	}
	var moved struct{ Root string }
	if res := mcpCall(t, cs, "checkout", map[string]any{"rev": snap.ID}, &moved); res.IsError || moved.Root == "" {
		t.Fatalf("checkout: %+v", res)
	}
	mcpCall(t, cs, "run", map[string]any{"shell": "cat build/main.go main.py"}, &r)
	if r.ExitCode != 0 || r.Stdout != "package main\nprint('hello')\n" {
		t.Fatalf("after checkout the sandbox sees %q (exit %d)", r.Stdout, r.ExitCode)
	}
	var file struct{ Content string }
	mcpCall(t, cs, "read_file", map[string]any{"path": "/home/agent/ws/main.py", "rev": r.SnapshotAfter}, &file)
	if file.Content != "print('hello')\n" {
		t.Fatalf("read_file: %q", file.Content)
	}
	var diff struct {
		Changes []struct{ Path, Kind string }
	}
	mcpCall(t, cs, "diff", map[string]any{"from": beforeBuild, "to": snap.ID}, &diff)
	if !strings.Contains(fmt.Sprint(diff.Changes), "ws/build/main.go A") {
		t.Fatalf("diff from before the build: %+v", diff.Changes)
	}
	var blame struct {
		Changes []struct {
			Argv []string
			Kind string
		}
	}
	mcpCall(t, cs, "blame", map[string]any{"path": "ws/build/main.go"}, &blame)
	if len(blame.Changes) == 0 {
		t.Fatal("blame: no change of build/main.go")
	}
	var list struct {
		Entries []struct{ Name, Kind string }
	}
	mcpCall(t, cs, "list", map[string]any{"path": "ws"}, &list)
	if !strings.Contains(fmt.Sprint(list.Entries), "build dir") {
		t.Fatalf("list ws: %+v", list.Entries)
	}
	var log struct {
		Ops []struct {
			Kind   string
			Status *int
		}
	}
	mcpCall(t, cs, "log", map[string]any{"limit": 10}, &log)
	kinds := ""
	for _, o := range log.Ops {
		kinds += o.Kind + " "
	}
	if !strings.Contains(kinds, "checkout") || !strings.Contains(kinds, "exec") {
		t.Fatalf("log: %s", kinds)
	}
	if res := mcpCall(t, cs, "undo", map[string]any{}, nil); res.IsError {
		t.Fatalf("undo: %+v", res.Content)
	}

	// A parallel attempt: a branch from the good build, the session moved
	// onto it; what it writes is not on main.
	var br struct {
		Current  string
		Branches []struct{ Name string }
	}
	if res := mcpCall(t, cs, "branch", map[string]any{"create": "attempt2", "from": snap.ID, "switch": "attempt2"}, &br); res.IsError || br.Current != "attempt2" || len(br.Branches) != 2 {
		t.Fatalf("branch: %+v %+v", br, res.Content)
	}
	mcpCall(t, cs, "run", map[string]any{"shell": "echo x > only-here && ls build", "limits": map[string]any{"max_pids": 64, "memory_mb": 512}}, &r)
	if r.ExitCode != 0 || r.Stdout != "main.go\n" {
		t.Fatalf("run on attempt2: %+v", r)
	}
	if res := mcpCall(t, cs, "read_file", map[string]any{"path": "ws/only-here", "rev": "main"}, nil); !res.IsError {
		t.Fatal("a file written on attempt2 is on main")
	}
	mcpCall(t, cs, "branch", map[string]any{"switch": "main"}, &br)
	mcpCall(t, cs, "run", map[string]any{"shell": "test ! -e only-here"}, &r)
	if br.Current != "main" || r.ExitCode != 0 {
		t.Fatalf("back on main: %+v, exit %d", br, r.ExitCode)
	}

	// Malformed calls: clean errors, the server stays up.
	for _, c := range []struct {
		tool string
		args any
		code string
	}{
		{"run", map[string]any{}, "E1010"},
		{"run", map[string]any{"command": []string{"nosuchcommand-xyz"}}, "E3001"},
		{"checkout", map[string]any{"rev": "nosuch"}, "E6002"},
		{"read_file", map[string]any{"path": "ws/nosuch"}, "E6002"},
	} {
		res := mcpCall(t, cs, c.tool, c.args, nil)
		if !res.IsError || len(res.Content) == 0 || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, c.code) {
			t.Errorf("%s %v: want a tool error %s, got %+v", c.tool, c.args, c.code, res.Content)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuchtool"}); err == nil {
		t.Error("an unknown tool was not refused")
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "checkout", Arguments: map[string]any{"rev": 7}}); err == nil {
		if res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "checkout", Arguments: map[string]any{"rev": 7}}); res == nil || !res.IsError {
			t.Error("an argument of the wrong type was accepted")
		}
	}
	mcpCall(t, cs, "run", map[string]any{"shell": "true"}, &r)
	if r.ExitCode != 0 {
		t.Fatalf("the server did not survive the malformed calls: %+v", r)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v (stderr %s)", err, stderr.String())
	}
	closed = true
	if strings.Contains(stderr.String(), "panic") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	if _, err := os.Stat(ws); err != nil {
		t.Fatal(err)
	}
}
