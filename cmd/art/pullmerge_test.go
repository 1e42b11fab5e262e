package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
)

// twelve is "l1\n".."l12\n" with line i replaced by repl[i].
func twelve(repl map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 12; i++ {
		if r, ok := repl[i]; ok {
			b.WriteString(r + "\n")
			continue
		}
		b.WriteString("l" + string(rune('a'+i-1)) + "\n")
	}
	return b.String()
}

// agentEdit has an agent (art run) write files on the branch.
func agentEdit(t *testing.T, ws, db string, files map[string]string, rm ...string) {
	t.Helper()
	var sh strings.Builder
	for p, s := range files {
		sh.WriteString("printf '%s' '" + s + "' > " + p + "; ")
	}
	for _, p := range rm {
		sh.WriteString("rm " + p + "; ")
	}
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", sh.String())
}

func branchFile(t *testing.T, db, p string) string {
	t.Helper()
	out, _, code := art(t, "cat", "-d", db, "main:ws/"+p)
	if code != 0 {
		return "<none>"
	}
	return out
}

// TestPullMergeKeepsBothEdits is issue 30's "pull can merge too": the
// agent edits one part of a file on the branch, the user another part on
// the host; pull --merge keeps both (git merge-file's result), writes the
// agent's new file, keeps the host's new file and the host's edit of a file
// the agent did not touch, and the next push -m records the merged content
// (the pull did not record it as in sync with the branch).
func TestPullMergeKeepsBothEdits(t *testing.T) {
	ws, db := overlayWorkspace(t)
	base := twelve(nil)
	writeFile(t, filepath.Join(ws, "a.txt"), base)
	writeFile(t, filepath.Join(ws, "b"), "b\n")
	writeFile(t, filepath.Join(ws, "c"), "c\n")
	writeFile(t, filepath.Join(ws, "e"), "e\n")
	mustRun(t, "push", "-m", ws, "-d", db, "-q")
	agent := twelve(map[int]string{2: "agent"})
	agentEdit(t, ws, db, map[string]string{"a.txt": agent, "agentnew": "n\n"}, "c")
	host := twelve(map[int]string{11: "user"})
	writeFile(t, filepath.Join(ws, "a.txt"), host)
	writeFile(t, filepath.Join(ws, "b"), "b\nprecious\n")
	writeFile(t, filepath.Join(ws, "hostnew"), "x\n")
	if err := os.Remove(filepath.Join(ws, "e")); err != nil {
		t.Fatal(err)
	}
	// Out of the racy window: only the missing import record makes the
	// next capture look at b again.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(ws, "b"), old, old); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, "pull", "-m", ws, "-d", db, "--merge")
	want := gitMergeFile(t, base, host, agent, "host "+ws, "base", "main")
	if strings.Contains(want, "<<<<<<<") {
		t.Fatalf("git merge-file found conflicts in disjoint edits:\n%s", want)
	}
	for p, w := range map[string]string{"a.txt": want, "b": "b\nprecious\n", "c": "<none>", "e": "<none>", "agentnew": "n\n", "hostnew": "x\n"} {
		if got := readHost(t, filepath.Join(ws, p)); got != w {
			t.Errorf("host %s = %q after pull --merge, want %q", p, got, w)
		}
	}
	for _, w := range []string{"merged   ws/a.txt", "kept     ws/b", "kept     ws/hostnew", "pull: "} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("pull --merge output does not say %q:\n%s", w, r.stdout)
		}
	}
	// The branch is still the agent's; the next capture takes the host's.
	if got := branchFile(t, db, "a.txt"); got != agent {
		t.Errorf("branch a.txt = %q after the pull, want the agent's", got)
	}
	// The import records name the agent's versions: the push takes the
	// host's without a conflict warning, and the host's deletion too.
	if r := mustRun(t, "push", "-m", ws, "-d", db, "-q"); strings.Contains(r.stderr, "warning") {
		t.Errorf("push -m after pull --merge warned: %s", r.stderr)
	}
	for p, w := range map[string]string{"a.txt": want, "b": "b\nprecious\n", "c": "<none>", "e": "<none>", "agentnew": "n\n", "hostnew": "x\n"} {
		if got := branchFile(t, db, p); got != w {
			t.Errorf("branch %s = %q after push -m, want the host's %q", p, got, w)
		}
	}
	// And now the host is in sync: a plain pull goes through.
	mustRun(t, "pull", "-m", ws, "-d", db, "-q")
}

// TestPullMergeConflicts: overlapping edits and a host deletion of a file
// the agent changed refuse the pull, listed, with the host byte for byte
// as it was; --conflict=markers writes git's diff3 markers and keeps the
// host's deletion; the next push -m records what the host then has.
func TestPullMergeConflicts(t *testing.T) {
	ws, db := overlayWorkspace(t)
	base := twelve(nil)
	writeFile(t, filepath.Join(ws, "a.txt"), base)
	writeFile(t, filepath.Join(ws, "b"), "b\n")
	mustRun(t, "push", "-m", ws, "-d", db, "-q")
	agent := twelve(map[int]string{5: "agent", 6: "agent too"})
	agentEdit(t, ws, db, map[string]string{"a.txt": agent, "b": "b by agent\n"})
	host := twelve(map[int]string{6: "user"})
	writeFile(t, filepath.Join(ws, "a.txt"), host)
	if err := os.Remove(filepath.Join(ws, "b")); err != nil {
		t.Fatal(err)
	}

	before := testutil.DescribeTree(t, ws, testutil.TreeOptions{DirMTimes: true})
	r := artRun(t, "pull", "-m", ws, "-d", db, "--merge")
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("pull --merge with conflicts: exit %d, stdout %q, stderr %q; want 1, nothing on stdout", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"2 conflicting paths", "ws/a.txt: changed on the host and in the state (overlapping lines)", "ws/b: deleted on the host, changed in the state", "nothing written"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("refusal %q does not say %q", r.stderr, w)
		}
	}
	if after := testutil.DescribeTree(t, ws, testutil.TreeOptions{DirMTimes: true}); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused pull --merge changed the host:\n%v\nwas\n%v", after, before)
	}
	r = artRun(t, "pull", "-m", ws, "-d", db, "--merge", "--json")
	var out struct {
		Merge struct {
			Paths     []struct{ Path, Action, Reason string }
			Conflicts int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 1 || err != nil || out.Merge.Conflicts != 2 || len(out.Merge.Paths) != 2 || out.Merge.Paths[0].Path != "a.txt" {
		t.Errorf("pull --merge --json with conflicts: exit %d, %+v (%v) from %q", r.code, out, err, r.stdout)
	}
	if got := readHost(t, filepath.Join(ws, "a.txt")); got != host {
		t.Fatalf("a.txt = %q after a refused pull, want the host's %q", got, host)
	}

	r = mustRun(t, "pull", "-m", ws, "-d", db, "--merge", "--conflict=markers")
	want := gitMergeFile(t, base, host, agent, "host "+ws, "base", "main")
	if strings.Count(want, "<<<<<<<") != 1 {
		t.Fatalf("git merge-file's result has no one conflict:\n%s", want)
	}
	if got := readHost(t, filepath.Join(ws, "a.txt")); got != want {
		t.Errorf("a.txt with markers =\n%s\nwant git merge-file's\n%s", got, want)
	}
	if got := readHost(t, filepath.Join(ws, "b")); got != "<none>" {
		t.Errorf("b = %q, want the host's deletion kept", got)
	}
	if !strings.Contains(r.stdout, "conflict ws/a.txt") || !strings.Contains(r.stderr, "written with conflicts") {
		t.Errorf("pull --conflict=markers said %q / %q", r.stdout, r.stderr)
	}
	if r := mustRun(t, "push", "-m", ws, "-d", db, "-q"); strings.Contains(r.stderr, "warning") {
		t.Errorf("push -m after pull --conflict=markers warned: %s", r.stderr)
	}
	if got := branchFile(t, db, "b"); got != "<none>" {
		t.Errorf("branch b = %q after push -m, want the host's deletion", got)
	}
	if got := branchFile(t, db, "a.txt"); got != want {
		t.Errorf("branch a.txt = %q after push -m, want the host's (with markers)", got)
	}
}

// TestPullMergeWithoutHostChanges: with nothing changed on the host,
// pull --merge is a plain pull (same output, same files, recorded in sync).
func TestPullMergeWithoutHostChanges(t *testing.T) {
	ws, db := overlayWorkspace(t)
	writeFile(t, filepath.Join(ws, "a.txt"), twelve(nil))
	mustRun(t, "push", "-m", ws, "-d", db, "-q")
	agent := twelve(map[int]string{3: "agent"})
	agentEdit(t, ws, db, map[string]string{"a.txt": agent})
	r := mustRun(t, "pull", "-m", ws, "-d", db, "--merge", "-q")
	if !strings.HasPrefix(r.stdout, "pull: 1 written, 0 updated, 0 deleted") || strings.Contains(r.stdout, "merged") {
		t.Errorf("pull --merge without host changes said %q, want a plain pull's line", r.stdout)
	}
	if got := readHost(t, filepath.Join(ws, "a.txt")); got != agent {
		t.Errorf("a.txt = %q, want the agent's", got)
	}
	// Recorded as pulled: a push finds nothing to record.
	r = mustRun(t, "push", "-m", ws, "-d", db, "-q")
	if !strings.Contains(r.stdout, "push: 0 new, 0 changed, 0 deleted") {
		t.Errorf("push -m after pull --merge without host changes: %q, want nothing to record", r.stdout)
	}
	if r := artRun(t, "pull", "-m", ws, "-d", db, "--force", "--merge"); r.code != 2 {
		t.Errorf("--merge --force: exit %d, want 2 (usage)", r.code)
	}
}
