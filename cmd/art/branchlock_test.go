package main

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
)

// TestBranchMovingVerbsRefuseLiveSession runs every verb that moves or
// retires a branch against a branch a live art run holds (issue 28, case
// 3: a checkout was accepted and the agent's next create failed with EIO,
// its listing empty, a Go log line on its terminal). Each is refused with
// the message a second art run gets, exit 1, and the agent still sees and
// writes its files afterwards; verbs that do not change the branch's tree
// (forget, snapshot, pull -m) go ahead without harming it.
func TestBranchMovingVerbsRefuseLiveSession(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	base := hostVisibleDir(t)
	ws := populate(t, base)
	db := filepath.Join(base, "ws.db")
	mustRun(t, "push", "-q", "-m", ws, "-d", db)
	mustRun(t, "snapshot", "-d", db, "-m", "second")
	// A store to pull main from, and to push main into this one from.
	remote := filepath.Join(t.TempDir(), "remote.db")
	mustRun(t, "push", "-d", db, remote)
	other := filepath.Join(t.TempDir(), "other")
	writeFile(t, filepath.Join(other, "x.txt"), "x\n")
	mustRun(t, "push", "-q", "-m", other, "-d", remote)
	signal := filepath.Join(base, "signal")

	cmd := artCmd(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--timeout", "120s", "--", "sh", "-c", fmt.Sprintf(`
echo agent > agent.txt
echo ready
until test -e %s; do sleep 0.05; done
echo "ls: $(ls | tr '\n' ' ')"
cat main.py agent.txt
echo after > after.txt && echo wrote after`, signal))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	ready := make(chan bool, 1)
	go func() { ready <- lines.Scan() && lines.Text() == "ready" }()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("the agent did not start: %s", errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the agent did not start: %s", errb.String())
	}

	inUse := "branch main of " + db + " is in use by another art run"
	for _, tc := range []struct {
		name string
		args []string
		code int    // 1: refused
		want string // in stderr
	}{
		{"checkout", []string{"checkout", "-d", db, "main~1"}, 1, inUse},
		{"undo", []string{"undo", "-d", db}, 1, inUse},
		{"branch --delete", []string{"branch", "-d", db, "--delete", "main", "--force"}, 1, inUse},
		{"branch --rename", []string{"branch", "-d", db, "--rename", "main", "renamed", "--force"}, 1, inUse},
		{"pull -d REMOTE", []string{"pull", "-d", db, remote, "main", "--force"}, 1, inUse},
		{"push REMOTE into it", []string{"push", "-d", remote, db, "main", "--force"}, 1, inUse},
		{"push -m", []string{"push", "-q", "-m", other, "-d", db, "--branch", "main"}, 1, "is in use by another art run"},
		{"second run", []string{"run", "-m", ws, "-d", db, "-i=false", "-q", "--", "true"}, 1, inUse},
		{"mount", []string{"mount", "-d", db, t.TempDir()}, 1, inUse},
		// Not moves of the tree: allowed, and harmless to the agent.
		{"forget", []string{"forget", "-d", db, "-b", "main", "--keep-last", "1"}, 0, ""},
		{"snapshot", []string{"snapshot", "-d", db, "-m", "while running"}, 0, ""},
		{"branch from it", []string{"branch", "-d", db, "copy", "--from", "main"}, 0, ""},
	} {
		r := artRun(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
		if tc.code == 1 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s: more than one line on stderr: %q", tc.name, r.stderr)
		}
	}

	writeFile(t, signal, "")
	var agent []string
	for lines.Scan() {
		agent = append(agent, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("art run: %v\n%s", err, errb.String())
	}
	got := strings.Join(agent, "\n")
	if want := "ls: agent.txt main.py \nprint('hello')\nagent\nwrote after"; got != want {
		t.Errorf("the agent after the refused verbs printed:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(errb.String(), "art overlay") || strings.Contains(errb.String(), "Input/output") {
		t.Errorf("art run's stderr: %s", errb.String())
	}
	if got := mustRun(t, "cat", "-d", db, "main:ws/after.txt").stdout; got != "after\n" {
		t.Errorf("main:ws/after.txt: %q", got)
	}
	// Once the session has ended, the same verbs work.
	mustRun(t, "checkout", "-d", db, "main~1")
	mustRun(t, "branch", "-d", db, "--rename", "copy", "copy2")
	mustRun(t, "branch", "-d", db, "--delete", "copy2")
}
