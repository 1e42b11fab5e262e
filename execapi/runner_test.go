package execapi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execReq runs req through a Server with the process executor, as art exec
// would, and returns the response.
func execReq(t *testing.T, r *Runner, req *Request) *Response {
	t.Helper()
	if r == nil {
		r = NewProcessExecutor(t.TempDir(), nil)
	}
	if req.Isolation.BindMounts == nil && os.Geteuid() != 0 {
		req.Isolation.Network = true // a new network namespace needs root here
	}
	s := &Server{Executor: r}
	if e := s.Policy.Validate(req); e != nil {
		t.Fatalf("invalid test request: %v", e)
	}
	req.ExecutionID = "ex-test"
	resp := r.Exec(context.Background(), req)
	if resp == nil {
		t.Fatal("nil response")
	}
	return resp
}

func sh(script string) *Request { return &Request{Command: []string{"sh", "-c", script}} }

func TestExecSuccess(t *testing.T) {
	req := sh(`printf 'out'; printf 'err' >&2; pwd; echo "$A"`)
	req.Environment = map[string]string{"A": "a-value"}
	req.WorkingDirectory = "/usr"
	resp := execReq(t, nil, req)
	if resp.Status != StatusSuccess || resp.ExitCode != 0 || resp.Error != nil {
		t.Fatalf("status %s exit %d error %v", resp.Status, resp.ExitCode, resp.Error)
	}
	if got, want := resp.Stdout, "out/usr\na-value\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got, want := resp.Stderr, "err"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if resp.StdoutTruncated || resp.StderrTruncated {
		t.Error("truncated flags set on short output")
	}
	if resp.Metrics.MaxMemoryBytes <= 0 || resp.Timestamps.Started == "" {
		t.Errorf("metrics %+v started %q", resp.Metrics, resp.Timestamps.Started)
	}
}

func TestExecEnvironmentIsExactlyTheRequests(t *testing.T) {
	t.Setenv("ART_SECRET_TEST", "leak")
	req := &Request{Command: []string{"env"}, Environment: map[string]string{"K": "v", "PATH": "/bin:/usr/bin"}}
	resp := execReq(t, nil, req)
	if got, want := resp.Stdout, "K=v\nPATH=/bin:/usr/bin\n"; got != want {
		t.Errorf("env:\n%s\nwant:\n%s", got, want)
	}
}

func TestExecNonZero(t *testing.T) {
	resp := execReq(t, nil, sh("echo failing >&2; exit 3"))
	if resp.Status != StatusError || resp.ExitCode != 3 || resp.Error != nil {
		t.Fatalf("status %s exit %d error %v", resp.Status, resp.ExitCode, resp.Error)
	}
	if resp.Stderr != "failing\n" {
		t.Errorf("stderr %q", resp.Stderr)
	}
}

func TestExecStdin(t *testing.T) {
	req := &Request{Command: []string{"cat"}, Stdin: "line 1\nline\x002\n"}
	if resp := execReq(t, nil, req); resp.Stdout != req.Stdin {
		t.Errorf("cat echoed %q, want %q", resp.Stdout, req.Stdin)
	}
	// A command that never reads 4 MiB of stdin must not hang the runner.
	req = &Request{Command: []string{"true"}, Stdin: strings.Repeat("x", 4<<20), TimeoutMS: 10_000}
	if resp := execReq(t, nil, req); resp.Status != StatusSuccess {
		t.Errorf("status %s, error %v", resp.Status, resp.Error)
	}
	// No stdin: /dev/null, so a reader sees EOF at once.
	if resp := execReq(t, nil, &Request{Command: []string{"cat"}, TimeoutMS: 5000}); resp.Status != StatusSuccess || resp.Stdout != "" {
		t.Errorf("cat without stdin: %s %q", resp.Status, resp.Stdout)
	}
}

// pidsOf parses the pids a test script printed, one per line.
func pidsOf(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(out) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("not a pid: %q in %q", f, out)
		}
		pids = append(pids, n)
	}
	if len(pids) == 0 {
		t.Fatalf("no pids in %q", out)
	}
	return pids
}

// running reports whether pid is alive and not a zombie.
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

func assertNoneRunning(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for _, pid := range pids {
		for running(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still running after the response", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestExecTimeoutKillsTheTree(t *testing.T) {
	// The shell ignores SIGTERM, so the grace period has to end in SIGKILL;
	// its children are in the same process group.
	req := sh(`trap '' TERM; sleep 100 & echo $!; sh -c 'sleep 100' & echo $!; echo $$; wait`)
	req.TimeoutMS = 300
	r := NewProcessExecutor(t.TempDir(), nil)
	r.KillGrace = 200 * time.Millisecond
	start := time.Now()
	resp := execReq(t, r, req)
	took := time.Since(start)
	if resp.Status != StatusTimeout || resp.ExitCode != ExitTimeout {
		t.Fatalf("status %s exit %d, want timeout 124", resp.Status, resp.ExitCode)
	}
	if resp.Error == nil || resp.Error.Code != CodeTimeout || resp.Error.Message != "timed out after 300 ms; the process tree was killed" {
		t.Errorf("error %+v", resp.Error)
	}
	if took > 3*time.Second || resp.Metrics.WallTimeMS < 300 {
		t.Errorf("took %v, wall_time_ms %d", took, resp.Metrics.WallTimeMS)
	}
	assertNoneRunning(t, pidsOf(t, resp.Stdout))
}

func TestExecLeftoversDieWithTheCommand(t *testing.T) {
	// The command exits at once; its background child would hold stdout
	// open for 100 s. The runner kills the group instead of waiting.
	start := time.Now()
	resp := execReq(t, nil, sh(`sleep 100 & echo $!`))
	if resp.Status != StatusSuccess {
		t.Fatalf("status %s %v", resp.Status, resp.Error)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v: the runner waited for a leftover", took)
	}
	assertNoneRunning(t, pidsOf(t, resp.Stdout))
}

func TestExecEscapedProcessDoesNotHang(t *testing.T) {
	// setsid leaves the process group, so only a sandbox's pid namespace
	// could kill it; the runner must still answer after DrainTimeout.
	r := NewProcessExecutor(t.TempDir(), nil)
	r.DrainTimeout = 200 * time.Millisecond
	start := time.Now()
	resp := execReq(t, r, sh(`setsid sh -c 'echo $$; exec sleep 30' & sleep 0.2`))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
	for _, pid := range pidsOf(t, resp.Stdout) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestExecOutputTruncated(t *testing.T) {
	req := sh(`head -c 10485760 /dev/zero; head -c 3000000 /dev/zero >&2`)
	req.Resources.MaxOutputBytes = 1 << 20
	start := time.Now()
	resp := execReq(t, nil, req)
	took := time.Since(start)
	if resp.Status != StatusSuccess {
		t.Fatalf("status %s %v: output over the limit must not be an error", resp.Status, resp.Error)
	}
	if len(resp.Stdout) != 1<<20 || len(resp.Stderr) != 1<<20 || !resp.StdoutTruncated || !resp.StderrTruncated {
		t.Errorf("stdout %d (truncated %v), stderr %d (truncated %v)", len(resp.Stdout), resp.StdoutTruncated, len(resp.Stderr), resp.StderrTruncated)
	}
	if took > 5*time.Second {
		t.Errorf("13 MiB took %v", took)
	}
	t.Logf("10 MiB + 3 MiB through a 1 MiB limit: %v", took)
}

func TestExecKilledBySignal(t *testing.T) {
	resp := execReq(t, nil, sh(`kill -9 $$`))
	if resp.Status != StatusKilled || resp.ExitCode != 137 || resp.Error == nil || resp.Error.Code != CodeSignaled ||
		resp.Error.Message != "killed by signal 9 (SIGKILL)" {
		t.Fatalf("status %s exit %d error %+v", resp.Status, resp.ExitCode, resp.Error)
	}
	resp = execReq(t, nil, sh(`kill -XCPU $$`))
	if resp.Status != StatusKilled || resp.ExitCode != 128+24 || resp.Error == nil || resp.Error.Code != CodeCPULimit {
		t.Fatalf("SIGXCPU: status %s exit %d error %+v", resp.Status, resp.ExitCode, resp.Error)
	}
}

// TestExecExplain: a launcher that knows a cgroup killed the command for
// memory reports it through Explain; that is how E4xxx reach responses.
func TestExecExplain(t *testing.T) {
	base := ProcessCommand(t.TempDir(), nil)
	r := &Runner{Prepare: func(ctx context.Context, req *Request) (*Launch, error) {
		l, err := base(ctx, req)
		if err != nil {
			return nil, err
		}
		l.Explain = func(ws syscall.WaitStatus) *Error {
			if ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				return Errorf(CodeMemoryLimit, "memory limit exceeded")
			}
			return nil
		}
		return l, nil
	}}
	resp := execReq(t, r, sh(`kill -9 $$`))
	if resp.Status != StatusKilled || resp.ExitCode != 137 || resp.Error.Code != CodeMemoryLimit {
		t.Fatalf("status %s exit %d error %+v", resp.Status, resp.ExitCode, resp.Error)
	}
	if resp := execReq(t, r, sh(`exit 0`)); resp.Status != StatusSuccess {
		t.Fatalf("status %s", resp.Status)
	}
}

func TestExecStartErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "script")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv []string
		code Code
		msg  string
	}{
		{[]string{"no-such-command-art"}, CodeNotFound, "command not found: no-such-command-art"},
		{[]string{"/no/such/file"}, CodeNotFound, "command not found: /no/such/file"},
		{[]string{noexec}, CodeNoExec, "cannot execute " + noexec + ": permission denied"},
	} {
		resp := execReq(t, nil, &Request{Command: c.argv})
		if resp.Status != StatusError || resp.ExitCode != ExitNotRun || resp.Error == nil ||
			resp.Error.Code != c.code || resp.Error.Message != c.msg {
			t.Errorf("%v: status %s exit %d error %+v", c.argv, resp.Status, resp.ExitCode, resp.Error)
		}
	}
}

func TestExecSetupAndUnsupported(t *testing.T) {
	r := &Runner{Prepare: func(context.Context, *Request) (*Launch, error) {
		return nil, errors.New("mount overlay: device busy")
	}}
	resp := execReq(t, r, sh("true"))
	if resp.Error == nil || resp.Error.Code != CodeSetup || resp.Error.Message != "mount overlay: device busy" || resp.ExitCode != ExitNotRun {
		t.Errorf("setup failure: %+v", resp.Error)
	}
	req := sh("true")
	req.Resources.MemoryBytes = 64 << 20
	resp = execReq(t, nil, req)
	if resp.Error == nil || resp.Error.Code != CodeUnsupported {
		t.Errorf("memory limit on the process executor: %+v", resp.Error)
	}
}

func TestExecMetrics(t *testing.T) {
	resp := execReq(t, nil, sh(`head -c 5000000 /dev/zero > /dev/null; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done`))
	m := resp.Metrics
	if m.IOBytesRead < 5_000_000 || m.IOBytesWritten < 5_000_000 {
		t.Errorf("io read %d written %d, want >= 5000000 each (head's, reaped by sh)", m.IOBytesRead, m.IOBytesWritten)
	}
	if m.UserTimeMS+m.KernelTimeMS == 0 || m.MaxMemoryBytes < 100<<10 || m.WallTimeMS < m.UserTimeMS/2 {
		t.Errorf("metrics %+v", m)
	}
}

func TestExecNetworkIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace for a plain process needs root")
	}
	ifaces := func(network bool) string {
		resp := execReq(t, nil, &Request{Command: []string{"cat", "/proc/net/dev"}, Isolation: Isolation{Network: network}})
		var names []string
		for _, l := range strings.Split(resp.Stdout, "\n")[2:] {
			if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
				names = append(names, name)
			}
		}
		return strings.Join(names, ",")
	}
	if got := ifaces(false); got != "lo" {
		t.Errorf("network false: interfaces %q, want lo only", got)
	}
	if got := ifaces(true); got == "lo" || got == "" {
		t.Logf("network true: interfaces %q (this host has no other)", got)
	}
}

func TestExecCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := NewProcessExecutor(t.TempDir(), nil)
	req := sh(`sleep 100 & echo $!; wait`)
	if os.Geteuid() != 0 {
		req.Isolation.Network = true
	}
	resp := r.Exec(ctx, req)
	if resp.Status != StatusKilled || resp.Error == nil || resp.Error.Code != CodeSignaled {
		t.Fatalf("status %s error %+v", resp.Status, resp.Error)
	}
	assertNoneRunning(t, pidsOf(t, resp.Stdout))
}
