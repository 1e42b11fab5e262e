package main

// End-to-end tests of art run --warm (session/warm.go): the built binary,
// its detached daemon, real FUSE and bwrap.

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
)

// warmWorkspace is overlayWorkspace whose host files are out of the
// capture's racy window (2 s), so that an unchanged host proves
// unchanged and a warm mount can be reused. Its cleanup stops the
// branch's daemon, whatever the test did.
func warmWorkspace(t *testing.T) (string, string) {
	t.Helper()
	ws, db := overlayWorkspace(t)
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{filepath.Join(ws, "main.py"), ws} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2100 * time.Millisecond) // their ctimes too
	t.Cleanup(func() { stopWarm(t, db, "main") })
	return ws, db
}

// stopWarm asks the warm daemon of db's branch to go and waits until its
// process has.
func stopWarm(t *testing.T, db, branch string) {
	t.Helper()
	pid := warmPID(db)
	// Right after the test's last run: the daemon waits for that run's
	// clean-up rather than answer busy (warmDaemon.waitEndedLocked).
	if _, err := session.YieldWarm(db, branch, pid); err != nil {
		t.Errorf("yield the warm daemon: %v", err)
	}
	if pid != 0 && !waitUntil(30*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Errorf("warm daemon %d still alive; killing it", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	os.Remove(session.WarmLog(db, branch))
}

// warmPID is the pid of the warm daemon serving the store db (0: none).
// A child the daemon is starting (the next run's sandbox) has the
// daemon's command line until it executes bwrap: the daemon is the one
// whose parent is not a daemon of db too.
func warmPID(db string) int {
	abs, _ := filepath.Abs(db)
	ents, _ := os.ReadDir("/proc")
	found := map[int]int{} // pid: parent pid
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 2 && args[1] == session.WarmDaemonCommand {
			for i, a := range args {
				if a == "--db" && i+1 < len(args) && args[i+1] == abs {
					found[pid] = statField(pid, 4) // ppid
				}
			}
		}
	}
	daemon := 0
	for pid, ppid := range found {
		if _, child := found[ppid]; !child && ppid > 0 && (daemon == 0 || pid < daemon) {
			daemon = pid // the lowest, as before, when two are alive (one going)
		}
	}
	return daemon
}

// snapshotOf is the id of db's oldest snapshot whose message has msg.
func snapshotOf(t *testing.T, db, msg string) string {
	t.Helper()
	id := ""
	for _, line := range strings.Split(mustRun(t, "log", "-d", db).stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "snapshot" && strings.Contains(line, msg) {
			id = f[1] // art log lists the newest first
		}
	}
	if id == "" {
		t.Fatalf("no snapshot %q in art log", msg)
	}
	return id
}

func countRunOps(t *testing.T, db string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(mustRun(t, "log", "-d", db).stdout, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[0] == "op" && f[5] == "run" {
			n++
		}
	}
	return n
}

func TestWarmRunsReuseOneMount(t *testing.T) {
	ws, db := warmWorkspace(t)
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo one > f1")
	pid := warmPID(db)
	if pid == 0 {
		t.Fatal("no warm daemon after a --warm run")
	}
	r := mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", "cat f1; echo two > f2; rm main.py")
	if r.stdout != "one\n" {
		t.Errorf("second run read f1 as %q, want one", r.stdout)
	}
	if !strings.Contains(r.stderr, "2 paths changed") {
		t.Errorf("second run's summary %q: want 2 paths changed", r.stderr)
	}
	if got := warmPID(db); got != pid {
		t.Errorf("second run served by daemon %d, want the first's %d (the mount reused)", got, pid)
	}
	// The store has both runs, while the daemon still holds the branch.
	if got := mustRun(t, "cat", "-d", db, "main:ws/f2").stdout; got != "two\n" {
		t.Errorf("f2 in the branch's head: %q", got)
	}
	if n := countRunOps(t, db); n != 2 {
		t.Errorf("art log shows %d run ops, want 2:\n%s", n, mustRun(t, "log", "-d", db).stdout)
	}
	if r := artRun(t, "cat", "-d", db, "main:ws/main.py"); r.code == 0 {
		t.Errorf("main.py, removed by the second run, is still in the head")
	}
	if got := mustRun(t, "cat", "-d", db, "main~1:ws/f1").stdout; got != "one\n" {
		t.Errorf("f1 in the first run's snapshot: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "f1")); err == nil {
		t.Errorf("the warm run wrote the host workspace")
	}
}

// A script's runs follow each other at once: each next begin (and the
// clean-up's yield right after the last) may reach the daemon while it
// is still cleaning up after the run before. It must wait for that, not
// report the branch in use by the client that has just returned.
func TestWarmBackToBackRunsNeverFindTheBranchInUse(t *testing.T) {
	ws, db := warmWorkspace(t)
	pid := 0
	for i := range 12 {
		r := artRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo "+strconv.Itoa(i)+" >> n")
		if r.code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, r.code, r.stderr)
		}
		if i == 0 {
			pid = warmPID(db)
		} else if got := warmPID(db); got != pid {
			t.Errorf("run %d served by daemon %d, want %d", i, got, pid)
		}
	}
	if n := countRunOps(t, db); n != 12 {
		t.Errorf("art log shows %d run ops, want 12", n)
	}
}

func TestWarmHostEditDiscardsMount(t *testing.T) {
	ws, db := warmWorkspace(t)
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	pid := warmPID(db)
	writeFile(t, filepath.Join(ws, "main.py"), "print('edited on the host')\n")
	r := mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "cat", "main.py")
	if r.stdout != "print('edited on the host')\n" {
		t.Errorf("the run after a host edit read %q", r.stdout)
	}
	if got := warmPID(db); got == pid || got == 0 {
		t.Errorf("daemon after the host edit: %d (before: %d): want a fresh one", got, pid)
	}
	if got := mustRun(t, "cat", "-d", db, "main:ws/main.py").stdout; got != "print('edited on the host')\n" {
		t.Errorf("the host edit was not captured: %q", got)
	}
}

// TestWarmFreshFilesReuseMount: host files written moments before the
// daemon's capture have racy import records, which a stat cannot prove
// unchanged; the reuse check reads them instead (RacyByContent), so the
// next run still reuses the mount - it used to discard it, and its
// replacement's capture was racy again, until the files were 2 s old -
// while an edit of such a file is still a fresh daemon that captures it.
func TestWarmFreshFilesReuseMount(t *testing.T) {
	ws, db := overlayWorkspace(t)
	t.Cleanup(func() { stopWarm(t, db, "main") })
	// An mtime ahead of the clock is within the racy window of any
	// capture: racy records however slowly the machine gets to them.
	soon := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(ws, "main.py"), soon, soon); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	pid := warmPID(db)
	if pid == 0 {
		t.Fatal("no warm daemon after a --warm run")
	}
	r := mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "cat", "main.py")
	if r.stdout != "print('hello')\n" {
		t.Errorf("second run read main.py as %q", r.stdout)
	}
	if got := warmPID(db); got != pid {
		log, _ := os.ReadFile(session.WarmLog(db, "main"))
		t.Fatalf("second run served by daemon %d, want the first's %d (the mount reused); log:\n%s", got, pid, log)
	}
	writeFile(t, filepath.Join(ws, "main.py"), "print('HELLO')\n") // same size, within the racy window
	r = mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "cat", "main.py")
	if r.stdout != "print('HELLO')\n" {
		t.Errorf("the run after a host edit read %q", r.stdout)
	}
	if got := warmPID(db); got == pid || got == 0 {
		t.Errorf("daemon after the host edit: %d (before: %d): want a fresh one", got, pid)
	}
}

func TestWarmIdleDaemonYieldsToCheckoutAndUndo(t *testing.T) {
	ws, db := warmWorkspace(t)
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo v1 > v")
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo v2 > v")
	if warmPID(db) == 0 {
		t.Fatal("no warm daemon")
	}
	mustRun(t, "undo", "-d", db)
	// It answers the yield before its process ends.
	if !waitUntil(5*time.Second, func() bool { return warmPID(db) == 0 }) {
		t.Errorf("warm daemon %d still there after undo", warmPID(db))
	}
	if got := mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "cat", "v").stdout; got != "v1\n" {
		t.Errorf("after undo the warm run sees v = %q, want v1", got)
	}
	mustRun(t, "checkout", "-d", db, snapshotOf(t, db, "capture workspace"))
	if got := artRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "cat", "v"); got.code == 0 {
		t.Errorf("after checkout of the state before v, the warm run still reads v = %q", got.stdout)
	}
	// A non-warm run of the branch makes the idle daemon go too.
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	if pid := warmPID(db); pid != 0 {
		t.Errorf("warm daemon %d still there after a plain run of its branch", pid)
	}
}

func TestWarmLiveRunRefusesCheckout(t *testing.T) {
	ws, db := warmWorkspace(t)
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	cmd := artCmd(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sleep", "30.25")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM)
	// The daemon's sandbox started ahead runs it.
	findBelow(t, warmPID(db), "sleep")
	r := artRun(t, "checkout", "-d", db, "main~1")
	if r.code == 0 || !strings.Contains(r.stderr, "in use") {
		t.Errorf("checkout during a live warm run: exit %d, %s", r.code, r.stderr)
	}
	if warmPID(db) == 0 {
		t.Errorf("the live run's daemon is gone")
	}
}

func TestWarmDaemonExitsWhenIdle(t *testing.T) {
	ws, db := warmWorkspace(t)
	uppers, _ := filepath.Glob(filepath.Join(os.TempDir(), "art-upper-*"))
	mustRun(t, "run", "--warm", "2s", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo x > x")
	pid := warmPID(db)
	if pid == 0 {
		t.Fatal("no warm daemon")
	}
	abs, _ := filepath.Abs(db)
	// The daemon's session: its lock names the store (session.List).
	var home string
	sessions, _ := filepath.Glob(filepath.Join(journal.LockDir(), "session-*"))
	for _, s := range sessions {
		if b, err := os.ReadFile(filepath.Join(s, "lock")); err == nil && strings.Contains(string(b), abs) {
			home = filepath.Join(s, "home")
		}
	}
	if home == "" {
		t.Errorf("no session directory of the warm daemon in %s", journal.LockDir())
	}
	if !waitUntil(30*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Fatalf("warm daemon %d alive 30 s after a 2 s idle time", pid)
	}
	for _, m := range fuseMounts(t) {
		if m == home {
			t.Errorf("mount %s left by the idle daemon", m)
		}
	}
	if _, err := os.Stat(filepath.Dir(home)); home != "" && err == nil {
		t.Errorf("session directory %s left by the idle daemon", filepath.Dir(home))
	}
	if _, err := os.Stat(session.WarmSocket(db, "main")); err == nil {
		t.Errorf("socket left by the idle daemon")
	}
	locks, _ := filepath.Glob(filepath.Join(journal.LockDir(), "lock-*"))
	for _, l := range locks {
		if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), abs+"\n") {
			t.Errorf("lock file %s of the store left by the idle daemon", l)
		}
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "art-upper-*")); len(after) > len(uppers) {
		t.Errorf("upper dirs left: %v (before %v)", after, uppers)
	}
	if got := mustRun(t, "cat", "-d", db, "main:ws/x").stdout; got != "x\n" {
		t.Errorf("x: %q", got)
	}
	os.Remove(session.WarmLog(db, "main"))
}

func TestWarmClientKilledMidRun(t *testing.T) {
	ws, db := warmWorkspace(t)
	mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	pid := warmPID(db)
	cmd := artCmd(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo partial > p; exec sleep 30.5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The daemon's sandbox started ahead runs it; it dies with the
	// client all the same.
	findBelow(t, pid, "sleep")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !waitUntil(30*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Fatalf("warm daemon %d still alive after its client was killed", pid)
	}
	if len(cmdlinePids("sleep", "30.5")) != 0 {
		t.Errorf("the killed run's sandbox lives on")
	}
	mustRun(t, "verify", "-d", db)
	if got := mustRun(t, "cat", "-d", db, "main:ws/p").stdout; got != "partial\n" {
		t.Errorf("p written before the kill: %q", got)
	}
	if log := mustRun(t, "log", "-d", db).stdout; !strings.Contains(log, "exit 137") && !strings.Contains(log, "137") {
		t.Logf("log:\n%s", log)
	}
	if n := countRunOps(t, db); n != 2 {
		t.Errorf("%d run ops, want 2", n)
	}
	// And the next warm run works.
	if got := mustRun(t, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "cat", "p").stdout; got != "partial\n" {
		t.Errorf("next warm run read p = %q", got)
	}
}

func TestWarmUsageErrors(t *testing.T) {
	ws, db := runWorkspace(t)
	for _, args := range [][]string{
		{"run", "--warm", "1m", "-m", ws, "--", "true"},
		{"run", "--warm", "1m", "-m", ws, "-d", db, "--trace", "--", "true"},
		{"run", "--warm", "1m", "-m", ws, "-d", db, "--net", "allow", "--allow", "example.com", "--", "true"},
		{"run", "--warm=-1s", "-m", ws, "-d", db, "--", "true"},
	} {
		if _, errs, code := art(t, args...); code != exitUsage {
			t.Errorf("art %s: exit %d, want %d (%s)", strings.Join(args, " "), code, exitUsage, errs)
		}
	}
}
