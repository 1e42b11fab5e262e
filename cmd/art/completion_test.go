package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestComplete(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	mustArt(t, "branch", "-d", db, "feature")
	snap := strings.Fields(mustArt(t, "snapshot", "-d", db, "-m", "x"))
	lines := func(args ...string) []string {
		out, errs, code := art(t, append([]string{"__complete"}, args...)...)
		if code != 0 || errs != "" {
			t.Fatalf("__complete %q: exit %d, stderr %q", args, code, errs)
		}
		return strings.Fields(out)
	}
	has := func(got []string, want ...string) bool {
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				return false
			}
		}
		return true
	}
	if got := lines("ch"); !has(got, "checkout") || has(got, "diff") {
		t.Errorf("verbs for ch: %v", got)
	}
	if got := lines(""); !has(got, "run", "push", "pull", "log", "version", "completion") || has(got, "__complete") || has(got, "man") {
		t.Errorf("verbs: %v", got)
	}
	if got := lines("log", "--js"); !has(got, "--json") || len(got) != 1 {
		t.Errorf("flags of log for --js: %v", got)
	}
	if got := lines("checkout", "-d", db, ""); !has(got, "main", "feature") {
		t.Errorf("revisions for checkout: %v", got)
	}
	if len(snap) > 0 {
		id := snap[len(snap)-1]
		if got := lines("diff", "-d", db, ""); len(id) >= 4 && !hasPrefixOf(got, id[:4]) {
			t.Errorf("revisions for diff lack snapshot %s: %v", id, got)
		}
	}
	t.Setenv("ART_DB", db)
	if got := lines("run", "--branch", "fe"); !has(got, "feature") || len(got) != 1 {
		t.Errorf("branches from ART_DB for --branch fe: %v", got)
	}
	if got := lines("run", "--net", ""); !has(got, "host", "none", "allow") {
		t.Errorf("--net values: %v", got)
	}
	if got := lines("run", "--", "l"); len(got) != 0 {
		t.Errorf("after --: %v (want none: files)", got)
	}
	if got := lines("remote", ""); !has(got, "add", "list", "remove") {
		t.Errorf("remote actions: %v", got)
	}
	if got := lines("policy", ""); !has(got, "suggest") {
		t.Errorf("policy subcommands: %v", got)
	}
	// A broken store completes nothing and says nothing.
	bad := filepath.Join(t.TempDir(), "bad.db")
	os.WriteFile(bad, []byte("not a store"), 0o644)
	if got := lines("checkout", "-d", bad, ""); len(got) != 0 {
		t.Errorf("broken store: %v", got)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if out := mustArt(t, "completion", sh); !strings.Contains(out, "art __complete") {
			t.Errorf("completion %s: %q", sh, out)
		}
	}
	if _, _, code := art(t, "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh: exit %d", code)
	}
}

func hasPrefixOf(got []string, prefix string) bool {
	for _, g := range got {
		if strings.HasPrefix(g, prefix) {
			return true
		}
	}
	return false
}

// The bash script, sourced in a real bash, completes through the binary.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := artBinary(t)
	script := filepath.Join(t.TempDir(), "art.bash")
	if err := os.WriteFile(script, []byte(mustArt(t, "completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "--norc", "-c", `source "$1"; COMP_WORDS=(art chec); COMP_CWORD=1; _art; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "checkout" {
		t.Fatalf("bash completion of 'art chec': %q, %v", out, err)
	}
}

// art man (a build without urfave_cli_no_docs, as make man runs it) prints
// the page in roff; the art make build ships says where the page comes from.
func TestMan(t *testing.T) {
	out, errs, code := art(t, "man")
	if code != 0 || errs != "" || !strings.Contains(out, ".TH art 1") || !strings.Contains(out, ".SH NAME") {
		t.Fatalf("art man: exit %d, stderr %q, page %.200q", code, errs, out)
	}
	bin := filepath.Join(t.TempDir(), "art")
	if b, err := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags urfave_cli_no_docs: %v\n%s", err, b)
	}
	cmd := exec.Command(bin, "man")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "make man") {
		t.Errorf("art man without the generator: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	if b, err := exec.Command("go", "version", "-m", bin).CombinedOutput(); err != nil || strings.Contains(string(b), "blackfriday") {
		t.Errorf("the tagged build links the markdown library (%v):\n%s", err, b)
	}
}
