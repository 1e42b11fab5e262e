package session

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/tracer"
)

func TestTracePolicyFlag(t *testing.T) {
	if p, err := TracePolicy(""); err != nil || !p.WriteOpens || len(p.Trace) != 3 {
		t.Errorf("default: %+v %v", p, err)
	}
	if p, err := TracePolicy("all"); err != nil || !p.TraceAll {
		t.Errorf("all: %+v %v", p, err)
	}
	if p, err := TracePolicy("openat, connect"); err != nil || len(p.Trace) != 2 {
		t.Errorf("list: %+v %v", p, err)
	}
	if _, err := TracePolicy("execve,opne"); err == nil || !strings.Contains(err.Error(), `"opne"`) {
		t.Errorf("unknown name: %v", err)
	}
}

// TestTraceOptionsStart: a run's tracing entry point journals records and writes
// the text log; without tracing flags the program traces nothing.
func TestTraceOptionsStart(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.Require(t, "ptrace")
	logFile := filepath.Join(t.TempDir(), "trace.log")
	o := TraceOptions{Log: logFile}
	prog, err := o.seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	deny, err := TraceOptions{}.seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) <= len(deny) {
		t.Errorf("tracing program (%d bytes) no larger than the deny-only one (%d)", len(prog), len(deny))
	}
	progFile := filepath.Join(t.TempDir(), "bpf")
	if err := os.WriteFile(progFile, prog, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(progFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
		"--seccomp", "3", "--", "/bin/sh", "-c", "/bin/true one; exit 4")
	cmd.ExtraFiles = []*os.File{f}
	var got []journal.Event
	record := func(_ context.Context, evs ...journal.Event) error { got = append(got, evs...); return nil }
	tr, finish, err := o.start(cmd, record, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := tr.Wait()
	if err != nil || ws.ExitStatus() != 4 {
		t.Fatalf("wait: %v, status %s", err, tracer.ExitString(ws))
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	var execs []string
	for _, ev := range got {
		if ev.Kind == journal.EvExec {
			execs = append(execs, strings.ReplaceAll(ev.Text, "\x00", " "))
		}
	}
	if !slices.Contains(execs, "/bin/true one") {
		t.Errorf("exec events %q lack /bin/true one", execs)
	}
	text, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), `exec /bin/true ["/bin/true" "one"]`) {
		t.Errorf("trace log:\n%s", text)
	}
}
