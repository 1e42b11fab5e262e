package main

// The CLI's edges (issue 29): usage errors, unknown verbs, what a verb
// leaves behind, and small promises of the sandbox's environment.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A prune that frees nothing because of gc's grace period says so, and
// how to override it.
func TestForgetPruneNamesTheGracePeriod(t *testing.T) {
	ws, db := newWorkspace(t)
	writeFile(t, filepath.Join(ws, "big"), strings.Repeat("forget me ", 100000))
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	if err := os.Remove(filepath.Join(ws, "big")); err != nil {
		t.Fatal(err)
	}
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	out := mustArt(t, "forget", "-d", db, "--all", "--keep-last", "1", "--prune")
	if !strings.Contains(out, "written within the grace period (1h); --grace 0 frees them now") {
		t.Fatalf("forget --prune kept objects for the grace period without saying so:\n%s", out)
	}
	out = mustArt(t, "forget", "-d", db, "--all", "--keep-last", "1", "--prune", "--grace", "0")
	if strings.Contains(out, "grace period") {
		t.Fatalf("forget --prune --grace 0 still names a grace period:\n%s", out)
	}
}

// A direct-mode run leaves no .art behind in the workspace (it is made
// only to be covered read-only inside), and the agent still cannot
// write one; a user's own .art stays.
func TestRunDirectLeavesNoArtDir(t *testing.T) {
	ws, _ := runWorkspace(t)
	if os.Geteuid() == 0 {
		filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
	}
	r := mustRun(t, "-m", ws, "-i=false", "-q", "--", "sh", "-c", "test -d .art && echo covered; mkdir .art/config 2>/dev/null && echo planted; true")
	if r.stdout != "covered\n" {
		t.Fatalf("inside, .art: %q, want it present and unwritable", r.stdout)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".art")); !os.IsNotExist(err) {
		t.Fatalf("direct-mode run left %s/.art behind (%v)", ws, err)
	}
	if err := os.Mkdir(filepath.Join(ws, ".art"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "-m", ws, "-i=false", "-q", "--", "true")
	if _, err := os.Lstat(filepath.Join(ws, ".art")); err != nil {
		t.Fatalf("the user's own .art is gone: %v", err)
	}
}

// SHELL is set inside: tools that spawn $SHELL get a shell, not nologin.
func TestRunShellIsSet(t *testing.T) {
	ws, _ := runWorkspace(t)
	r := mustRun(t, "-m", ws, "-i=false", "-q", "--", "sh", "-c", `$SHELL -c 'echo "ok $0"'`)
	if r.stdout != "ok "+loginShell()+"\n" {
		t.Fatalf("$SHELL -c inside: %q, want it to run %s", r.stdout, loginShell())
	}
	r = mustRun(t, "-m", ws, "-i=false", "-q", "--env", "SHELL=/bin/dash", "--", "sh", "-c", `echo $SHELL`)
	if r.stdout != "/bin/dash\n" {
		t.Fatalf("--env SHELL=/bin/dash: SHELL inside %q", r.stdout)
	}
}

// blame of a path that never existed is not found (rc 3, like cat);
// a change no process made names the operation (a push).
func TestBlameUnknownPathAndPushOp(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	out, errs, code := art(t, "blame", "-d", db, "ws/nope")
	if code != exitNotFound || out != "" || !strings.Contains(errs, "blame ws/nope: no change recorded") {
		t.Fatalf("blame of a path that never existed: exit %d, stdout %q, stderr %q; want exit %d and a not-found line", code, out, errs, exitNotFound)
	}
	out = mustArt(t, "blame", "-d", db, "ws/main.py")
	if !strings.Contains(out, "(op 2: import push "+ws+")") || strings.Contains(out, "unknown process") {
		t.Fatalf("blame of a pushed file does not name the push:\n%s", out)
	}
}

// art mcp never dies on input: garbage between valid requests is
// answered -32700 (not JSON) or -32600 (not a JSON-RPC request, a batch,
// too long) and the server serves on; every reply owed is written, also
// at the end of input, and an error reply only after the replies owed to
// the requests before it. The real server process, fed through a pipe.
func TestMCPGarbageBetweenRequests(t *testing.T) {
	_, db := newWorkspace(t)
	ws := filepath.Join(filepath.Dir(db), "ws")
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`not json at all`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"id":7}`,
		`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		strings.Repeat("x", 17<<20),
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"log","arguments":{}}}`,
		`{"truncated": `, // the input ends mid-message
	}
	cmd := artCmd(t, "mcp", "-d", db, "-m", ws)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n"))
	r := exe(t, cmd)
	if r.code != 0 {
		t.Fatalf("art mcp exit %d on bad input\nstderr: %s", r.code, r.stderr)
	}
	type reply struct {
		ID    json.RawMessage
		Error *struct{ Code int }
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var m reply
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a reply that is not JSON: %q", l)
		}
		s := string(m.ID)
		if m.Error != nil {
			s += fmt.Sprintf(":%d", m.Error.Code)
		}
		got = append(got, s)
	}
	// Replies to requests may come in any order among themselves, but an
	// error reply follows the replies to every request before its line.
	want := []string{"1", "null:-32700", "2", "7:-32600", "null:-32600", "null:-32600", "null:-32600", "3", "4", "null:-32700"}
	if len(got) != len(want) {
		t.Fatalf("replies %v, want %v (requests among themselves in any order)\nstderr: %s", got, want, r.stderr)
	}
	at := map[string]int{}
	for i, s := range got {
		if _, ok := at[s]; !ok && !strings.Contains(s, ":") {
			at[s] = i
		}
	}
	for i, s := range got {
		if !strings.Contains(s, ":") {
			continue
		}
		// The error replies, in input order, each with the requests read before it.
		before := map[int][]string{1: {"1"}, 2: {"1", "2"}, 3: {"1", "2"}, 4: {"1", "2"}, 5: {"1", "2"}, 6: {"1", "2", "3", "4"}}
		n := 0
		for _, p := range got[:i] {
			if strings.Contains(p, ":") {
				n++
			}
		}
		for _, req := range before[n+1] {
			if j, ok := at[req]; !ok || j > i {
				t.Fatalf("error reply %s written before the reply owed to request %s: %v", s, req, got)
			}
		}
	}
	seen := map[string]bool{}
	for _, s := range got {
		seen[s] = true
	}
	for _, w := range want {
		if !seen[w] {
			t.Fatalf("no reply %s in %v", w, got)
		}
	}
}
