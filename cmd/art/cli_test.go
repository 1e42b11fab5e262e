package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// art runs the CLI in-process and returns stdout, stderr and the status.
func art(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"art"}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func mustArt(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := art(t, args...)
	if code != 0 {
		t.Fatalf("art %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// workspace makes base/ws with two files and returns (ws, db).
func newWorkspace(t *testing.T) (string, string) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	writeFile(t, filepath.Join(ws, "main.py"), "print('hello')\n")
	writeFile(t, filepath.Join(ws, "src", "util.py"), "x = 1\n")
	return ws, filepath.Join(base, "ws.db")
}

func TestPushPrintsSeedLines(t *testing.T) {
	ws, db := newWorkspace(t)
	out := mustArt(t, "push", "-m", ws, "-d", db)
	for _, want := range []string{
		"Workspace name: ws\n",
		"Files will be stored under: /ws/\n",
		"FILE /ws/main.py (15 bytes, ino ",
		"DIR  /ws/src (ino ",
		"FILE /ws/src/util.py (6 bytes, ino ",
		"push: 2 new, 0 changed, 0 deleted, 0 unchanged files",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("push output lacks %q:\n%s", want, out)
		}
	}
	out = mustArt(t, "pull", "-m", ws, "-d", db)
	for _, want := range []string{"Workspace name: ws\n", "Exporting from: /ws/\n", "FILE ws/main.py (15 bytes)\n", "DIR  ws/src\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("pull output lacks %q:\n%s", want, out)
		}
	}
}

func TestHistoryWorkflow(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	writeFile(t, filepath.Join(ws, "main.py"), "print('v2')\n")
	writeFile(t, filepath.Join(ws, "new.txt"), "new\n")
	mustArt(t, "push", "-q", "-m", ws, "-d", db)

	// diff A B, flags after positionals.
	if got, want := mustArt(t, "diff", "-d", db, "main~1", "main", "--name-status"), "M\tws/main.py\nA\tws/new.txt\n"; got != want {
		t.Fatalf("diff = %q, want %q", got, want)
	}
	var d struct {
		Changes []struct {
			Kind, Path string
		}
	}
	if err := json.Unmarshal([]byte(mustArt(t, "diff", "-d", db, "main~1", "--json")), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 2 || d.Changes[1].Path != "ws/new.txt" || d.Changes[1].Kind != "A" {
		t.Fatalf("diff --json = %+v", d)
	}
	if p := mustArt(t, "diff", "-d", db, "main~1", "--patch"); !strings.Contains(p, "-print('hello')\n+print('v2')\n") {
		t.Fatalf("patch:\n%s", p)
	}

	// log --json lists both imports, newest first, with their snapshots.
	var ops []struct {
		Kind      string
		Snapshots []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(mustArt(t, "log", "-d", db, "--json")), &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 || ops[0].Kind != "import" || len(ops[0].Snapshots) != 1 || ops[2].Kind != "branch" {
		t.Fatalf("log = %+v", ops)
	}
	first := ops[1].Snapshots[0].ID

	// cat any state; checkout by id prefix; undo.
	if got := mustArt(t, "cat", "-d", db, first[:8]+":ws/main.py"); got != "print('hello')\n" {
		t.Fatalf("cat = %q", got)
	}
	mustArt(t, "checkout", "-d", db, first[:6])
	if got := mustArt(t, "cat", "-d", db, "main:ws/main.py"); got != "print('hello')\n" {
		t.Fatalf("after checkout main:ws/main.py = %q", got)
	}
	mustArt(t, "pull", "-q", "-m", ws, "-d", db)
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("pull after checkout kept new.txt")
	}
	mustArt(t, "undo", "-d", db)
	if got := mustArt(t, "cat", "-d", db, "main:ws/main.py"); got != "print('v2')\n" {
		t.Fatalf("after undo main:ws/main.py = %q", got)
	}

	// Branches: create from a snapshot, list, ls, delete.
	mustArt(t, "branch", "-d", db, "try-a", "--from", "main~1")
	if got := mustArt(t, "branch", "-d", db); !strings.Contains(got, "try-a") || !strings.Contains(got, "main") {
		t.Fatalf("branch list:\n%s", got)
	}
	if got := mustArt(t, "ls", "-d", db, "try-a:ws"); strings.Contains(got, "new.txt") || !strings.Contains(got, "main.py") {
		t.Fatalf("ls try-a:ws:\n%s", got)
	}
	if got := mustArt(t, "snapshot", "-d", db, "--branch", "try-a", "-m", "on try-a"); len(strings.TrimSpace(got)) != 12 {
		t.Fatalf("snapshot printed %q, want a short id", got)
	}
	mustArt(t, "branch", "-d", db, "--delete", "try-a")
	if out := mustArt(t, "verify", "-d", db, "--rebuild"); !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify:\n%s", out)
	}
	if got := mustArt(t, "log", "-d", db, "--path", "ws/new.txt"); !strings.Contains(got, "create") || !strings.Contains(got, "/ws/new.txt") {
		t.Fatalf("log --path:\n%s", got)
	}
}

func TestExitCodes(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"log"}, exitUsage, "log needs a store: -d FILE"},
		{[]string{"log", "-d", db, "--bogus"}, exitUsage, "art: log: unknown flag --bogus (see art log --help)\n"},
		{[]string{"checkout", "-d", db}, exitUsage, "exactly one REV"},
		{[]string{"log", "-d", filepath.Join(t.TempDir(), "none.db")}, exitNotFound, "art push -m DIR"},
		{[]string{"checkout", "-d", db, "nosuch"}, exitNotFound, "not a branch, snapshot id or @seq"},
		{[]string{"diff", "-d", db, "main~9"}, exitNotFound, "only 1 snapshots"},
		{[]string{"diff", "-d", db, "main~x"}, exitUsage, "REV~N"},
		{[]string{"branch", "-d", db, "main"}, exitFailure, "already exists"},
		{[]string{"undo", "-d", db, "--branch", "nope"}, exitNotFound, "branch not found"},
		{[]string{"cat", "-d", db, "main:ws/nope"}, exitNotFound, "ws/nope"},
		{[]string{"branch", "-d", db, "bad~name"}, exitFailure, "invalid branch name"},
	} {
		_, errs, code := art(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("art %s: exit %d stderr %q, want exit %d mentioning %q", strings.Join(c.args, " "), code, errs, c.code, c.msg)
		}
	}
	// A damaged store: verify exits 4 and names the path.
	sdb, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`UPDATE objects SET data = X'00' || substr(data, 2) WHERE kind = 1`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	out, _, code := art(t, "verify", "-d", db)
	if code != exitCorrupt || !strings.Contains(out, "DAMAGED object") || !strings.Contains(out, "ws/main.py") {
		t.Fatalf("verify of a damaged store: exit %d\n%s", code, out)
	}
	if _, errs, code := art(t, "cat", "-d", db, "main:ws/main.py"); code != exitCorrupt || !strings.Contains(errs, "art verify") {
		t.Fatalf("cat of a damaged file: exit %d %q", code, errs)
	}
}

// TestHelpText walks the command tree: every command and flag explains
// itself, and help exits 0.
func TestHelpText(t *testing.T) {
	app := newApp(&env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
	for _, c := range app.Commands {
		if c.Name == "help" {
			continue
		}
		if c.Usage == "" || c.UsageText == "" {
			t.Errorf("command %s lacks Usage or UsageText", c.Name)
		}
		if c.Usage != strings.ToLower(c.Usage[:1])+c.Usage[1:] || strings.HasSuffix(c.Usage, ".") {
			t.Errorf("command %s: usage %q should start lowercase and not end with a period", c.Name, c.Usage)
		}
		for _, f := range c.Flags {
			if u, ok := f.(cli.DocGenerationFlag); ok && u.GetUsage() == "" {
				t.Errorf("command %s: flag %s has no usage", c.Name, f.Names()[0])
			}
		}
		if c.Hidden && c.SkipFlagParsing {
			continue // its arguments are data (art __complete)
		}
		if out, _, code := art(t, c.Name, "--help"); code != 0 || !strings.Contains(out, c.Usage) {
			t.Errorf("art %s --help: exit %d", c.Name, code)
		}
	}
	if out, _, code := art(t, "--help"); code != 0 || !strings.Contains(out, "EXIT STATUS") {
		t.Errorf("art --help: exit %d, missing exit codes:\n%s", code, out)
	}
}

// TestBinary builds cmd/art and drives it as a user would.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "art")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ws, db := newWorkspace(t)
	cmd := exec.Command(bin, "push", "-m", ws, "-d", db)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Workspace name: ws") {
		t.Fatalf("art push: %v\n%s", err, out)
	}
	cmd = exec.Command(bin, "checkout", "-d", db, "nosuch")
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != exitNotFound {
		t.Fatalf("art checkout nosuch: %v, exit %d", err, cmd.ProcessState.ExitCode())
	}
	if st, err := os.Stat(db); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("store file mode %v (%v), want 0600: it holds everything the agent wrote", st.Mode(), err)
	}
}
