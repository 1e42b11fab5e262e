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
	if r.stdout != "ok "+loginShell(os.Getenv)+"\n" {
		t.Fatalf("$SHELL -c inside: %q, want it to run %s", r.stdout, loginShell(os.Getenv))
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

// Usage errors are git's: one line on stderr naming the help to read,
// nothing on stdout, exit 2 - a missing flag value and a missing store
// included; an unknown first word gets the verbs it may have meant.
func TestUsageErrors(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	t.Setenv("ART_DB", "")
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"log", "-d", db, "--bogus"}, "art: log: unknown flag --bogus (see art log --help)\n"},
		{[]string{"log", "-d", db, "-x"}, "art: log: unknown flag -x (see art log --help)\n"},
		{[]string{"run", "-d", db, "-m"}, "art: run: flag -m needs a value (see art run --help)\n"},
		{[]string{"log", "-d", db, "-n", "x"}, "art: log: invalid value \"x\" for flag -n: parse error (see art log --help)\n"},
		{[]string{"status"}, "art: status needs a store: -d FILE (or ART_DB) (see art status --help)\n"},
		{[]string{"policy", "suggest"}, "art: policy suggest needs a store: -d FILE (or ART_DB) (see art policy suggest --help)\n"},
		{[]string{"policy", "bogus"}, "art: policy: unknown subcommand 'bogus' (see art policy --help)\n"},
		{[]string{"checkout", "-d", db}, "art: checkout takes exactly one REV (see art checkout --help)\n"},
		{[]string{"-d", db, "-m", ws, "log"}, "art: log: unknown flag -m (see art log --help)\n"},
		{[]string{"stauts"}, "art: 'stauts' is not an art command. See 'art help'.\n\nThe most similar command is\n\tstatus\n"},
		{[]string{"help", "lgo"}, "art: 'lgo' is not an art command. See 'art help'.\n\nThe most similar command is\n\tlog\n"},
		{[]string{"-d", db, "brnch"}, "art: 'brnch' is not an art command. See 'art help'.\n\nThe most similar command is\n\tbranch\n"},
		{[]string{"zzzqqq"}, "art: 'zzzqqq' is not an art command. See 'art help'.\n"},
	} {
		out, errs, code := art(t, c.args...)
		if code != exitUsage || out != "" || errs != c.stderr {
			t.Errorf("art %s: exit %d, stdout %d bytes, stderr %q\nwant exit %d, no stdout, stderr %q", strings.Join(c.args, " "), code, len(out), errs, exitUsage, c.stderr)
		}
	}
	// Every verb's unknown flag: one line, no help text.
	app := newApp(&env{})
	for _, cmd := range app.Commands {
		if cmd.Hidden || cmd.Name == "help" {
			continue
		}
		out, errs, code := art(t, cmd.Name, "--no-such-flag")
		if want := "art: " + cmd.Name + ": unknown flag --no-such-flag (see art " + cmd.Name + " --help)\n"; code != exitUsage || out != "" || errs != want {
			t.Errorf("art %s --no-such-flag: exit %d, stdout %q, stderr %q; want exit 2 and %q", cmd.Name, code, out, errs, want)
		}
	}
}

// Global flags before the verb (art -d FILE log) mean the verb, as
// ART_DB does; the original form still runs a program, also one named
// like a verb; the first word is looked up on PATH.
func TestGlobalFlagsAndOriginalForm(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	if a, b := mustArt(t, "-d", db, "log", "--json"), mustArt(t, "log", "-d", db, "--json"); a != b || !strings.Contains(a, `"kind": "import"`) {
		t.Fatalf("art -d DB log --json:\n%s\nart log -d DB --json:\n%s", a, b)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-d", "x.db", "status", "--json"}, []string{"art", "status", "-d", "x.db", "--json"}},
		{[]string{"-d", "x.db", "-m", "ws", "--", "log"}, []string{"art", "run", "-d", "x.db", "-m", "ws", "--", "log"}},
		{[]string{"-m", "ws", "-i=false", "sh", "-c", "x"}, []string{"art", "run", "-m", "ws", "-i=false", "--", "sh", "-c", "x"}},
		{[]string{"-m", "ws", "ls", "-la"}, []string{"art", "run", "-m", "ws", "--", "ls", "-la"}},
		{[]string{"sh", "-c", "x"}, []string{"art", "run", "--", "sh", "-c", "x"}},
		{[]string{"./script"}, []string{"art", "run", "--", "./script"}},
		{[]string{}, []string{"art", "run"}},
		{[]string{"-m", "ws"}, []string{"art", "run", "-m", "ws"}},
	} {
		got, err := originalForm(newApp(&env{}), append([]string{"art"}, c.args...))
		if err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("art %s read as %q (%v), want %q", strings.Join(c.args, " "), got, err, c.want)
		}
	}
}

// The binary, as a user types it: an unknown verb starts no sandbox and
// leaves nothing behind in the current directory.
func TestUnknownVerbBinary(t *testing.T) {
	dir := t.TempDir()
	cmd := artCmd(t, "stauts")
	cmd.Dir = dir
	r := exe(t, cmd)
	if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, "art: 'stauts' is not an art command.") {
		t.Fatalf("art stauts: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("art stauts left %v in the current directory", ents)
	}
}
