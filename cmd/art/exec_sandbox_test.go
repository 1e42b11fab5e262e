package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/execapi"
)

// execIn runs art exec over ws and db with the given request lines.
func execIn(t *testing.T, ws, db, mode string, lines ...string) ([]execapi.Response, runOut) {
	t.Helper()
	cmd := artCmd(t, "exec", "-d", db, "-m", ws, mode)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	r := exe(t, cmd)
	if r.code != 0 {
		t.Fatalf("art exec %s: exit %d, stderr %s", mode, r.code, r.stderr)
	}
	return execResponses(t, r.stdout), r
}

func TestExecSandboxedOutcomes(t *testing.T) {
	ws, db := overlayWorkspace(t)
	resps, _ := execIn(t, ws, db, "--jsonl",
		`{"command":["sh","-c","echo hi; echo err >&2; echo data > out.txt"]}`,
		`{"command":["sh","-c","cat out.txt; exit 3"]}`,
		`{"command":["sh","-c","sleep 30.5 & sleep 30.5"],"timeout_ms":300}`,
		`{"command":["nosuchcommand"]}`,
		`{"command":["sh","-c","yes | head -c 10485760"],"resources":{"max_output_bytes":1048576}}`,
		`{"command":["id","-u"]}`,
		`{"command":["cat"],"stdin":"from stdin"}`,
		`{"command":["sh","-c","cat /proc/net/dev | wc -l"]}`,
	)
	if len(resps) != 8 {
		t.Fatalf("%d responses, want 8", len(resps))
	}
	for i, c := range []struct {
		status execapi.Status
		code   int
		stdout string
		err    execapi.Code
	}{
		{execapi.StatusSuccess, 0, "hi\n", ""},
		{execapi.StatusError, 3, "data\n", ""},
		{execapi.StatusTimeout, 124, "", execapi.CodeTimeout},
		{execapi.StatusError, execapi.ExitNotRun, "", execapi.CodeNotFound},
		{execapi.StatusSuccess, 0, "", ""},
		{execapi.StatusSuccess, 0, "65534\n", ""},
		{execapi.StatusSuccess, 0, "from stdin", ""},
		{execapi.StatusSuccess, 0, "3\n", ""}, // two header lines and lo: own network namespace
	} {
		r := resps[i]
		var code execapi.Code
		if r.Error != nil {
			code = r.Error.Code
		}
		if r.Status != c.status || r.ExitCode != c.code || code != c.err || (c.stdout != "" || i < 4) && r.Stdout != c.stdout {
			t.Errorf("request %d: status %s exit %d stdout %q error %v, want %s %d %q %s", i, r.Status, r.ExitCode, head(r.Stdout), r.Error, c.status, c.code, c.stdout, c.err)
		}
	}
	if r := resps[0]; r.Stderr != "err\n" || r.Changes == nil || r.Changes.Added != 1 || r.Changes.Paths[0].Path != "ws/out.txt" {
		t.Errorf("first request: stderr %q changes %+v, want err and ws/out.txt added", r.Stderr, r.Changes)
	}
	if r := resps[4]; !r.StdoutTruncated || len(r.Stdout) != 1<<20 {
		t.Errorf("10 MiB through a 1 MiB limit: truncated %v, %d bytes kept", r.StdoutTruncated, len(r.Stdout))
	}
	if left := cmdlinePids("sleep", "30.5"); len(left) > 0 {
		t.Errorf("the timed-out request left processes: %v", left)
	}
	// Chained: each request starts from the snapshot the previous ended at.
	for i := 1; i < len(resps); i++ {
		if resps[i].SnapshotBefore != resps[i-1].SnapshotAfter {
			t.Errorf("request %d: snapshot_before %s, want the previous snapshot_after %s", i, resps[i].SnapshotBefore, resps[i-1].SnapshotAfter)
		}
	}
}

func TestExecMemoryLimitKilled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroup memory limit")
	}
	ws, db := overlayWorkspace(t)
	resps, _ := execIn(t, ws, db, "--json",
		`{"command":["python3","-c","b = bytearray(1 << 30); print(len(b))"],"resources":{"memory_bytes":67108864}}`)
	r := resps[0]
	if r.Status != execapi.StatusKilled || r.ExitCode != 137 || r.Error == nil || r.Error.Code != execapi.CodeMemoryLimit {
		t.Fatalf("memory hog: status %s exit %d error %v, want killed 137 %s", r.Status, r.ExitCode, r.Error, execapi.CodeMemoryLimit)
	}
}

// TestExecStreamOverOneMount runs 100 requests over one mount: snapshots
// chain, each request is an exec op in art log, and the per-request cost
// stays far below a cold art run.
func TestExecStreamOverOneMount(t *testing.T) {
	ws, db := overlayWorkspace(t)
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, fmt.Sprintf(`{"command":["sh","-c","echo %d >> log.txt"]}`, i))
	}
	start := time.Now()
	resps, _ := execIn(t, ws, db, "--jsonl", lines...)
	wall := time.Since(start)
	if len(resps) != 100 {
		t.Fatalf("%d responses, want 100", len(resps))
	}
	for i, r := range resps {
		if r.Status != execapi.StatusSuccess {
			t.Fatalf("request %d: %s %v", i, r.Status, r.Error)
		}
		if i > 0 && r.SnapshotBefore != resps[i-1].SnapshotAfter {
			t.Fatalf("request %d: snapshots do not chain", i)
		}
		if r.Changes == nil || r.Changes.Added+r.Changes.Modified != 1 {
			t.Fatalf("request %d: changes %+v, want ws/log.txt", i, r.Changes)
		}
	}
	log := mustRun(t, "log", "-d", db, "-n", "200").stdout
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[0] == "op" && f[5] == "exec" {
			n++
		}
	}
	if n != 100 {
		t.Errorf("art log shows %d exec ops, want 100:\n%s", n, head(log))
	}
	cat := mustRun(t, "cat", "-d", db, "main:ws/log.txt").stdout
	if got := strings.Count(cat, "\n"); got != 100 {
		t.Errorf("log.txt has %d lines, want 100", got)
	}
	t.Logf("100 warm requests in %v (%v each)", wall, wall/100)
}

// art exec's metrics are the command's - its whole process tree in the
// sandbox - not bwrap's: a second of CPU in a grandchild, and 20 MiB
// written to the overlay with dd (wchar: FUSE writes never reach a block
// device of the sandbox's own) and read back.
func TestExecMetricsOfTheCommand(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3 for a loop bounded by its own CPU time")
	}
	ws, db := overlayWorkspace(t)
	loop := "import time\nwhile time.process_time() < 1:\n    for _ in range(100000): pass\n"
	req, err := json.Marshal(map[string]any{"command": []string{"sh", "-c",
		`sh -c 'python3 -c "$0"' "$LOOP"; dd if=/dev/zero of=big bs=1M count=20 2>/dev/null; cat big >/dev/null; rm big`},
		"environment": map[string]string{"LOOP": loop}})
	if err != nil {
		t.Fatal(err)
	}
	resps, _ := execIn(t, ws, db, "--json", string(req))
	m := resps[0].Metrics
	t.Logf("metrics %+v", m)
	if resps[0].ExitCode != 0 {
		t.Fatalf("exit %d: %s", resps[0].ExitCode, resps[0].Stderr)
	}
	if m.UserTimeMS < 800 {
		t.Errorf("user_time_ms %d for a second of CPU, want >= 800", m.UserTimeMS)
	}
	if m.IOBytesWritten < 20<<20 || m.IOBytesRead < 20<<20 {
		t.Errorf("io_bytes_read %d, io_bytes_written %d for a 20 MiB dd read back, want >= %d each", m.IOBytesRead, m.IOBytesWritten, 20<<20)
	}
}
