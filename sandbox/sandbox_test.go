package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// nobody is the sandbox uid and gid these tests use when they run as
// root (the tests' workspaces are chowned to it so direct mode can write).
const nobody = 65534

// direct returns a direct-mode Config over a fresh workspace named ws,
// writable by the sandbox's uid.
func direct(t *testing.T) *sandbox.Config {
	t.Helper()
	testutil.Require(t, "bwrap")
	base := t.TempDir()
	// bwrap runs as the sandbox uid: it must be able to reach the bind
	// source (t.TempDir's parent is 0700).
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(ws, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	return &sandbox.Config{Name: "ws", Workspace: ws, UID: nobody, GID: nobody}
}

// run starts c with command argv and waits, returning stdout, stderr and
// the result.
func run(t *testing.T, c *sandbox.Config, argv ...string) (string, string, sandbox.Result) {
	t.Helper()
	c.Command = argv
	var out, errb bytes.Buffer
	p, err := sandbox.Start(c, sandbox.IO{Stdout: &out, Stderr: &errb}, nil)
	if err != nil {
		t.Fatalf("Start %q: %v", argv, err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait %q: %v", argv, err)
	}
	return out.String(), errb.String(), res
}

// sh runs a shell script inside and fails the test unless it exits 0.
func sh(t *testing.T, c *sandbox.Config, script string) string {
	t.Helper()
	out, errs, res := run(t, c, "sh", "-c", script)
	if res.ExitCode != 0 {
		t.Fatalf("sh -c %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, out, errs)
	}
	return out
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: an unprivileged art runs the sandbox as itself")
	}
}

func TestCapabilitiesAllDropped(t *testing.T) {
	c := direct(t)
	got := sh(t, c, `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status`)
	want := "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n" +
		"CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
	if got != want {
		t.Fatalf("capabilities inside:\n%s\nwant:\n%s", got, want)
	}
}

// procStatus reads one field ("Uid") of /proc/PID/status.
func procStatus(pid int, field string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// comm is a process's command name, "" once it is gone.
func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// tree lists pid's descendants from /proc.
func tree(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pp, _ := strconv.Atoi(procStatus(c, "PPid"))
		children[pp] = append(children[pp], c)
	}
	var out []int
	for q := children[pid]; len(q) > 0; q = q[1:] {
		out = append(out, q[0])
		q = append(q, children[q[0]]...)
	}
	return out
}

// waitFor polls f for up to d.
func waitFor(d time.Duration, f func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}

func TestRootRunsCommandAsUnprivilegedHostUID(t *testing.T) {
	requireRoot(t)
	c := direct(t)
	c.Command = []string{"sleep", "30"}
	p, err := sandbox.Start(c, sandbox.IO{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Stop(0, false)
	var sleepPid int
	if !waitFor(5*time.Second, func() bool {
		for _, pid := range tree(p.Pid()) {
			if comm(pid) == "sleep" {
				sleepPid = pid
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no sleep below bwrap (pid %d)", p.Pid())
	}
	// Real, effective, saved and filesystem uid: all the sandbox's.
	if got, want := procStatus(sleepPid, "Uid"), "65534\t65534\t65534\t65534"; got != want {
		t.Fatalf("host Uid of the sandboxed sleep = %q, want %q", got, want)
	}
	if got, want := procStatus(sleepPid, "Gid"), "65534\t65534\t65534\t65534"; got != want {
		t.Fatalf("host Gid of the sandboxed sleep = %q, want %q", got, want)
	}
}

func TestRootInsideCannotWriteCorePatternOrReadShadow(t *testing.T) {
	requireRoot(t)
	before, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		t.Fatal(err)
	}
	c := direct(t)
	got := sh(t, c, `
		if echo '|/tmp/pwned' > /proc/sys/kernel/core_pattern; then echo core_pattern=written; else echo core_pattern=denied; fi 2>/dev/null
		if cat /etc/shadow >/dev/null 2>&1; then echo shadow=read; else echo shadow=denied; fi
		id -u`)
	if want := "core_pattern=denied\nshadow=denied\n65534\n"; got != want {
		t.Fatalf("inside:\n%s\nwant:\n%s", got, want)
	}
	after, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	if !bytes.Equal(before, after) {
		t.Fatalf("core_pattern changed: %q -> %q", before, after)
	}
}

func TestOnlyStdioFDsReachTheCommand(t *testing.T) {
	c := direct(t)
	// An fd this process holds without close-on-exec, as one inherited
	// from a shell would be.
	fd, err := unix.Open("/etc/hostname", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if fd < 3 {
		t.Fatalf("test fd %d", fd)
	}
	// ls's own directory fd is the lowest free one: 3 when nothing leaked.
	if got, want := sh(t, c, "ls /proc/self/fd"), "0\n1\n2\n3\n"; got != want {
		t.Fatalf("fds inside (host fd %d held without CLOEXEC):\n%s\nwant:\n%s", fd, got, want)
	}
}

func TestEnvironmentIsCleared(t *testing.T) {
	t.Setenv("ART_SECRET", "1")
	c := direct(t)
	c.Env = []string{"FOO=bar baz"}
	got := sh(t, c, "env | sort")
	want := "FOO=bar baz\nHOME=/home/agent\nLOGNAME=agent\nPATH=/usr/local/bin:/usr/bin:/bin\nPWD=/home/agent/ws\nSHELL=/bin/sh\nUSER=agent\n"
	if got != want {
		t.Fatalf("env inside:\n%s\nwant:\n%s", got, want)
	}
}

func TestPrivateTmpfsHideHostFilesAndSockets(t *testing.T) {
	marker, err := os.CreateTemp("/tmp", "marker-")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	defer os.Remove(marker.Name())
	// A host socket where services keep theirs; /tmp when not root.
	sock := filepath.Join("/run", "art-test-"+strconv.Itoa(os.Getpid())+".sock")
	l, err := net.Listen("unix", sock)
	if err != nil && os.Geteuid() != 0 {
		sock = filepath.Join("/tmp", filepath.Base(sock))
		l, err = net.Listen("unix", sock)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := direct(t)
	got := sh(t, c, `
		for p in `+marker.Name()+` `+sock+`; do if test -e $p; then echo "$p visible"; fi; done
		for d in /tmp /run /var/run /var/tmp /root /home; do echo "$d: $(ls -A $d | tr '\n' ' ')"; done`)
	want := "/tmp: \n/run: \n/var/run: \n/var/tmp: \n/root: \n/home: agent \n"
	if got != want {
		t.Fatalf("inside:\n%s\nwant:\n%s", got, want)
	}
}

func TestNoNestedUserNamespaces(t *testing.T) {
	c := direct(t)
	if got, want := sh(t, c, "unshare -U true 2>/dev/null; echo $?"), "1\n"; got != want {
		t.Fatalf("unshare -U true inside: exit %q, want %q", got, want)
	}
}

func TestDevicesLimitedToAllowedSet(t *testing.T) {
	c := direct(t)
	got := strings.Fields(sh(t, c, "ls -A /dev"))
	want := []string{"core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("/dev inside: %q, want %q", got, want)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	c := direct(t)
	for _, tc := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"exit 0", 0, 0},
		{"exit 7", 7, 0},
		{"kill -TERM $$", 143, syscall.SIGTERM},
		{"kill -KILL $$", 137, syscall.SIGKILL},
	} {
		_, _, res := run(t, c, "sh", "-c", tc.script)
		if res.ExitCode != tc.code || res.Signal != tc.sig || res.TimedOut {
			t.Errorf("%s: exit %d signal %v timedOut %v, want exit %d signal %v", tc.script, res.ExitCode, res.Signal, res.TimedOut, tc.code, tc.sig)
		}
	}
}

func TestStopAfterTimeoutKillsTheTree(t *testing.T) {
	c := direct(t)
	// The shell and its child ignore SIGTERM: only the SIGKILL after the
	// grace period ends them.
	c.Command = []string{"sh", "-c", `trap '' TERM; sleep 30 & sleep 30; wait`}
	p, err := sandbox.Start(c, sandbox.IO{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return len(tree(p.Pid())) >= 4 }) {
		t.Fatalf("sandbox tree never had sh and two sleeps: %v", tree(p.Pid()))
	}
	pids := tree(p.Pid())
	start := time.Now()
	p.Stop(500*time.Millisecond, true)
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 124 || !res.TimedOut {
		t.Fatalf("after Stop(timedOut): exit %d timedOut %v, want 124 true", res.ExitCode, res.TimedOut)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Stop took %v with a 500ms grace", d)
	}
	// bwrap's init dies of its parent-death signal and takes the pid
	// namespace with it, asynchronously after bwrap itself: issue 4 asks
	// for no survivor within 1 s.
	alive := func() []int {
		var out []int
		for _, pid := range pids {
			if s := procStatus(pid, "State"); s != "" && !strings.HasPrefix(s, "Z") {
				out = append(out, pid)
			}
		}
		return out
	}
	if !waitFor(time.Second, func() bool { return len(alive()) == 0 }) {
		for _, pid := range alive() {
			t.Errorf("pid %d (%s) survived the stop by 1s: %s", pid, comm(pid), procStatus(pid, "State"))
		}
	}
}

func TestPolicyDirHiddenReadOnly(t *testing.T) {
	c := direct(t)
	policy := filepath.Join(c.Workspace, ".art", "config")
	if err := os.MkdirAll(policy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(policy, "binds.json"), []byte(`{"binds":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c.PolicyDir = filepath.Dir(policy) // .art
	got := sh(t, c, `echo "[$(ls -A .art/config)]"; if echo x > .art/config/binds.json; then echo written; fi 2>/dev/null; if mkdir .art/config/d; then echo made; fi 2>/dev/null; true`)
	if want := "[]\n"; got != want {
		t.Fatalf("policy dir inside:\n%s\nwant:\n%s", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(policy, "binds.json")); string(b) != `{"binds":[]}` {
		t.Fatalf("host binds.json changed: %q", b)
	}
}

func TestHiddenStoreFilesUnreadable(t *testing.T) {
	c := direct(t)
	var hide []string
	for _, n := range []string{"ws.db", "ws.db-wal", "ws.db-shm"} {
		p := filepath.Join(c.Workspace, n)
		if err := os.WriteFile(p, []byte("SQLite format 3\x00 secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		hide = append(hide, p)
	}
	c.Hide = hide
	// Through the workspace bind and at the host path alike.
	got := sh(t, c, `for f in ws.db ws.db-wal ws.db-shm `+strings.Join(hide, " ")+`; do cat $f 2>/dev/null; if echo x >> $f; then echo "$f writable"; fi 2>/dev/null; done; true`)
	if got != "" {
		t.Fatalf("hidden store files inside:\n%q\nwant nothing readable or writable", got)
	}
}

// cgroupMechanism is what Start should report on this machine as root.
func cgroupMechanism(t *testing.T) string {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "cgroup v2"
	}
	return "cgroup v1"
}

func TestPidsLimitHoldsTheTree(t *testing.T) {
	requireRoot(t)
	c := direct(t)
	c.Limits.Pids = 50
	script := `
import os, time
n = 0
for i in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    n += 1
print(n)
`
	c.Command = []string{"python3", "-c", script}
	var out bytes.Buffer
	p, err := sandbox.Start(c, sandbox.IO{Stdout: &out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.LimitedBy(), cgroupMechanism(t); got != want {
		t.Fatalf("LimitedBy = %q, want %q", got, want)
	}
	// 50 tasks: bwrap, its child (pid 1 inside), python and 47 forks.
	if got, want := out.String(), "47\n"; got != want || res.ExitCode != 0 {
		t.Fatalf("forks under --pids 50: %q (exit %d), want %q", got, res.ExitCode, want)
	}
}

func TestMemoryLimitKillsTheHog(t *testing.T) {
	requireRoot(t)
	c := direct(t)
	c.Limits.MemoryBytes = 64 << 20
	out, _, res := run(t, c, "python3", "-c", `b = bytearray(1 << 30); b[::4096] = b"x" * (len(b) // 4096); print("survived")`)
	if out != "" || res.ExitCode != 137 || res.Signal != syscall.SIGKILL || !res.OOMKilled {
		t.Fatalf("1 GiB under a 64 MiB limit: stdout %q exit %d signal %v oom %v, want exit 137 SIGKILL oom", out, res.ExitCode, res.Signal, res.OOMKilled)
	}
	if res.MaxMemory <= 0 || res.MaxMemory > 64<<20 {
		t.Fatalf("MaxMemory %d, want in (0, 64 MiB]", res.MaxMemory)
	}
}

func TestNetNoneLeavesOnlyLoopback(t *testing.T) {
	c := direct(t)
	c.Net = sandbox.NetNone
	got := sh(t, c, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	if want := "lo\n"; got != want {
		t.Fatalf("interfaces with Net none: %q, want %q", got, want)
	}
}

func TestValidateRefusesUnsafeConfigs(t *testing.T) {
	for name, mutate := range map[string]func(c *sandbox.Config){
		"uid 0":           func(c *sandbox.Config) { c.UID = 0 },
		"gid 0":           func(c *sandbox.Config) { c.GID = 0 },
		"bind onto /proc": func(c *sandbox.Config) { c.Binds = []sandbox.Bind{{Host: "/tmp", Guest: "/proc/x"}} },
		"bind onto /":     func(c *sandbox.Config) { c.Binds = []sandbox.Bind{{Host: "/tmp", Guest: "/"}} },
		"relative home":   func(c *sandbox.Config) { c.Workspace = "ws" },
		"bad env":         func(c *sandbox.Config) { c.Env = []string{"1X=y"} },
		"no command":      func(c *sandbox.Config) { c.Command = nil },
		"bad net":         func(c *sandbox.Config) { c.Net = "bridge" },
	} {
		c := &sandbox.Config{Name: "ws", Workspace: "/nonexistent/ws", UID: nobody, GID: nobody, Command: []string{"true"}}
		mutate(c)
		if _, err := sandbox.Start(c, sandbox.IO{}, nil); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%s: Start = %v, want ErrInvalid", name, err)
		}
	}
}

// Regression: an art killed with SIGKILL never removes its cgroups; the
// next sandbox removes the empty ones whose art is gone, and no other
// (beside its start; its Wait waits for the sweep).
func TestStartSweepsCgroupsOfDeadArt(t *testing.T) {
	requireRoot(t)
	if cgroupMechanism(t) != "cgroup v1" {
		t.Skip("cgroup v2 here: the v1 layout this test builds does not apply")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	parent := "/sys/fs/cgroup/pids" + ownPidsCgroup(t)
	stale := filepath.Join(parent, fmt.Sprintf("art-%d-1", dead.Process.Pid))
	live := filepath.Join(parent, fmt.Sprintf("art-%d-999999", os.Getpid()))
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(d)
	}
	c := direct(t)
	sh(t, c, "true")
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s of a dead art still there after the next Start: %v", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("cgroup %s of a live art removed: %v", live, err)
	}
}

// ownPidsCgroup is this process's path in the v1 pids hierarchy.
func ownPidsCgroup(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "pids" {
			return strings.TrimSuffix(f[2], "/")
		}
	}
	t.Skip("no v1 pids hierarchy")
	return ""
}

// Regression: a bind bwrap cannot mount (its guest path cannot be made on
// the read-only root) ends the sandbox with bwrap's own message and exit
// 1, not with an error about the cgroup art could not join the dead
// child to.
func TestBwrapSetupFailureIsTheCommandsFailure(t *testing.T) {
	c := direct(t)
	c.Binds = []sandbox.Bind{{Host: c.Workspace, Guest: "/nonexistent-art-test/data", ReadOnly: true}}
	c.Limits.Pids = 100 // a cgroup to join, as root
	for i := 0; i < 5; i++ {
		out, errs, res := run(t, c, "echo", "ran")
		if want := "bwrap: Can't mkdir parents for /nonexistent-art-test/data: Read-only file system\n"; out != "" || res.ExitCode != 1 || errs != want {
			t.Fatalf("run %d: stdout %q exit %d stderr %q, want exit 1 and bwrap's message", i, out, res.ExitCode, errs)
		}
	}
}

// Regression: the sweep of stale cgroups kills nothing. A cgroup named
// for an art this process cannot see (another pid namespace) that still
// holds processes is a live sandbox: it keeps them and stays.
func TestStartSweepKeepsNonEmptyCgroups(t *testing.T) {
	requireRoot(t)
	if cgroupMechanism(t) != "cgroup v1" {
		t.Skip("cgroup v2 here: the v1 layout this test builds does not apply")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	parent := "/sys/fs/cgroup/pids" + ownPidsCgroup(t)
	other := filepath.Join(parent, fmt.Sprintf("art-%d-1", dead.Process.Pid))
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := exec.Command("sleep", "30")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		victim.Process.Kill()
		victim.Wait()
		waitFor(2*time.Second, func() bool { return os.Remove(other) == nil })
	}()
	if err := os.WriteFile(filepath.Join(other, "cgroup.procs"), []byte(strconv.Itoa(victim.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	c := direct(t)
	sh(t, c, "true")
	if s := procStatus(victim.Process.Pid, "State"); s == "" || strings.HasPrefix(s, "Z") {
		t.Fatalf("a process in another art's cgroup was killed by the sweep (state %q)", s)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("non-empty cgroup %s removed: %v", other, err)
	}
}

// Regression: with the host's network (Net host, the default) abstract
// UNIX sockets are shared - an X11 or D-Bus socket of the host would be
// one connect away - and no mount hides them. The sandbox is scoped
// against them (Landlock); its own abstract sockets work.
func TestHostAbstractSocketsOutOfReach(t *testing.T) {
	var abi int
	if r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); errno == 0 {
		abi = int(r)
	}
	if abi < 6 {
		t.Skipf("Landlock ABI %d: scoping needs 6 (Linux 6.12)", abi)
	}
	name := fmt.Sprintf("art-test-abstract-%d", os.Getpid())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c := direct(t)
	c.Net = sandbox.NetHost
	script := fmt.Sprintf(`
import os, socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0%s"); print("abstract: connected")
except OSError as e:
    print("abstract: errno", e.errno)
own = socket.socket(socket.AF_UNIX); own.bind("\0inside"); own.listen(1)
t = socket.socket(socket.AF_UNIX); t.connect("\0inside"); print("own abstract: connected")
`, name)
	out, errs, res := run(t, c, "python3", "-c", script)
	if want := fmt.Sprintf("abstract: errno %d\nown abstract: connected\n", unix.EPERM); out != want || res.ExitCode != 0 {
		t.Fatalf("inside:\n%s(exit %d, stderr %s)\nwant:\n%s", out, res.ExitCode, errs, want)
	}
}

// Regression: a read-write bind of a directory holding the workspace
// showed its .art writable: the agent planted a binds.json there.
func TestPolicyDirCoveredThroughABind(t *testing.T) {
	c := direct(t)
	art := filepath.Join(c.Workspace, ".art")
	if err := os.MkdirAll(filepath.Join(art, "config"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(art, "config"), 0o777)
	c.PolicyDir = art
	parent := filepath.Dir(c.Workspace)
	c.Binds = []sandbox.Bind{{Host: parent, Guest: "/tmp/parent"}}
	got := sh(t, c, `echo "[$(ls -A /tmp/parent/ws/.art)]"; echo '{}' > /tmp/parent/ws/.art/config/binds.json 2>/dev/null && echo planted; true`)
	if want := "[]\n"; got != want {
		t.Fatalf("the workspace's .art through a bind of its parent:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(art, "config", "binds.json")); err == nil {
		t.Fatal("binds.json planted on the host through the bind")
	}
}
