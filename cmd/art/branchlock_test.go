package main

import (
	"bufio"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
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
	// A branch with a change to merge into main.
	sideWS := filepath.Join(t.TempDir(), "sidews")
	writeFile(t, filepath.Join(sideWS, "s.txt"), "s\n")
	mustRun(t, "branch", "-d", db, "side")
	mustRun(t, "push", "-q", "-m", sideWS, "-d", db, "--branch", "side")
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
		{"push -m", []string{"push", "-q", "-m", other, "-d", db, "--branch", "main"}, 1, inUse},
		{"second run", []string{"run", "-m", ws, "-d", db, "-i=false", "-q", "--", "true"}, 1, inUse},
		{"mount", []string{"mount", "-d", db, t.TempDir()}, 1, inUse},
		{"merge into it", []string{"merge", "-d", db, "side"}, 1, inUse},
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
	mustRun(t, "merge", "-d", db, "side")
	if got := mustRun(t, "cat", "-d", db, "main:sidews/s.txt").stdout; got != "s\n" {
		t.Errorf("main:sidews/s.txt after the merge: %q", got)
	}
	mustRun(t, "checkout", "-d", db, "main~1")
	mustRun(t, "branch", "-d", db, "--rename", "copy", "copy2")
	mustRun(t, "branch", "-d", db, "--delete", "copy2")
}

// TestOverlayLogHeldUntilCommandEnds: what the overlay logs while a
// command runs (the detail behind an EIO) reaches art's stderr only after
// the command has ended, never in the middle of its output (issue 28, case
// 3: "art overlay: path of inode 2: sql: no rows in result set" on the
// agent's terminal). The store is changed behind art's back - the one way
// left to pull a held branch out from under a session.
func TestOverlayLogHeldUntilCommandEnds(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	base := hostVisibleDir(t)
	ws := populate(t, base)
	db := filepath.Join(base, "ws.db")
	mustRun(t, "push", "-q", "-m", ws, "-d", db)
	signal := filepath.Join(base, "signal")
	cmd := artCmd(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--timeout", "120s", "--", "sh", "-c", fmt.Sprintf(`
echo ready >&2
until test -e %s; do sleep 0.05; done
cat main.py; echo new > new.txt; ls
echo END`, signal))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !waitUntil(60*time.Second, func() bool { return strings.Contains(out.String(), "ready") }) {
		t.Fatalf("the command did not start: %s", out.String())
	}
	raw, err := sql.Open("sqlite3", "file:"+db+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE branches SET deleted_ns = 1 WHERE name = 'main'`); err != nil {
		t.Fatal(err)
	}
	writeFile(t, signal, "")
	cmd.Wait()
	got := out.String()
	end := strings.Index(got, "END\n")
	if end < 0 || !strings.Contains(got, "art overlay: ") {
		t.Fatalf("want the command's END, then art overlay lines:\n%s", got)
	}
	t.Logf("%s", got)
	if during := got[:end]; strings.Contains(during, "art overlay") || strings.Contains(during, "art fuse") {
		t.Errorf("overlay log lines while the command ran:\n%s", got)
	}
	if regexp.MustCompile(`(?m)^\d{4}/\d\d/\d\d `).MatchString(got) {
		t.Errorf("a Go log line (with its timestamp) in art run's output:\n%s", got)
	}
}

// TestBranchDeleteSaysHowToRestore (issue 28, case 7): the default branch
// is deleted (or renamed) only with --force, and every delete prints the
// head it retired and a command that brings the branch back as it was.
func TestBranchDeleteSaysHowToRestore(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	mustArt(t, "branch", "-d", db, "try", "--from", "main")
	// try's head is not a snapshot (restored from @SEQ), main's is.
	if _, errs, code := art(t, "checkout", "-d", db, "--branch", "try", "@2"); code != 0 {
		t.Fatalf("checkout: %s", errs)
	}
	for _, args := range [][]string{{"--delete", "main"}, {"--rename", "main", "other"}} {
		_, errs, code := art(t, append([]string{"branch", "-d", db}, args...)...)
		if code != 2 || !strings.Contains(errs, "refusing to") || !strings.Contains(errs, "--force") {
			t.Errorf("branch %s: exit %d, stderr %q; want 2, refused, naming --force", strings.Join(args, " "), code, errs)
		}
	}
	for _, name := range []string{"try", "main"} {
		before := mustArt(t, "ls", "-d", db, "-r", name)
		out, errs, code := art(t, "branch", "-d", db, "--delete", name, "--force")
		if code != 0 || !strings.HasPrefix(out, "deleted branch "+name+" at ") {
			t.Fatalf("delete %s: exit %d\nstdout: %s\nstderr: %s", name, code, out, errs)
		}
		restore, ok := strings.CutPrefix(strings.TrimSpace(errs), "restore it with: art ")
		if !ok {
			t.Fatalf("delete %s: stderr %q, want the command that restores it", name, errs)
		}
		if name == "try" && !strings.Contains(restore, "--from @") {
			t.Errorf("restore of try: %q, want --from @SEQ (its head is no snapshot)", restore)
		}
		if _, _, code := art(t, "ls", "-d", db, name); code != 3 {
			t.Errorf("ls of the deleted %s: exit %d, want 3", name, code)
		}
		mustArt(t, strings.Fields(restore)...)
		if after := mustArt(t, "ls", "-d", db, "-r", name); after != before {
			t.Errorf("%s after its restore:\n%s\nwant:\n%s", name, after, before)
		}
	}
}
