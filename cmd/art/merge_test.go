package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// gitMergeFile is the reference for art merge's text merges: the real git
// merge-file --diff3 on the three contents, without any git configuration.
func gitMergeFile(t *testing.T, base, ours, theirs string, labels ...string) string {
	t.Helper()
	testutil.Require(t, "git")
	dir := t.TempDir()
	for name, s := range map[string]string{"base": base, "ours": ours, "theirs": theirs} {
		writeFile(t, filepath.Join(dir, name), s)
	}
	args := []string{"merge-file", "--diff3", "-p"}
	for _, l := range labels {
		args = append(args, "-L", l)
	}
	cmd := exec.Command("git", append(args, "ours", "base", "theirs")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() >= 128) {
		t.Fatalf("git merge-file: %v", err)
	}
	return string(out)
}

// goLines is a Go file of n numbered functions.
func goLines(n int, edit map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := edit[i]; ok {
			b.WriteString(s)
			continue
		}
		fmt.Fprintf(&b, "func f%d() int { return %d }\n", i, i)
	}
	return b.String()
}

// pushBranch makes branch hold exactly files (under ws/), through a host
// directory of that name: push --replace.
func pushBranch(t *testing.T, db, branch string, files map[string]string) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	for name, data := range files {
		writeFile(t, filepath.Join(ws, name), data)
	}
	mustArt(t, "push", "-q", "--replace", "-m", ws, "-d", db, "--branch", branch)
}

type mergeJSON struct {
	Base *struct {
		Snapshot string `json:"snapshot"`
	} `json:"base"`
	UpToDate bool `json:"up_to_date"`
	Merged   []struct {
		Path, Action string
	} `json:"merged"`
	Conflicts []struct {
		Path, Action, Reason, Resolution string
		Hunks                            int
	} `json:"conflicts"`
	Conflicted bool `json:"conflicted"`
	Applied    bool `json:"applied"`
}

// TestMergeAcceptance is issue 30's scenario: two attempts from one
// snapshot, one edits a.go and adds b.go, the other edits another part of
// a.go and deletes c.go; both merge into main without conflicts and main
// holds both, a.go exactly as git merges it. Then overlapping edits are
// refused with the path listed and nothing changed, --conflict=markers
// writes git's markers and marks the merge conflicted in status and log,
// and art undo returns main.
func TestMergeAcceptance(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	a0 := goLines(30, nil)
	pushBranch(t, db, "main", map[string]string{"a.go": a0, "c.go": "package c\n"})
	mustArt(t, "branch", "-d", db, "try-a")
	mustArt(t, "branch", "-d", db, "try-b")
	aA := goLines(30, map[int]string{3: "func f3() int { return 333 } // attempt a\n"})
	aB := goLines(30, map[int]string{26: "func f26() int { return 2626 } // attempt b\n"})
	pushBranch(t, db, "try-a", map[string]string{"a.go": aA, "b.go": "package b\n", "c.go": "package c\n"})
	pushBranch(t, db, "try-b", map[string]string{"a.go": aB})

	out := mustArt(t, "merge", "-d", db, "try-a")
	for _, want := range []string{"merged snapshot ", "into main (base snapshot ", "2 merged paths", "take     ws/a.go\n", "add      ws/b.go\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("merge try-a printed no %q:\n%s", want, out)
		}
	}
	var res mergeJSON
	if err := json.Unmarshal([]byte(mustArt(t, "merge", "-d", db, "try-b", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.Conflicted || len(res.Conflicts) != 0 || len(res.Merged) != 2 ||
		res.Merged[0] != (struct{ Path, Action string }{"ws/a.go", "text"}) ||
		res.Merged[1] != (struct{ Path, Action string }{"ws/c.go", "delete"}) {
		t.Fatalf("merge try-b --json: %+v", res)
	}
	got := mustArt(t, "cat", "-d", db, "main:ws/a.go")
	if want := gitMergeFile(t, a0, aA, aB); got != want || !strings.Contains(got, "attempt a") || !strings.Contains(got, "attempt b") {
		t.Fatalf("main:ws/a.go = %q, want git's %q", got, want)
	}
	if got := mustArt(t, "ls", "-d", db, "main:ws"); !strings.Contains(got, "ws/b.go") || strings.Contains(got, "ws/c.go") {
		t.Fatalf("main:ws after both merges:\n%s", got)
	}
	// The merge's changes are ordinary events: log --path sees them.
	if got := mustArt(t, "log", "-d", db, "--path", "ws/b.go"); !strings.Contains(got, "create      /ws/b.go") {
		t.Errorf("log --path ws/b.go:\n%s", got)
	}
	// Merging again is a no-op.
	if out := mustArt(t, "merge", "-d", db, "try-b"); !strings.Contains(out, "up to date") {
		t.Errorf("second merge of try-b: %s", out)
	}

	// Overlapping edits: two more attempts change the same line.
	merged := got
	mustArt(t, "branch", "-d", db, "try-c")
	mustArt(t, "branch", "-d", db, "try-d")
	aC := strings.Replace(merged, "func f10() int { return 10 }\n", "func f10() int { return 100 } // c\n", 1)
	aD := strings.Replace(merged, "func f10() int { return 10 }\n", "func f10() int { return -10 } // d\n", 1)
	pushBranch(t, db, "try-c", map[string]string{"a.go": aC, "b.go": "package b\n"})
	pushBranch(t, db, "try-d", map[string]string{"a.go": aD, "b.go": "package b\n"})
	mustArt(t, "merge", "-d", db, "try-c")
	head := mustArt(t, "log", "-d", db, "--json")
	out, errs, code := art(t, "merge", "-d", db, "try-d")
	if code != 1 || !strings.Contains(out, "conflict ws/a.go: overlapping changes (1 hunk)\n") ||
		!strings.Contains(errs, "refused: 1 conflicting path, nothing changed") {
		t.Fatalf("overlapping merge: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if got := mustArt(t, "log", "-d", db, "--json"); got != head {
		t.Fatal("a refused merge changed the store's log")
	}
	out, _, code = art(t, "merge", "-d", db, "try-d", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Applied ||
		len(res.Conflicts) != 1 || res.Conflicts[0].Path != "ws/a.go" || res.Conflicts[0].Hunks != 1 {
		t.Fatalf("overlapping merge --json: exit %d, %+v (%v)", code, res, err)
	}

	// --conflict=markers: git's markers, with the base section.
	out = mustArt(t, "merge", "-d", db, "try-d", "--conflict=markers", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Applied || !res.Conflicted || res.Base == nil {
		t.Fatalf("merge --conflict=markers: %+v (%v)", res, err)
	}
	got = mustArt(t, "cat", "-d", db, "main:ws/a.go")
	want := gitMergeFile(t, merged, aC, aD, "main", res.Base.Snapshot[:12], "try-d")
	if got != want || !strings.Contains(got, "<<<<<<< main\n") || !strings.Contains(got, "||||||| ") || !strings.Contains(got, ">>>>>>> try-d\n") {
		t.Fatalf("markers: main:ws/a.go = %q, want git's %q", got, want)
	}
	if got := mustArt(t, "status", "-d", db); !strings.Contains(got, "conflicted merge: op ") {
		t.Errorf("status after a conflicted merge:\n%s", got)
	}
	if got := mustArt(t, "log", "-d", db); !strings.Contains(got, "merge try-d into main  [conflicted]") {
		t.Errorf("log after a conflicted merge:\n%s", got)
	}

	// art undo returns main to before the merge.
	mustArt(t, "undo", "-d", db)
	if got := mustArt(t, "cat", "-d", db, "main:ws/a.go"); got != aC {
		t.Fatalf("after undo main:ws/a.go = %q, want %q", got, aC)
	}
	if got := mustArt(t, "status", "-d", db); strings.Contains(got, "conflicted merge") {
		t.Errorf("status after undoing the conflicted merge:\n%s", got)
	}

	// --theirs takes try-d's side of the conflicting hunk, keeps the rest.
	mustArt(t, "merge", "-d", db, "try-d", "--theirs")
	if got := mustArt(t, "cat", "-d", db, "main:ws/a.go"); got != aD {
		t.Fatalf("--theirs: main:ws/a.go = %q, want %q", got, aD)
	}
	if out := mustArt(t, "verify", "-d", db); !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify:\n%s", out)
	}
}

// TestMergeUsage: bad flag combinations are usage errors (exit 2) and a
// missing source is not found (exit 3), before anything is written.
func TestMergeUsage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	pushBranch(t, db, "main", map[string]string{"a": "a\n"})
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"merge", "-d", db}, 2},
		{[]string{"merge", "-d", db, "a", "b"}, 2},
		{[]string{"merge", "-d", db, "main", "--ours", "--theirs"}, 2},
		{[]string{"merge", "-d", db, "main", "--conflict=markers", "--ours"}, 2},
		{[]string{"merge", "-d", db, "main", "--conflict=maybe"}, 2},
		{[]string{"merge", "-d", db, "nosuch"}, 3},
		{[]string{"merge", "-d", db, "main", "--into", "nosuch"}, 3},
	} {
		if _, errs, code := art(t, tc.args...); code != tc.code {
			t.Errorf("art %s: exit %d, want %d (%s)", strings.Join(tc.args, " "), code, tc.code, errs)
		}
	}
}

// TestMergeQuotesPaths: a path the agent chose reaches the terminal only
// quoted (termtext), in the merged list and in the conflict list; --json
// keeps it exact.
func TestMergeQuotesPaths(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	evil := "evil\x1b]0;pwned\x07.go"
	pushBranch(t, db, "main", map[string]string{"a.go": "a\n", "c.go": "c\n"})
	mustArt(t, "branch", "-d", db, "try")
	pushBranch(t, db, "try", map[string]string{"a.go": "a\n", "c.go": "c2\n", evil: "x\n"})
	pushBranch(t, db, "main", map[string]string{"a.go": "a\n", "c.go": "c3\n"})
	out, _, code := art(t, "merge", "-d", db, "try")
	if code != 1 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "conflict ws/c.go") || !strings.Contains(out, "evil") {
		t.Fatalf("merge printed raw control bytes or no list (exit %d): %q", code, out)
	}
	out = mustArt(t, "merge", "-d", db, "try", "--ours")
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "add      ") {
		t.Fatalf("merge --ours: %q", out)
	}
	mustArt(t, "undo", "-d", db)
	var res mergeJSON
	if err := json.Unmarshal([]byte(mustArt(t, "merge", "-d", db, "try", "--ours", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Merged) != 1 || res.Merged[0].Path != "ws/"+evil {
		t.Fatalf("--json paths: %+v", res.Merged)
	}
}
