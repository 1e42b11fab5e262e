package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/session"
	"github.com/artrt/art/tracer"
)

// traceSession mounts a fresh store as art run does and runs script with sh in
// the mount: traced under bwrap with the default seccomp program when
// traced, else plainly. It returns the store path and the trace log text.
func traceSession(t *testing.T, traced bool, script string) (string, string) {
	t.Helper()
	testutil.RequireFUSE(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "s.db")
	db, err := journal.Open(ctx, dbPath, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mnt := filepath.Join(dir, "mnt")
	upper := filepath.Join(dir, "upper")
	for _, d := range []string{mnt, upper} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := overlay.Mount(ctx, mnt, overlay.Options{Branch: "main", DB: db, UpperDir: upper, NameCallers: true, Description: "run sh"})
	if err != nil {
		t.Fatal(err)
	}
	var logText bytes.Buffer
	if traced {
		testutil.Require(t, "bwrap")
		testutil.Require(t, "ptrace")
		policy, err := session.TracePolicy("")
		if err != nil {
			t.Fatal(err)
		}
		prog, err := policy.Program()
		if err != nil {
			t.Fatal(err)
		}
		progFile := filepath.Join(dir, "seccomp")
		if err := os.WriteFile(progFile, prog, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(progFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command("bwrap", "--ro-bind", "/", "/", "--bind", mnt, mnt, "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--die-with-parent", "--chdir", mnt, "--seccomp", "3", "--", "sh", "-c", script)
		cmd.ExtraFiles = []*os.File{f}
		j := session.NewTraceJournal(fsys.Record)
		tr, err := tracer.Start(cmd, tracer.Options{Sink: tracer.Tee(j, &tracer.TextSink{W: &logText})})
		if err != nil {
			t.Fatal(err)
		}
		if ws, err := tr.Wait(); err != nil || ws.ExitStatus() != 0 {
			t.Fatalf("traced run: %v, status %s", err, tracer.ExitString(ws))
		}
		if err := j.Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = mnt
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if err := fsys.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	return dbPath, logText.String()
}

func TestBlameNamesTheCommand(t *testing.T) {
	for _, traced := range []bool{false, true} {
		name := map[bool]string{false: "untraced", true: "traced"}[traced]
		t.Run(name, func(t *testing.T) {
			db, traceLog := traceSession(t, traced, "echo x > f; mkdir d; sh -c 'echo y > d/g'")
			out := mustArt(t, "blame", "-d", db, "f")
			t.Logf("art blame f:\n%s", out)
			if !strings.Contains(out, `sh -c 'echo x > f; mkdir d; sh -c '\''echo y > d/g'\'''`) {
				t.Errorf("blame f does not name the command:\n%s", out)
			}
			if !strings.Contains(out, "snapshot ") || strings.Contains(out, "no snapshot") {
				t.Errorf("blame f names no snapshot:\n%s", out)
			}
			out = mustArt(t, "log", "-d", db, "--path", "f")
			if !strings.Contains(out, "<- pid ") || !strings.Contains(out, `sh -c 'echo x > f`) {
				t.Errorf("log --path f does not name the command:\n%s", out)
			}
			out = mustArt(t, "blame", "-d", db, "/home/agent/d/g")
			if !strings.Contains(out, `sh -c 'echo y > d/g'`) {
				t.Errorf("blame d/g does not name the inner sh:\n%s", out)
			}
			var lines []blameLine
			if err := json.Unmarshal([]byte(mustArt(t, "blame", "-d", db, "--json", "f")), &lines); err != nil {
				t.Fatal(err)
			}
			if len(lines) == 0 || lines[0].PID == 0 || len(lines[0].Argv) != 3 {
				t.Errorf("blame --json: %+v", lines)
			}
			if !traced {
				return
			}
			if !strings.Contains(traceLog, "exec ") || !strings.Contains(traceLog, "O_CREAT") {
				t.Errorf("trace log lacks the exec or the open:\n%s", traceLog)
			}
			tree := mustArt(t, "log", "-d", db, "--execs")
			t.Logf("art log --execs:\n%s\nart log --syscalls:\n%s", tree, mustArt(t, "log", "-d", db, "--syscalls"))
			outer := strings.Index(tree, "  sh -c 'echo x > f")
			inner := strings.Index(tree, "sh -c 'echo y > d/g'")
			if outer < 0 || inner < outer {
				t.Fatalf("log --execs tree:\n%s", tree)
			}
			// The inner sh is indented below the outer one.
			lineOf := func(i int) string { return tree[strings.LastIndex(tree[:i], "\n")+1 : i] }
			if len(lineOf(inner))-len(strings.TrimLeft(lineOf(inner), " ")) <= len(lineOf(outer))-len(strings.TrimLeft(lineOf(outer), " ")) {
				t.Errorf("inner sh not nested under the outer one:\n%s", tree)
			}
			var recs []traceEventJSON
			if err := json.Unmarshal([]byte(mustArt(t, "log", "-d", db, "--syscalls", "--json")), &recs); err != nil {
				t.Fatal(err)
			}
			var opened bool
			for _, r := range recs {
				if r.Syscall == "openat" && strings.HasSuffix(r.Path, "/d/g") && strings.Contains(r.Flags, "O_CREAT") {
					opened = true
				}
			}
			if !opened {
				t.Errorf("log --syscalls --json has no openat of d/g: %+v", recs)
			}
		})
	}
}

func TestGuestPath(t *testing.T) {
	for in, want := range map[string]string{
		"ws/f": "ws/f", "/ws/f/": "ws/f", "/home/agent/ws/f": "ws/f", "/home/agent": "",
		"/home/agentx/f": "home/agentx/f",
	} {
		if got := guestPath(in); got != want {
			t.Errorf("guestPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	if got, want := termtext.Argv([]string{"sh", "-c", "echo x > f", "it's"}), `sh -c 'echo x > f' 'it'\''s'`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
