package main

// End-to-end tests of the warm daemon's sandbox started ahead
// (session/warmready.go): the built binary, real FUSE and bwrap.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/session"
)

// readyPhase is the ART_PHASES step a client shows when its command ran
// in the daemon's sandbox started ahead.
const readyPhase = "ready sandbox: command and end"

// warmRun runs art run --warm ... -- argv with ART_PHASES=1 and stdin
// in, and says whether the command ran in a sandbox started ahead.
func warmRun(t *testing.T, ws, db, in string, opts []string, argv ...string) (runOut, bool) {
	t.Helper()
	args := append([]string{"run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q"}, opts...)
	cmd := artCmd(t, append(append(args, "--"), argv...)...)
	cmd.Env = append(cmd.Env, "ART_PHASES=1")
	cmd.Stdin = strings.NewReader(in)
	r := exe(t, cmd)
	ready := strings.Contains(r.stderr, readyPhase)
	var keep []string
	for _, l := range strings.SplitAfter(r.stderr, "\n") {
		// The phases, and the daemon's first capture (its first run).
		if !strings.HasPrefix(l, "art: phases") && !strings.HasPrefix(l, "art: first capture") {
			keep = append(keep, l)
		}
	}
	r.stderr = strings.Join(keep, "")
	return r, ready
}

// stubPids are the processes of sandboxes started ahead (their stubs,
// waiting for a command).
func stubPids() []int {
	return cmdlinePids("/proc/self/fd/3", "__sandbox-stub")
}

// runEvents are the journal events of each run op of db, oldest first,
// without what differs from run to run by nature (sequence numbers, op
// ids, times, hashes, the client's pid, mtimes).
func runEvents(t *testing.T, db string) [][]map[string]any {
	t.Helper()
	var evs []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "log", "-d", db, "--events", "--json").stdout), &evs); err != nil {
		t.Fatal(err)
	}
	byOp := map[float64][]map[string]any{}
	var order []float64
	isRun := map[float64]bool{}
	for _, e := range evs {
		op, _ := e["op"].(float64)
		if e["kind"] == "begin" && strings.HasPrefix(fmt.Sprint(e["text"]), "sh ") {
			isRun[op] = true
		}
		if _, ok := byOp[op]; !ok {
			order = append(order, op)
		}
		for _, k := range []string{"seq", "op", "time_ns", "prev", "hash", "pid", "root"} {
			delete(e, k)
		}
		if a, ok := e["attr"].(map[string]any); ok {
			delete(a, "mtime_ns")
		}
		if v, ok := e["value"].(string); ok && e["kind"] == "exec" {
			// An exec's record: its time and host pids differ.
			var rec map[string]any
			b, _ := base64.StdEncoding.DecodeString(v)
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatalf("exec record %q: %v", b, err)
			}
			for _, k := range []string{"time", "pid", "ppid"} {
				delete(rec, k)
			}
			e["value"] = rec
		}
		byOp[op] = append(byOp[op], e)
	}
	var out [][]map[string]any
	for _, op := range order {
		if isRun[op] {
			out = append(out, byOp[op])
		}
	}
	return out
}

func TestWarmReadySandboxRunsAsAFreshOne(t *testing.T) {
	ws, db := warmWorkspace(t)
	// What the command gets (fds, environment, cwd, ids, umask,
	// capabilities, seccomp, signals), what it reads and writes, and its
	// exit status.
	script := `ls /proc/self/fd; env | sort; pwd; id -u; id -g; umask; ulimit -a; ` +
		`grep -E '^(Cap|NoNewPrivs|Seccomp|SigBlk|SigIgn)' /proc/self/status; cat; ` +
		`echo x > out; mkdir d; echo y > d/f; rm -r out d; echo to-stderr >&2; exit 3`
	opts := []string{"-e", "FOO=bar baz"}
	fresh, usedReady := warmRun(t, ws, db, "from stdin\n", opts, "sh", "-c", script)
	if usedReady {
		t.Fatal("the daemon's first run used a sandbox started ahead")
	}
	if fresh.code != 3 || !strings.Contains(fresh.stdout, "from stdin\n") || !strings.Contains(fresh.stdout, "FOO=bar baz\n") {
		t.Fatalf("fresh run: exit %d\n%s\n%s", fresh.code, fresh.stdout, fresh.stderr)
	}
	ready, usedReady := warmRun(t, ws, db, "from stdin\n", opts, "sh", "-c", script)
	if !usedReady {
		t.Fatalf("the second run did not use the sandbox started ahead (daemon log: %s)", readLog(db))
	}
	if ready.code != fresh.code || ready.stdout != fresh.stdout || ready.stderr != fresh.stderr {
		t.Fatalf("fresh: exit %d\n%s\n%s\nready: exit %d\n%s\n%s", fresh.code, fresh.stdout, fresh.stderr, ready.code, ready.stdout, ready.stderr)
	}
	if !strings.HasPrefix(ready.stdout, "0\n1\n2\n3\n") || strings.Contains(ready.stdout, "\n4\n") {
		t.Errorf("fds inside (ls's own is 3):\n%s", ready.stdout)
	}
	runs := runEvents(t, db)
	if len(runs) != 2 {
		t.Fatalf("%d run ops, want 2", len(runs))
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		a, _ := json.MarshalIndent(runs[0], "", " ")
		b, _ := json.MarshalIndent(runs[1], "", " ")
		t.Errorf("journal of the fresh run:\n%s\nof the run on the ready sandbox:\n%s", a, b)
	}
	if len(runs[1]) < 4 {
		t.Errorf("run's events: %v", runs[1])
	}
	// The sandbox ready now was started after a run with FOO: nothing
	// of that run's environment shows in it (bwrap's arguments are
	// readable inside, as /proc/1/cmdline).
	r, usedReady := warmRun(t, ws, db, "", nil, "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; env")
	if !usedReady || r.code != 0 || strings.Contains(r.stdout, "FOO") || !strings.Contains(r.stdout, "bwrap") {
		t.Errorf("third run: ready %v, exit %d, shows the last run's environment or no bwrap:\n%s", usedReady, r.code, r.stdout)
	}
}

func readLog(db string) string {
	b, _ := os.ReadFile(session.WarmLog(db, "main"))
	return string(b)
}

func TestWarmReadySandboxDiscardedWhenTheOptionsChange(t *testing.T) {
	ws, db := warmWorkspace(t)
	if _, ready := warmRun(t, ws, db, "", nil, "true"); ready {
		t.Fatal("first run ready")
	}
	if _, ready := warmRun(t, ws, db, "", nil, "true"); !ready {
		t.Fatal("second run (same options) did not use the sandbox started ahead")
	}
	r, ready := warmRun(t, ws, db, "", []string{"--net", "none"}, "sh", "-c", "cat /proc/net/dev | grep -c :")
	if ready {
		t.Fatal("a run with --net none used the sandbox started with the host's network")
	}
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("--net none run: exit %d, %q interfaces (want only lo)\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(readLog(db), "sandbox ahead discarded") {
		t.Errorf("daemon log does not say it discarded the sandbox ahead:\n%s", readLog(db))
	}
	r, ready = warmRun(t, ws, db, "", []string{"--net", "none"}, "sh", "-c", "cat /proc/net/dev | grep -c :")
	if !ready || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("the next --net none run: ready %v, %q interfaces", ready, r.stdout)
	}
	// The discarded one is gone: one stub at most, the next run's.
	pid := warmPID(db)
	var stubs []int
	if !waitUntil(10*time.Second, func() bool { stubs = stubsBelow(pid); return len(stubs) == 1 }) {
		t.Errorf("stubs below the daemon: %v, want the one ready", stubsBelow(pid))
	}
	stopWarm(t, db, "main")
	for _, s := range stubs {
		if syscall.Kill(s, 0) == nil && pidState(s) != "Z" {
			t.Errorf("stub %d outlived its daemon's yield", s)
		}
	}
}

// stubsBelow are the stubs waiting in sandboxes below pid.
func stubsBelow(pid int) []int {
	var out []int
	below := map[int]bool{}
	for _, p := range descendantsOf(pid) {
		below[p] = true
	}
	for _, p := range stubPids() {
		if below[p] {
			out = append(out, p)
		}
	}
	return out
}

func TestWarmReadySandboxDiesWithTheDaemon(t *testing.T) {
	ws, db := warmWorkspace(t)
	warmRun(t, ws, db, "", nil, "true")
	pid := warmPID(db)
	var stubs []int
	if !waitUntil(10*time.Second, func() bool { stubs = stubsBelow(pid); return len(stubs) == 1 }) {
		t.Fatalf("no sandbox ready below the daemon %d", pid)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !waitUntil(10*time.Second, func() bool { return syscall.Kill(stubs[0], 0) != nil || pidState(stubs[0]) == "Z" }) {
		t.Errorf("stub %d outlived its daemon (SIGKILL)", stubs[0])
		syscall.Kill(stubs[0], syscall.SIGKILL)
	}
	// The next session cleans up what the killed daemon left (its mount,
	// its session directory, its upper directory, its socket).
	sock := session.WarmSocket(db, "main")
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the killed daemon's socket: %v", err)
	}
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		os.Remove(sock)
		t.Errorf("the killed daemon's socket %s is still there after a session of its branch (%v)", sock, err)
	}
}

func TestWarmReadySandboxSignalsAndTimeout(t *testing.T) {
	ws, db := warmWorkspace(t)
	warmRun(t, ws, db, "", nil, "true")
	if r, ready := warmRun(t, ws, db, "", []string{"--timeout", "1s"}, "sleep", "30"); r.code != 124 || !ready {
		t.Errorf("timeout on the ready sandbox: exit %d (want 124), ready %v\n%s", r.code, ready, r.stderr)
	}
	pid := warmPID(db)
	if !waitUntil(10*time.Second, func() bool { return len(stubsBelow(pid)) == 1 }) {
		t.Fatal("no sandbox ready")
	}
	// The timeout only bounds a SIGINT that went unheeded (exit 124, not
	// 130): a 1 s timeout raced the search for the sleep on a loaded
	// machine and won.
	cmd := artCmd(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--timeout", "20s", "--", "sleep", "30.75")
	cmd.Env = append(cmd.Env, "ART_PHASES=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	findBelow(t, pid, "sleep")
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("SIGINT to the client: %v (want exit 130)\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), readyPhase) {
		t.Errorf("the SIGINT run did not use the sandbox started ahead")
	}
	if !strings.Contains(mustRun(t, "log", "-d", db).stdout, "[exit 130]") {
		t.Errorf("log lacks the interrupted run's exit 130")
	}
}
