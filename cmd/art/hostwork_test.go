package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

func readHost(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPullKeepsHostWork is issue 28's case 1, run as written: after an
// agent run, a host edit and a host-only file are refused by pull -m
// (named, rc 1, the host untouched); --force records them first, as an
// operation of their own, and art undo then pull brings them back.
func TestPullKeepsHostWork(t *testing.T) {
	ws, db := overlayWorkspace(t)
	writeFile(t, filepath.Join(ws, "a"), "a\n")
	writeFile(t, filepath.Join(ws, "b"), "b\n")
	mustRun(t, "push", "-m", ws, "-d", db, "-q")
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", "echo agent >> a")
	writeFile(t, filepath.Join(ws, "b"), "b\nprecious\n")
	writeFile(t, filepath.Join(ws, "hostnew"), "x\n")

	before := testutil.DescribeTree(t, ws, testutil.TreeOptions{DirMTimes: true})
	r := artRun(t, "pull", "-m", ws, "-d", db)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("pull over host changes: exit %d, stdout %q, stderr %q; want 1 and nothing on stdout", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"ws/b (changed)", "ws/hostnew (new)", "(hint: art push first, or --force)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal %q does not say %q", r.stderr, want)
		}
	}
	if n := strings.Count(r.stderr, "\n"); n != 1 {
		t.Errorf("refusal is %d lines, want 1: %q", n, r.stderr)
	}
	if after := testutil.DescribeTree(t, ws, testutil.TreeOptions{DirMTimes: true}); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused pull changed the host:\n%v\nwas\n%v", after, before)
	}

	r = mustRun(t, "pull", "-m", ws, "-d", db, "--force")
	if !strings.Contains(r.stderr, "kept the host's 2 changes") || !strings.Contains(r.stderr, "art undo -d") {
		t.Errorf("pull --force said %q; want it to name what it kept and how to get it back", r.stderr)
	}
	if got, want := readHost(t, filepath.Join(ws, "a")), "a\nagent\n"; got != want {
		t.Errorf("a = %q after pull --force, want the agent's %q", got, want)
	}
	if got := readHost(t, filepath.Join(ws, "b")); got != "b\n" {
		t.Errorf("b = %q after pull --force, want the branch's", got)
	}
	if got := readHost(t, filepath.Join(ws, "hostnew")); got != "<none>" {
		t.Errorf("hostnew = %q after pull --force, want it gone", got)
	}
	// The host's work is in history: undo the checkout back, pull again.
	mustRun(t, "undo", "-d", db)
	mustRun(t, "pull", "-m", ws, "-d", db, "-q")
	for p, want := range map[string]string{"a": "a\nagent\n", "b": "b\nprecious\n", "hostnew": "x\n"} {
		if got := readHost(t, filepath.Join(ws, p)); got != want {
			t.Errorf("%s = %q after undo and pull, want %q", p, got, want)
		}
	}
	// And a pull that finds nothing changed on the host goes through.
	mustRun(t, "pull", "-m", ws, "-d", db, "-q")
}

// TestPushAppliesHostChangesOnTopOfTheBranch is issue 28's case 2: push
// -m after an agent run keeps the agent's changes (the capture's rule);
// --replace makes the branch equal to the host and names what it drops,
// which art undo brings back.
func TestPushAppliesHostChangesOnTopOfTheBranch(t *testing.T) {
	ws, db := overlayWorkspace(t)
	writeFile(t, filepath.Join(ws, "a"), "a\n")
	writeFile(t, filepath.Join(ws, "b"), "b\n")
	mustRun(t, "push", "-m", ws, "-d", db, "-q")
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", "echo agent >> a; echo new > agentnew; rm b")
	writeFile(t, filepath.Join(ws, "hostfile"), "h\n")

	r := mustRun(t, "push", "-m", ws, "-d", db)
	if !strings.Contains(r.stdout, "Workspace name: ws\nFiles will be stored under: /ws/\n") || !strings.Contains(r.stdout, "FILE /ws/hostfile (2 bytes, ino ") {
		t.Errorf("push lost the original's output lines:\n%s", r.stdout)
	}
	branch := func() map[string]string {
		got := map[string]string{}
		for _, p := range []string{"a", "b", "agentnew", "hostfile"} {
			out, _, code := art(t, "cat", "-d", db, "main:ws/"+p)
			if code != 0 {
				out = "<none>"
			}
			got[p] = out
		}
		return got
	}
	want := map[string]string{"a": "a\nagent\n", "b": "<none>", "agentnew": "new\n", "hostfile": "h\n"}
	if got := branch(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after push -m: branch %v, want %v (the agent's work kept, the host's file added)", got, want)
	}

	r = mustRun(t, "push", "-m", ws, "-d", db, "--replace")
	for _, w := range []string{"dropped 3 changes", "/ws/a", "/ws/b", "/ws/agentnew", "art undo -d"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("push --replace said %q; want %q in it", r.stderr, w)
		}
	}
	want = map[string]string{"a": "a\n", "b": "b\n", "agentnew": "<none>", "hostfile": "h\n"}
	if got := branch(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after push --replace: branch %v, want the host's %v", got, want)
	}
	mustRun(t, "undo", "-d", db)
	want = map[string]string{"a": "a\nagent\n", "b": "<none>", "agentnew": "new\n", "hostfile": "h\n"}
	if got := branch(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after undo: branch %v, want %v", got, want)
	}
}

// TestCaptureRefusesSurprisingDirectories is issue 28's case 9: with -m
// left to its default (the current directory), art refuses to capture /,
// the home directory and a directory holding the store, in one line with
// rc 2; named with -m, the same directory is captured, and the first
// capture says how many files and bytes it took.
func TestCaptureRefusesSurprisingDirectories(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "secret\n")
	proj := filepath.Join(t.TempDir(), "proj")
	writeFile(t, filepath.Join(proj, "main.go"), "package main\n")
	other := t.TempDir()
	in := func(dir string, args ...string) runOut {
		cmd := artCmd(t, args...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "HOME="+home, "SUDO_USER=")
		return exe(t, cmd)
	}
	for _, tc := range []struct {
		name, dir string
		args      []string
		why       string
	}{
		{"root", "/", []string{"push", "-d", filepath.Join(other, "r.db"), "-q"}, "(the root directory)"},
		{"home, art run", home, []string{"run", "-d", filepath.Join(other, "h.db"), "-i=false", "--", "true"}, "(a home directory)"},
		{"home, art push", home, []string{"push", "-d", filepath.Join(other, "h.db"), "-q"}, "(a home directory)"},
		{"the store's directory", proj, []string{"push", "-d", "proj.db", "-q"}, "(it holds the store proj.db)"},
		{"the store below it", filepath.Dir(proj), []string{"exec", "-d", "proj/x.db", "--json"}, "(it holds the store proj/x.db)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := in(tc.dir, tc.args...)
			if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
				!strings.Contains(r.stderr, tc.why) || !strings.Contains(r.stderr, "(hint: name the workspace with -m DIR") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want rc 2 and one line saying %s with a hint", r.code, r.stdout, r.stderr, tc.why)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(other, "h.db")); err == nil {
		t.Error("a refused capture created the store")
	}
	if _, err := os.Stat(filepath.Join(proj, "proj.db")); err == nil {
		t.Error("a refused capture created the store")
	}
	// Named explicitly, it is taken; the first capture says what it took.
	r := in(home, "push", "-m", ".", "-d", filepath.Join(other, "h.db"), "-q")
	if r.code != 0 || !strings.Contains(r.stderr, "first capture of .: 1 file, 7 B") {
		t.Fatalf("push -m . from home: exit %d, stderr %q; want it taken, with the first capture's count", r.code, r.stderr)
	}
	r = in(proj, "push", "-m", proj, "-d", "proj.db", "-q")
	if r.code != 0 || !strings.Contains(r.stderr, "first capture of "+proj+": 1 file, 13 B") {
		t.Fatalf("push -m DIR of the store's directory: exit %d, stderr %q", r.code, r.stderr)
	}
	// Not the first capture: no line.
	writeFile(t, filepath.Join(proj, "more.go"), "package main\n")
	if r := in(proj, "push", "-m", proj, "-d", "proj.db", "-q"); r.code != 0 || strings.Contains(r.stderr, "first capture") {
		t.Fatalf("second push: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestUnchangedCaptureRecordsNothing is issue 29's no-op capture: an art
// run whose capture finds the host unchanged records no capture op and
// no snapshot, so art log has one entry per run and main~1 is the state
// before the previous run - also when the records were racy (just
// pushed) and the files had to be read again.
func TestUnchangedCaptureRecordsNothing(t *testing.T) {
	ws, db := overlayWorkspace(t)
	mustRun(t, "push", "-m", ws, "-d", db, "-q") // racy: main.py was just written
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", "echo one > one")
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", "echo two > two")
	var ops []struct {
		Kind        string `json:"kind"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(mustArt(t, "log", "-d", db, "--json")), &ops); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range ops {
		kinds = append(kinds, o.Kind)
	}
	if got, want := strings.Join(kinds, " "), "run run import branch"; got != want {
		t.Errorf("ops %q, want %q: an unchanged capture recorded an op", got, want)
	}
	if out, _, code := art(t, "cat", "-d", db, "main~1:ws/one"); code != 0 || out != "one\n" {
		t.Errorf("main~1:ws/one = %q (exit %d): main~1 is not the state before the last run", out, code)
	}
	if _, _, code := art(t, "cat", "-d", db, "main~1:ws/two"); code == 0 {
		t.Error("main~1 has the last run's file")
	}
	// A host change is still captured, as an op of its own.
	writeFile(t, filepath.Join(ws, "host.txt"), "h\n")
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "true")
	if out := mustArt(t, "cat", "-d", db, "main:ws/host.txt"); out != "h\n" {
		t.Errorf("host.txt = %q in the branch", out)
	}
}
