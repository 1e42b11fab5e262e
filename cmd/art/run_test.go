package main

// End-to-end tests of art run: the built binary, driven as a user would,
// with real bwrap, real FUSE and real cgroups (issue 4).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/sandbox"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// runOut is one finished art invocation.
type runOut struct {
	stdout, stderr string
	code           int
	wall           time.Duration
}

// artCmd is the built binary with args, its environment the test's.
func artCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(artBinary(t), args...)
	cmd.Env = os.Environ()
	return cmd
}

// exe runs cmd to the end (stdin /dev/null unless set).
func exe(t *testing.T, cmd *exec.Cmd) runOut {
	t.Helper()
	var out, errb bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &errb
	}
	start := time.Now()
	err := cmd.Run()
	r := runOut{stdout: out.String(), stderr: errb.String(), wall: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errorsAs(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	return r
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// artRun runs `art ARGS...` and returns what it did.
func artRun(t *testing.T, args ...string) runOut {
	t.Helper()
	return exe(t, artCmd(t, args...))
}

// mustRun is artRun that fails the test unless art exits 0.
func mustRun(t *testing.T, args ...string) runOut {
	t.Helper()
	r := artRun(t, args...)
	if r.code != 0 {
		t.Fatalf("art %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// runWorkspace makes base/ws (reachable and, in direct mode, writable by
// the sandbox's uid) with one file, and returns (ws, db). Overlay mode
// (-d db) needs FUSE too: see overlayWorkspace and RequireFUSE.
func runWorkspace(t *testing.T) (string, string) {
	t.Helper()
	testutil.Require(t, "bwrap")
	base := t.TempDir()
	return populate(t, base), filepath.Join(base, "ws.db")
}

// overlayWorkspace is runWorkspace for a test that runs with a store.
func overlayWorkspace(t *testing.T) (string, string) {
	t.Helper()
	testutil.RequireFUSE(t)
	return runWorkspace(t)
}

func populate(t *testing.T, base string) string {
	t.Helper()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(base, "ws")
	writeFile(t, filepath.Join(ws, "main.py"), "print('hello')\n")
	if os.Geteuid() == 0 {
		for _, p := range []string{ws, filepath.Join(ws, "main.py")} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ws
}

// hostVisibleDir is a fresh directory that is visible inside the sandbox
// at its own path (t.TempDir is under /tmp, which the sandbox replaces).
// It is made under the package's directory, so a checkout the sandbox
// hides (under /tmp, /var/tmp, /home...) cannot run these tests: a command
// waiting there for a file the test writes would wait forever.
func hostVisibleDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if sandbox.HiddenInside(wd) {
		t.Fatalf("the checkout %s is under a directory the sandbox replaces with a private one: run the tests from a checkout elsewhere", wd)
	}
	d, err := os.MkdirTemp(wd, ".run-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// pidState is a host process's state letter, "" once it is gone.
func pidState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[0]
}

// statField is field n (1-based, as in proc(5)) of /proc/PID/stat.
func statField(pid, n int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	v, _ := strconv.Atoi(f[n-3])
	return v
}

// descendantsOf lists pid's descendants on the host.
func descendantsOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		children[statField(c, 4)] = append(children[statField(c, 4)], c)
	}
	var out []int
	for q := children[pid]; len(q) > 0; q = q[1:] {
		out = append(out, q[0])
		q = append(q, children[q[0]]...)
	}
	return out
}

// cmdlinePids lists host processes whose argv is exactly argv, except
// those already exiting (PF_EXITING: killed, past the point of return).
func cmdlinePids(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		const pfExiting = 0x4
		if b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); string(b) == want && pidState(pid) != "Z" && statField(pid, 9)&pfExiting == 0 {
			out = append(out, pid)
		}
	}
	return out
}

// waitUntil polls f for up to d.
func waitUntil(d time.Duration, f func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}

// findBelow waits for a process named comm below pid.
func findBelow(t *testing.T, pid int, comm string) int {
	t.Helper()
	var found int
	if !waitUntil(10*time.Second, func() bool {
		for _, c := range descendantsOf(pid) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(b)) == comm {
				found = c
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no %s below pid %d", comm, pid)
	}
	return found
}

func TestRunDieWithParentOnKill9(t *testing.T) {
	for _, mode := range []string{"direct", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			ws, db := runWorkspace(t)
			args := []string{"run", "-m", ws, "-i=false", "-q"}
			if mode == "overlay" {
				testutil.RequireFUSE(t)
				args = append(args, "-d", db)
				// The next run cleans up the killed one's mount.
				t.Cleanup(func() { artRun(t, append(args, "--", "true")...) })
			}
			cmd := artCmd(t, append(args, "--", "sh", "-c", "sleep 60.25 & sleep 60.25")...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			findBelow(t, cmd.Process.Pid, "sleep")
			waitUntil(5*time.Second, func() bool { return len(cmdlinePids("sleep", "60.25")) == 2 })
			tree := descendantsOf(cmd.Process.Pid)
			if len(tree) < 4 { // bwrap, its child, sh, two sleeps
				t.Fatalf("sandbox tree: %v", tree)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			start := time.Now()
			if !waitUntil(3*time.Second, func() bool {
				for _, pid := range tree {
					if s := pidState(pid); s != "" && s != "Z" {
						return false
					}
				}
				return true
			}) {
				var left []string
				for _, pid := range tree {
					if s := pidState(pid); s != "" && s != "Z" {
						b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
						left = append(left, fmt.Sprintf("%d %s %q", pid, s, b))
					}
				}
				t.Fatalf("3s after kill -9 of art, still running:\n%s", strings.Join(left, "\n"))
			}
			t.Logf("sandbox gone %v after kill -9 of art", time.Since(start).Round(time.Millisecond))
		})
	}
}

// fuseMounts lists the mountpoints of art's FUSE mounts on the host.
func fuseMounts(t *testing.T) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 8 && strings.Contains(line, " - fuse.art ") {
			out = append(out, f[4])
		}
	}
	return out
}

func TestRunAfterKill9LeavesNoMountOrCgroup(t *testing.T) {
	ws, db := overlayWorkspace(t)
	before := map[string]bool{}
	for _, m := range fuseMounts(t) {
		before[m] = true
	}
	cmd := artCmd(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--pids", "100", "--", "sleep", "60.5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	findBelow(t, cmd.Process.Pid, "sleep")
	var stale string
	for _, m := range fuseMounts(t) {
		if !before[m] {
			stale = m
		}
	}
	if stale == "" {
		t.Fatalf("no art mount appeared for the run: %v", fuseMounts(t))
	}
	artPid := cmd.Process.Pid
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitUntil(3*time.Second, func() bool { return len(cmdlinePids("sleep", "60.5")) == 0 })
	// The next run on the store finds what the killed one left behind.
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	for _, m := range fuseMounts(t) {
		if m == stale {
			t.Errorf("stale mount %s of the killed run is still mounted after the next art run", m)
			unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	for _, c := range []string{"memory", "pids"} {
		matches, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/%s/art-%d-*", c, artPid))
		for _, m := range matches {
			t.Errorf("cgroup %s of the killed run left behind after the next art run", m)
		}
	}
}

func TestRunNewSessionWithoutPTY(t *testing.T) {
	ws, _ := runWorkspace(t)
	cmd := artCmd(t, "-m", ws, "-i=false", "-q", "--", "sleep", "30.75")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sleep := findBelow(t, cmd.Process.Pid, "sleep")
	artSid, sleepSid := statField(cmd.Process.Pid, 6), statField(sleep, 6)
	// bwrap --new-session: the sandbox's init (the sleep's parent, below
	// art) leads a session of its own, which the command inherits.
	if parent := statField(sleep, 4); artSid == sleepSid || sleepSid != parent {
		t.Fatalf("session of the sandboxed sleep (pid %d) = %d, art's = %d; want its parent %d's", sleep, sleepSid, artSid, parent)
	}
}

// TestRunDevNullIsNoTerminal: /dev/null is a character device, not a
// terminal. With art's stdin and stdout on it the command used to get a
// PTY of its own, which joined its stderr to its stdout: a script's
// `art run ... </dev/null >/dev/null 2>log` lost the command's errors.
func TestRunDevNullIsNoTerminal(t *testing.T) {
	ws, _ := runWorkspace(t)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := artCmd(t, "-m", ws, "-q", "--", "sh", "-c", "test -t 0 && echo stdin-is-a-terminal >&2; echo to-stderr >&2")
	cmd.Stdin, cmd.Stdout = null, null
	r := exe(t, cmd)
	if r.code != 0 || r.stderr != "to-stderr\n" {
		t.Fatalf("art run </dev/null >/dev/null: exit %d, stderr %q; want the command's own stderr, no terminal", r.code, r.stderr)
	}
}

func TestRunTIOCSTIRefusedOnCallersTerminal(t *testing.T) {
	ws, _ := runWorkspace(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	// art's stdin is a terminal, but -i=false: no PTY of its own, so the
	// sandbox must not be able to push input into this one.
	cmd := artCmd(t, "-m", ws, "-i=false", "-q", "--", "python3", "-c",
		`import fcntl, termios, sys
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("injected")
except OSError as e:
    print("errno", e.errno)`)
	cmd.Stdin = tty
	r := exe(t, cmd)
	if got, want := r.stdout, fmt.Sprintf("errno %d\n", syscall.EPERM); got != want || r.code != 0 {
		t.Fatalf("TIOCSTI on the caller's terminal: %q exit %d (stderr %s), want %q", got, r.code, r.stderr, want)
	}
	if n, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCINQ); err != nil || n != 0 {
		t.Fatalf("bytes waiting on the caller's terminal: %d %v, want 0", n, err)
	}
}

func TestRunSeccompDenyList(t *testing.T) {
	ws, _ := runWorkspace(t)
	// Each call with harmless arguments; without the filter most would
	// fail otherwise (EBADF, EINVAL, ENOTTY...) or succeed, never EPERM
	// for all. getpid is the control that the harness works.
	calls := []struct {
		name string
		nr   uintptr
		args string
	}{
		{"getpid (control)", unix.SYS_GETPID, ""},
		{"ioctl TIOCSTI", unix.SYS_IOCTL, fmt.Sprintf("0, %d, 0", unix.TIOCSTI)},
		{"ioctl TIOCLINUX", unix.SYS_IOCTL, fmt.Sprintf("0, %d, 0", unix.TIOCLINUX)},
		{"ioctl TIOCSTI high bits", unix.SYS_IOCTL, fmt.Sprintf("0, %d, 0", uint64(1)<<32|unix.TIOCSTI)},
		{"ioctl TIOCLINUX high bits", unix.SYS_IOCTL, fmt.Sprintf("0, %d, 0", uint64(1)<<32|unix.TIOCLINUX)},
		{"keyctl", unix.SYS_KEYCTL, "0, -3, 0"}, // KEYCTL_GET_KEYRING_ID of the session keyring
		{"add_key", unix.SYS_ADD_KEY, "0, 0, 0, 0, 0"},
		{"request_key", unix.SYS_REQUEST_KEY, "0, 0, 0, 0"},
		{"bpf", unix.SYS_BPF, "0, 0, 0"},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, "0, 0, -1, -1, 0"},
		{"userfaultfd", unix.SYS_USERFAULTFD, "0"},
		{"fsopen", unix.SYS_FSOPEN, "0, 0"},
		{"fsconfig", unix.SYS_FSCONFIG, "-1, 0, 0, 0, 0"},
		{"fsmount", unix.SYS_FSMOUNT, "-1, 0, 0"},
		{"fspick", unix.SYS_FSPICK, "-1, 0, 0"},
		{"open_tree", unix.SYS_OPEN_TREE, "-1, 0, 0"},
		{"move_mount", unix.SYS_MOVE_MOUNT, "-1, 0, -1, 0, 0"},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, "-1, 0, 0, 0, 0"},
		{"kexec_load", unix.SYS_KEXEC_LOAD, "0, 0, 0, 0"},
		{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, "-1, -1, 0, 0, 0"},
		{"init_module", unix.SYS_INIT_MODULE, "0, 0, 0"},
		{"finit_module", unix.SYS_FINIT_MODULE, "-1, 0, 0"},
		{"delete_module", unix.SYS_DELETE_MODULE, "0, 0"},
	}
	var py strings.Builder
	py.WriteString("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n")
	py.WriteString("def call(nr, *a):\n    ctypes.set_errno(0)\n    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(x & (1<<64)-1) for x in a])\n    print(0 if r >= 0 else ctypes.get_errno())\n")
	for _, c := range calls {
		fmt.Fprintf(&py, "call(%d, %s)\n", c.nr, c.args)
	}
	r := artRun(t, "-m", ws, "-i=false", "-q", "--", "python3", "-c", py.String())
	got := strings.Fields(r.stdout)
	if r.code != 0 || len(got) != len(calls) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for i, c := range calls {
		want := strconv.Itoa(int(syscall.EPERM))
		if i == 0 {
			want = "0"
		}
		t.Run(c.name, func(t *testing.T) {
			if got[i] != want {
				t.Errorf("%s inside: errno %s, want %s", c.name, got[i], want)
			}
		})
	}
}

func TestRunOnlyStdioFDsEvenWithInheritedFD(t *testing.T) {
	ws, _ := runWorkspace(t)
	f, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := artCmd(t, "run", "-m", ws, "-i=false", "-q", "--", "ls", "/proc/self/fd")
	cmd.ExtraFiles = []*os.File{f} // fd 3 of art, not close-on-exec
	r := exe(t, cmd)
	// ls's own directory fd is 3 when nothing else came in.
	if want := "0\n1\n2\n3\n"; r.stdout != want || r.code != 0 {
		t.Fatalf("fds inside: %q exit %d (stderr %s), want %q", r.stdout, r.code, r.stderr, want)
	}
}

// The original form, art [flags] -- CMD, runs CMD even when it is named
// like one of art's verbs.
func TestRunOriginalFormCommandNamedLikeAVerb(t *testing.T) {
	ws, _ := runWorkspace(t)
	for _, argv := range [][]string{{"ls"}, {"cat", "main.py"}, {"diff", "main.py", "main.py"}} {
		cmd := artCmd(t, append([]string{"-m", ws, "-i=false", "-q", "--"}, argv...)...)
		r := exe(t, cmd)
		want := map[string]string{"ls": "main.py\n", "cat": "print('hello')\n", "diff": ""}[argv[0]]
		if r.stdout != want || r.code != 0 || r.stderr != "" {
			t.Errorf("art -m ws -- %s: exit %d stdout %q stderr %q, want the sandboxed command's output %q", strings.Join(argv, " "), r.code, r.stdout, head(r.stderr), want)
		}
	}
}

func TestRunEnvironmentOnlyExplicit(t *testing.T) {
	ws, _ := runWorkspace(t)
	cmd := artCmd(t, "-m", ws, "-i=false", "-q", "--env", "FOO=bar", "--env", "EMPTY=", "--", "sh", "-c", "env | sort")
	cmd.Env = append(os.Environ(), "ART_SECRET=1", "TERM=xterm")
	r := exe(t, cmd)
	want := "EMPTY=\nFOO=bar\nHOME=/home/agent\nLOGNAME=agent\nPATH=/usr/local/bin:/usr/bin:/bin\nPWD=/home/agent/ws\nSHELL=" + loginShell(os.Getenv) + "\nUSER=agent\n"
	if r.stdout != want || r.code != 0 {
		t.Fatalf("env inside:\n%s(exit %d, stderr %s)\nwant:\n%s", r.stdout, r.code, r.stderr, want)
	}
}

func TestRunPrivateTmpfsHideHostFilesAndSockets(t *testing.T) {
	ws, db := runWorkspace(t)
	marker, err := os.CreateTemp("/tmp", "marker-")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	defer os.Remove(marker.Name())
	sock := fmt.Sprintf("/run/art-run-test-%d.sock", os.Getpid())
	l, err := net.Listen("unix", sock)
	if err != nil && os.Geteuid() != 0 { // not root: /run is not ours
		sock = fmt.Sprintf("/tmp/art-run-test-%d.sock", os.Getpid())
		l, err = net.Listen("unix", sock)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	script := fmt.Sprintf(`
for p in %s %s; do if test -e $p; then echo "$p visible"; fi; done
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("%s")' 2>/dev/null && echo "socket reachable"
for d in /tmp /run /var/run /root /home; do echo "$d: $(ls -A $d | tr '\n' ' ')"; done`, marker.Name(), sock, sock)
	want := "/tmp: \n/run: \n/var/run: \n/root: \n/home: agent \n"
	for _, mode := range []string{"direct", "overlay"} {
		args := []string{"-m", ws, "-i=false", "-q"}
		if mode == "overlay" {
			testutil.RequireFUSE(t)
			args = append(args, "-d", db)
		}
		r := artRun(t, append(args, "--", "sh", "-c", script)...)
		if r.stdout != want || r.code != 0 {
			t.Errorf("%s mode inside:\n%s(exit %d, stderr %s)\nwant:\n%s", mode, r.stdout, r.code, r.stderr, want)
		}
	}
}

func TestRunStoreAndStateNeverVisible(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.RequireFUSE(t)
	// The store inside the workspace, in a directory the sandbox shows at
	// its own path: art -m . -d ./ws.db from the workspace.
	ws := populate(t, hostVisibleDir(t))
	cmd := artCmd(t, "-m", ".", "-d", "./ws.db", "-i=false", "-q", "--", "sh", "-c", fmt.Sprintf(`
echo "ls: $(ls -A | tr '\n' ' ')"
for f in ws.db ws.db-wal ws.db-shm %[1]s/ws.db %[1]s/ws.db-wal %[1]s/ws.db-shm; do
  if test -e $f && test ! -c $f; then echo "$f is a file"; fi
  head -c 15 $f 2>/dev/null | grep -q SQLite && echo "$f readable"
done
echo "run: $(ls -A /run | tr '\n' ' ')"
test -e /run/art && echo "/run/art visible"
true`, ws))
	cmd.Dir = ws
	r := exe(t, cmd)
	if want := "ls: main.py \nrun: \n"; r.stdout != want || r.code != 0 {
		t.Fatalf("inside:\n%s(exit %d, stderr %s)\nwant:\n%s", r.stdout, r.code, r.stderr, want)
	}
	// The store did not capture itself.
	db := filepath.Join(ws, "ws.db")
	if got := mustRun(t, "ls", "-d", db, "-r", "main:ws").stdout; strings.Contains(got, "ws.db") || !strings.Contains(got, "main.py") {
		t.Fatalf("art ls main:ws:\n%s\nwant main.py and no ws.db", got)
	}
}

// bindsJSON writes the host workspace's binds.json.
func bindsJSON(t *testing.T, ws, doc string) {
	t.Helper()
	writeFile(t, filepath.Join(ws, ".art", "config", "binds.json"), doc)
}

func TestRunBindsJSONAppliesAndIsHidden(t *testing.T) {
	ws, db := runWorkspace(t)
	data := filepath.Join(filepath.Dir(ws), "data")
	writeFile(t, filepath.Join(data, "f"), "host data\n")
	scratch := filepath.Join(filepath.Dir(ws), "scratch")
	os.Mkdir(scratch, 0o777)
	os.Chmod(scratch, 0o777)
	bindsJSON(t, ws, fmt.Sprintf(`{"binds":[{"host":%q,"guest":"/tmp/data","readonly":true},{"host":%q,"guest":"/tmp/scratch","readonly":false}]}`, data, scratch))
	script := `
cat /tmp/data/f
echo x > /tmp/data/g 2>/dev/null && echo "ro bind written"
echo y > /tmp/scratch/out || echo "rw bind not written"
echo "config: [$(ls -A .art/config)]"
echo x > .art/config/binds.json 2>/dev/null && echo "binds.json written"
mkdir .art/config/d 2>/dev/null && echo "config dir written"
true`
	for _, mode := range []string{"direct", "overlay"} {
		args := []string{"-m", ws, "-i=false", "-q"}
		if mode == "overlay" {
			testutil.RequireFUSE(t)
			args = append(args, "-d", db)
		}
		os.Remove(filepath.Join(scratch, "out"))
		r := artRun(t, append(args, "--", "sh", "-c", script)...)
		if want := "host data\nconfig: []\n"; r.stdout != want || r.code != 0 {
			t.Errorf("%s mode inside:\n%s(exit %d, stderr %s)\nwant:\n%s", mode, r.stdout, r.code, r.stderr, want)
		}
		if b, _ := os.ReadFile(filepath.Join(scratch, "out")); string(b) != "y\n" {
			t.Errorf("%s mode: rw bind's file on the host = %q, want %q", mode, b, "y\n")
		}
		if _, err := os.Stat(filepath.Join(data, "g")); err == nil {
			t.Errorf("%s mode: the read-only bind was written", mode)
		}
	}
}

func TestRunAgentWrittenBindsJSONGrantsNothing(t *testing.T) {
	for _, mode := range []string{"direct", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			ws, db := runWorkspace(t)
			loot := filepath.Join(filepath.Dir(ws), "loot")
			writeFile(t, filepath.Join(loot, "secret"), "host secret\n")
			bindsJSON(t, ws, `{"binds":[]}`)
			if os.Geteuid() == 0 {
				// As a user's own workspace is: the agent's uid owns it.
				filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
			}
			args := []string{"-m", ws, "-i=false", "-q"}
			if mode == "overlay" {
				testutil.RequireFUSE(t)
				args = append(args, "-d", db)
			}
			plant := fmt.Sprintf(`{"binds":[{"host":%q,"guest":"/tmp/loot","readonly":false}]}`, loot)
			// Every way the agent might replace the policy: in place, or
			// by moving the directory that holds the read-only mount.
			artRun(t, append(args, "--", "sh", "-c", fmt.Sprintf(`
echo '%[1]s' > .art/config/binds.json
mv .art .art-old || mv .art/config .art/config-old
mkdir -p .art/config && echo '%[1]s' > .art/config/binds.json
true`, plant))...)
			r := artRun(t, append(args, "--", "sh", "-c", "cat /tmp/loot/secret 2>/dev/null; true")...)
			if r.stdout != "" {
				t.Fatalf("%s mode: after the agent wrote binds.json, the next run sees the host dir: %q (stderr %s)", mode, r.stdout, r.stderr)
			}
		})
	}
}

func TestRunExitStatusPassesThrough(t *testing.T) {
	ws, db := runWorkspace(t)
	for _, mode := range []string{"direct", "overlay"} {
		args := []string{"-m", ws, "-i=false", "-q"}
		if mode == "overlay" {
			testutil.RequireFUSE(t)
			args = append(args, "-d", db)
		}
		for _, tc := range []struct {
			script string
			code   int
		}{{"exit 0", 0}, {"exit 7", 7}, {"kill -TERM $$", 143}, {"kill -KILL $$", 137}} {
			if r := artRun(t, append(args, "--", "sh", "-c", tc.script)...); r.code != tc.code {
				t.Errorf("%s mode: sh -c %q: art exit %d (stderr %s), want %d", mode, tc.script, r.code, r.stderr, tc.code)
			}
		}
	}
}

func TestRunTimeoutExits124AndKillsTheTree(t *testing.T) {
	ws, _ := runWorkspace(t)
	for _, tc := range []struct {
		name, script string
		within       time.Duration
	}{
		{"sleep", "sleep 30.125 & sleep 30.125", 4 * time.Second},
		// Ignores SIGTERM: only the SIGKILL after the 5 s grace ends it.
		{"ignores SIGTERM", "trap '' TERM; sleep 30.125 & sleep 30.125", 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := artRun(t, "run", "-m", ws, "-i=false", "--timeout", "1s", "--", "sh", "-c", tc.script)
			if r.code != 124 {
				t.Fatalf("exit %d (stderr %s), want 124", r.code, r.stderr)
			}
			if r.wall > tc.within {
				t.Fatalf("took %v with --timeout 1s, want at most %v", r.wall, tc.within)
			}
			if !strings.HasPrefix(r.stderr, "art: timed out (exit 124) in ") {
				t.Fatalf("summary: %q", r.stderr)
			}
			// Killed processes leave cgroup.procs (which art waits on)
			// early in their exit: they may take a moment to go.
			if !waitUntil(time.Second, func() bool { return len(cmdlinePids("sleep", "30.125")) == 0 }) {
				t.Fatalf("still running 1s after the timeout: pids %v", cmdlinePids("sleep", "30.125"))
			}
		})
	}
}

func TestRunPidsLimitContainsForkBomb(t *testing.T) {
	ws, _ := runWorkspace(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroup limits")
	}
	cmd := artCmd(t, "-m", ws, "-i=false", "--pids", "50", "--timeout", "3s", "--", "sh", "-c", "(f() { f | f & }; f) & exec sleep 30")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	// The host still starts processes promptly while the bomb runs (the
	// command itself forks once, then execs: no fork of its own can fail).
	start := time.Now()
	if err := exec.Command("true").Run(); err != nil {
		t.Fatalf("host cannot start a process during the fork bomb: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("host took %v to run true during the fork bomb", d)
	}
	n := len(descendantsOf(cmd.Process.Pid))
	err := cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if n > 50 {
		t.Errorf("%d processes below art under --pids 50", n)
	}
	if code != 124 {
		t.Fatalf("fork bomb with --timeout 3s: exit %d (%v), want 124\n%s", code, err, tail(errb.String()))
	}
	// (After the first capture's line: the store is new.)
	if want := "art: limits enforced by cgroup v1\n"; !strings.HasPrefix(strings.TrimPrefix(errb.String(), firstCapture.FindString(errb.String())), want) {
		t.Fatalf("stderr starts %q, want %q", head(errb.String()), want)
	}
	if left := descendantsOf(cmd.Process.Pid); len(left) > 0 {
		t.Fatalf("left running: %v", left)
	}
}

func head(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return s
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, "\n")
}

func TestRunMemoryLimitKillsHog(t *testing.T) {
	ws, db := overlayWorkspace(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroup limits")
	}
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "--memory", "64M", "--", "python3", "-c",
		`b = bytearray(1 << 30); b[::4096] = b"x" * (len(b) // 4096); print("survived")`)
	if r.code != 137 || r.stdout != "" {
		t.Fatalf("1 GiB under --memory 64M: exit %d stdout %q, want 137 and nothing", r.code, r.stdout)
	}
	re := regexp.MustCompile(`^(art: first capture of .*\n)?art: limits enforced by cgroup v1\n(.*\n)*art: killed: out of memory \(exit 137\) in (\d+ms|\d+(\.\d+)?s); \d+ paths changed; snapshot [0-9a-f]{12} on branch main\n$`) // over a second on a loaded machine: "in 1.075s"
	if !re.MatchString(r.stderr) {
		t.Fatalf("stderr:\n%s\nwant to match %s", r.stderr, re)
	}
}

func TestRunDiskQuota(t *testing.T) {
	ws, db := overlayWorkspace(t)
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--disk-quota", "1M", "--", "sh", "-c",
		`df -B1 --output=size . | tail -1 | tr -d ' '; dd if=/dev/zero of=big bs=64K count=32 2>&1 | grep -o 'No space left on device'; ls -l big | cut -d' ' -f5`)
	// The overlay holds main.py (15 bytes) besides big: less than 1 MiB fits.
	lines := strings.Split(r.stdout, "\n")
	if len(lines) != 4 || lines[0] != "1048576" || lines[1] != "No space left on device" {
		t.Fatalf("--disk-quota 1M:\n%s(exit %d stderr %s)\nwant size 1048576, then ENOSPC", r.stdout, r.code, r.stderr)
	}
	if n, _ := strconv.Atoi(lines[2]); n <= 0 || n > 1<<20 {
		t.Fatalf("file size under the quota: %s", lines[2])
	}
}

func TestRunNetwork(t *testing.T) {
	ws, _ := runWorkspace(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted sync.WaitGroup
	var got []string
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer accepted.Done()
				b, _ := io.ReadAll(c)
				c.Close()
				mu.Lock()
				got = append(got, string(b))
				mu.Unlock()
			}()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`
echo "if: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')"
python3 -c '
import socket
s = socket.socket()
try:
    s.connect(("127.0.0.1", %d)); s.sendall(b"hello"); print("connected")
except OSError as e:
    print("errno", e.errno)'`, port)
	r := artRun(t, "-m", ws, "-i=false", "-q", "--net", "none", "--", "sh", "-c", script)
	if want := fmt.Sprintf("if: lo \nerrno %d\n", syscall.ECONNREFUSED); r.stdout != want {
		t.Fatalf("--net none:\n%s(stderr %s)\nwant:\n%s", r.stdout, r.stderr, want)
	}
	r = artRun(t, "-m", ws, "-i=false", "-q", "--net", "host", "--", "sh", "-c", script)
	if !strings.HasSuffix(r.stdout, "\nconnected\n") {
		t.Fatalf("--net host:\n%s(stderr %s)\nwant connected", r.stdout, r.stderr)
	}
	if !waitUntil(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }) || got[0] != "hello" {
		t.Fatalf("host server received %q, want one \"hello\"", got)
	}
}

// firstCapture matches the line the first capture of a workspace prints.
var firstCapture = regexp.MustCompile(`^art: first capture of .*: \d+ files?, .*\n`)

func TestRunJournaledWithSummary(t *testing.T) {
	ws, db := overlayWorkspace(t)
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", "echo new > new.txt; exit 3")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3 (stderr %s)", r.code, r.stderr)
	}
	re := regexp.MustCompile(`^(?:art: first capture of .*: 1 file, 15 B\n)?art: exit 3 in (\d+)ms; 1 paths changed; snapshot ([0-9a-f]{12}) on branch main\n$`)
	m := re.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("summary %q, want to match %s", r.stderr, re)
	}
	snap := m[2]
	log := mustRun(t, "log", "-d", db).stdout
	// The newest op first: the run, its command and status, then its
	// closing snapshot.
	lines := strings.Split(log, "\n")
	if len(lines) < 2 || !regexp.MustCompile(`^op \d+ +\S+ \S+ +main +run +sh -c echo new > new.txt; exit 3 +\[exit 3\]$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^ +snapshot `+snap+` +@\d+ +run sh -c echo new > new.txt; exit 3$`).MatchString(lines[1]) {
		t.Fatalf("art log:\n%s\nwant the run op with [exit 3], then snapshot %s", log, snap)
	}
	if got := mustRun(t, "cat", "-d", db, snap+":ws/new.txt").stdout; got != "new\n" {
		t.Fatalf("new.txt in the run's snapshot: %q", got)
	}
	// --quiet: nothing on stderr.
	r = artRun(t, "run", "-m", ws, "-d", db, "-i=false", "--quiet", "--", "true")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("--quiet: exit %d stderr %q, want 0 and nothing", r.code, r.stderr)
	}
	if n := len(regexp.MustCompile(`(?m)^op .* run `).FindAllString(mustRun(t, "log", "-d", db).stdout, -1)); n != 2 {
		t.Fatalf("art log has %d run ops, want 2", n)
	}
}

func TestRunBranchesSideBySide(t *testing.T) {
	ws, db := overlayWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	signal := filepath.Join(filepath.Dir(ws), "signal")
	os.Mkdir(signal, 0o777)
	os.Chmod(signal, 0o777)
	bind := "--bind=" + signal + ":/tmp/signal"
	// Never left waiting if the test fails before it says go.
	defer writeFile(t, filepath.Join(signal, "go"), "")
	type res struct {
		branch string
		r      runOut
	}
	results := make(chan res, 2)
	for _, b := range []string{"a", "b"} {
		go func() {
			results <- res{b, artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--branch", b, "--timeout", "60s", bind, "--", "sh", "-c",
				fmt.Sprintf("echo %[1]s > %[1]s.txt; touch /tmp/signal/%[1]s; until test -e /tmp/signal/go; do sleep 0.05; done", b))}
		}()
	}
	// While both run (each has signalled and waits for go), a second run
	// on branch a is refused.
	if !waitUntil(20*time.Second, func() bool {
		_, ea := os.Stat(filepath.Join(signal, "a"))
		_, eb := os.Stat(filepath.Join(signal, "b"))
		return ea == nil && eb == nil
	}) {
		t.Fatal("the two runs never ran at the same time")
	}
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--branch", "a", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "branch a of "+db+" is in use by another art run") {
		t.Errorf("second run on branch a: exit %d stderr %q, want 1 and 'in use'", r.code, r.stderr)
	}
	// Both end only now: they overlapped from the first signal to here.
	writeFile(t, filepath.Join(signal, "go"), "")
	for i := 0; i < 2; i++ {
		x := <-results
		if x.r.code != 0 {
			t.Fatalf("run on branch %s: exit %d\n%s", x.branch, x.r.code, x.r.stderr)
		}
	}
	for b, other := range map[string]string{"a": "b", "b": "a"} {
		ls := mustRun(t, "ls", "-d", db, b+":ws").stdout
		if !strings.Contains(ls, "ws/"+b+".txt") || strings.Contains(ls, other+".txt") {
			t.Errorf("art ls %s:ws:\n%s\nwant %s.txt and not %s.txt", b, ls, b, other)
		}
		if got := mustRun(t, "cat", "-d", db, b+":ws/"+b+".txt").stdout; got != b+"\n" {
			t.Errorf("%s:ws/%s.txt = %q", b, b, got)
		}
	}
	if ls := mustRun(t, "ls", "-d", db, "main:ws").stdout; strings.Contains(ls, "a.txt") || strings.Contains(ls, "b.txt") {
		t.Errorf("main changed by branch runs:\n%s", ls)
	}
}

func TestRunAtPastState(t *testing.T) {
	ws, db := overlayWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	writeFile(t, filepath.Join(ws, "main.py"), "print('v2')\n")
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--at", "main~1", "--branch", "old", "--", "sh", "-c", "cat main.py; echo v3 > old.txt")
	if r.code != 0 || r.stdout != "print('hello')\n" {
		t.Fatalf("--at main~1: stdout %q exit %d (stderr %s), want the old main.py", r.stdout, r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "art: new branch old from main~1\n") {
		t.Fatalf("stderr %q, want the new branch named", r.stderr)
	}
	if got := mustRun(t, "cat", "-d", db, "old:ws/old.txt").stdout; got != "v3\n" {
		t.Fatalf("old:ws/old.txt = %q", got)
	}
	if got := mustRun(t, "cat", "-d", db, "main:ws/main.py").stdout; got != "print('v2')\n" {
		t.Fatalf("main:ws/main.py = %q, want main untouched", got)
	}
	if r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--at", "main~1", "--branch", "old", "--", "true"); r.code != 2 {
		t.Fatalf("--at onto an existing branch: exit %d (stderr %s), want usage error 2", r.code, r.stderr)
	}
}

// ptyOutput collects what arrives on a PTY master.
type ptyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (p *ptyOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *ptyOutput) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

func TestRunPTY(t *testing.T) {
	ws, _ := runWorkspace(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 33, Cols: 101}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd := artCmd(t, "-m", ws, "-q", "--", "sh", "-c", "tty; stty size; echo term=$TERM; echo ready; sleep 30; echo after-sleep")
	cmd.Env = append(os.Environ(), "TERM=xterm-art-test")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	var out ptyOutput
	go io.Copy(&out, ptmx)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !waitUntil(10*time.Second, func() bool { return strings.Contains(out.String(), "ready") }) {
		cmd.Process.Kill()
		t.Fatalf("no ready from inside; output %q", out.String())
	}
	// The PTY is art's, from the host's devpts: bwrap's fresh /dev/pts
	// does not hold it, so bwrap binds it at /dev/console, where ttyname
	// finds it.
	if !regexp.MustCompile(`(?m)^/dev/console\r?$`).MatchString(out.String()) {
		t.Errorf("tty inside: %q, want /dev/console", out.String())
	}
	if !strings.Contains(out.String(), "33 101") {
		t.Errorf("stty size inside: %q, want 33 101", out.String())
	}
	// On a terminal TERM comes in too (and nothing else of the host's).
	if !strings.Contains(out.String(), "term=xterm-art-test\r\n") {
		t.Errorf("TERM inside on a PTY: %q, want xterm-art-test", out.String())
	}
	// Ctrl-C travels as a byte (art's terminal is raw) to the inner
	// PTY, whose line discipline signals the foreground job.
	ptmx.Write([]byte{3})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("Ctrl-C did not interrupt sleep 30; output %q", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit after Ctrl-C: %d, want 130; output %q", code, out.String())
	}
	if strings.Contains(out.String(), "after-sleep") {
		t.Errorf("the shell went on after Ctrl-C: %q", out.String())
	}
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Errorf("terminal mode not restored:\nbefore %+v\nafter  %+v", *before, *after)
	}
}

func TestRunPTYFollowsWindowResize(t *testing.T) {
	ws, _ := runWorkspace(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 20, Cols: 70})
	cmd := artCmd(t, "-m", ws, "-q", "--", "sh", "-c", `stty size; echo ready; read x; stty size`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	var out ptyOutput
	go io.Copy(&out, ptmx)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !waitUntil(10*time.Second, func() bool { return strings.Contains(out.String(), "ready") }) {
		t.Fatalf("no ready; output %q", out.String())
	}
	// The kernel sends SIGWINCH to the outer terminal's foreground group:
	// art.
	pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 132})
	time.Sleep(200 * time.Millisecond)
	ptmx.Write([]byte("\r"))
	cmd.Wait()
	// The copy from the terminal may still be behind the exit (a loaded
	// machine): wait for the second answer before reading.
	waitUntil(10*time.Second, func() bool { return strings.Count(out.String(), "\n") >= 4 })
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	var sizes []string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); regexp.MustCompile(`^\d+ \d+$`).MatchString(l) {
			sizes = append(sizes, l)
		}
	}
	if strings.Join(sizes, ",") != "20 70,40 132" {
		t.Fatalf("stty size before and after the resize: %q, want [20 70 40 132]; output %q", sizes, out.String())
	}
}

func TestRunNoHostPidsVisible(t *testing.T) {
	ws, _ := runWorkspace(t)
	// Inside: bwrap's init (1) and python (2); nothing of the host.
	r := artRun(t, "run", "-m", ws, "-i=false", "-q", "--", "python3", "-c", `import os; print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))`)
	if want := "[1, 2]\n"; r.stdout != want || r.code != 0 {
		t.Fatalf("pids inside: %q (exit %d, stderr %s), want %q", r.stdout, r.code, r.stderr, want)
	}
}

func TestRunWritesOutsideHomeAndTmpFailHostUnchanged(t *testing.T) {
	ws, db := overlayWorkspace(t)
	before := testutil.DescribeTree(t, ws, testutil.TreeOptions{})
	victim := hostVisibleDir(t)
	writeFile(t, filepath.Join(victim, "f"), "host\n")
	os.Chmod(victim, 0o777)
	os.Chmod(filepath.Join(victim, "f"), 0o666)
	var script strings.Builder
	for _, p := range []string{"/etc/art-test", "/usr/art-test", "/var/art-test", "/opt/art-test", "/art-test", victim + "/new", victim + "/f"} {
		fmt.Fprintf(&script, "echo x 2>/dev/null >> %[1]s && echo '%[1]s written'\n", p)
	}
	script.WriteString("echo agent > /home/agent/ws/agent.txt && echo x > /tmp/t && echo x > /home/agent/h && echo ok\n")
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", script.String())
	if r.stdout != "ok\n" || r.code != 0 {
		t.Fatalf("inside:\n%s(exit %d, stderr %s)\nwant only ok", r.stdout, r.code, r.stderr)
	}
	after := testutil.DescribeTree(t, ws, testutil.TreeOptions{})
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("host workspace changed by an overlay run:\nbefore %v\nafter  %v", before, after)
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "f")); string(b) != "host\n" {
		t.Fatalf("host file changed: %q", b)
	}
	if got := mustRun(t, "cat", "-d", db, "main:ws/agent.txt").stdout; got != "agent\n" {
		t.Fatalf("the agent's write in the store: %q", got)
	}
}

// The original README's workflow: push, run (edit inside), pull.
func TestRunPushRunPullWorkflow(t *testing.T) {
	ws, db := overlayWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	r := mustRun(t, "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo \"print('edited')\" > main.py; mkdir -p pkg; echo new > pkg/new.txt")
	if r.stdout != "" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "main.py")); string(b) != "print('hello')\n" {
		t.Fatalf("host main.py before pull: %q", b)
	}
	mustArt(t, "pull", "-q", "-m", ws, "-d", db)
	for p, want := range map[string]string{"main.py": "print('edited')\n", "pkg/new.txt": "new\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, p)); string(b) != want {
			t.Errorf("host %s after pull: %q, want %q", p, b, want)
		}
	}
}

func TestRunNoSurvivorsAfterExit(t *testing.T) {
	ws, _ := runWorkspace(t)
	// The command leaves a daemon behind and exits at once.
	r := artRun(t, "run", "-m", ws, "-i=false", "-q", "--", "sh", "-c", "setsid sleep 30.375 >/dev/null 2>&1 < /dev/null & sleep 0.2; exit 0")
	if r.code != 0 {
		t.Fatalf("exit %d (stderr %s)", r.code, r.stderr)
	}
	if !waitUntil(time.Second, func() bool { return len(cmdlinePids("sleep", "30.375")) == 0 }) {
		t.Fatalf("the daemonized sleep survived the run by 1s: pids %v", cmdlinePids("sleep", "30.375"))
	}
}

func TestRunTmpSize(t *testing.T) {
	ws, _ := runWorkspace(t)
	r := artRun(t, "run", "-m", ws, "-i=false", "-q", "--tmp-size", "1M", "--", "sh", "-c",
		`df -B1 --output=size /tmp /run | tail -2 | tr -d ' '; dd if=/dev/zero of=/tmp/big bs=64K count=32 2>&1 | grep -o 'No space left on device'`)
	if want := "1048576\n1048576\nNo space left on device\n"; r.stdout != want {
		t.Fatalf("--tmp-size 1M:\n%s(exit %d stderr %s)\nwant:\n%s", r.stdout, r.code, r.stderr, want)
	}
}

// The limits land in the cgroup the sandbox's processes are in.
func TestRunLimitsInTheSandboxCgroup(t *testing.T) {
	ws, _ := runWorkspace(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroup limits")
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil || st.Type == unix.CGROUP2_SUPER_MAGIC {
		t.Skip("not a cgroup v1 machine: this test reads v1 files")
	}
	cmd := artCmd(t, "run", "-m", ws, "-i=false", "-q", "--cpu", "0.5", "--memory", "64M", "--pids", "50", "--", "sleep", "30.875")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sleep := findBelow(t, cmd.Process.Pid, "sleep")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sleep))
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 {
			paths[f[1]] = f[2]
		}
	}
	for _, c := range []struct{ controller, file, want string }{
		{"cpu", "cpu.cfs_quota_us", "50000"},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"memory", "memory.limit_in_bytes", "67108864"},
		{"pids", "pids.max", "50"},
	} {
		p := filepath.Join("/sys/fs/cgroup", c.controller, paths[c.controller], c.file)
		got, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(got)) != c.want {
			t.Errorf("%s of the sandboxed sleep: %q %v, want %s", p, got, err, c.want)
		}
		if !strings.Contains(paths[c.controller], fmt.Sprintf("/art-%d-", cmd.Process.Pid)) {
			t.Errorf("%s cgroup of the sandboxed sleep: %q, want art's own", c.controller, paths[c.controller])
		}
	}
}

// A --bind below /home/agent needs a mount point there: bwrap makes it
// in the overlay, where it must not become part of the branch (and reach
// the host at the next pull).
func TestRunBindBelowHomeLeavesNoTraceInTheStore(t *testing.T) {
	ws, db := overlayWorkspace(t)
	data := filepath.Join(filepath.Dir(ws), "data")
	writeFile(t, filepath.Join(data, "f"), "host data\n")
	for _, guest := range []string{"/home/agent/data", "/home/agent/ws/sub"} {
		r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "--bind", data+":"+guest+":ro", "--", "cat", guest+"/f")
		if r.code != 0 || r.stdout != "host data\n" {
			t.Fatalf("--bind to %s: exit %d stdout %q stderr %s", guest, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "; 0 paths changed; ") {
			t.Errorf("--bind to %s: summary %q, want 0 paths changed", guest, r.stderr)
		}
	}
	if ls := mustRun(t, "ls", "-d", db, "-r", "main:").stdout; strings.Contains(ls, "data") || strings.Contains(ls, "sub") {
		t.Errorf("bind mount points recorded in the branch:\n%s", ls)
	}
}

// The store is hidden wherever the sandbox could see it: at its own
// path, and through an extra bind of a directory that holds it.
func TestRunStoreHiddenThroughABind(t *testing.T) {
	ws, _ := overlayWorkspace(t)
	shared := hostVisibleDir(t)
	os.Chmod(shared, 0o755)
	db := filepath.Join(shared, "stores", "ws.db")
	os.MkdirAll(filepath.Dir(db), 0o755)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--bind", shared+":/tmp/shared:ro", "--", "sh", "-c", fmt.Sprintf(`
for f in /tmp/shared/stores/ws.db /tmp/shared/stores/ws.db-wal /tmp/shared/stores/ws.db-shm %[1]s %[1]s-wal %[1]s-shm; do
  head -c 15 $f 2>/dev/null | grep -q SQLite && echo "$f readable"
  test -s $f && echo "$f has data"
done
echo done`, db))
	if r.stdout != "done\n" || r.code != 0 {
		t.Fatalf("inside:\n%s(exit %d, stderr %s)\nwant nothing of the store", r.stdout, r.code, r.stderr)
	}
}

// The caller's terminal comes back in the mode it was in, however the
// run ends.
func TestRunPTYRestoresTerminalOnEveryExit(t *testing.T) {
	ws, _ := runWorkspace(t)
	for _, tc := range []struct {
		name string
		args []string
		term bool // SIGTERM art once the command runs
		code int
	}{
		{"exit", []string{"--", "sh", "-c", "echo ready; exit 3"}, false, 3},
		{"timeout", []string{"--timeout", "1s", "--", "sh", "-c", "echo ready; sleep 30"}, false, 124},
		{"SIGTERM to art", []string{"--", "sh", "-c", "echo ready; sleep 30"}, true, 143},
		{"bwrap fails", []string{"--bind", ws + ":/nonexistent-art-test/x", "--", "true"}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer ptmx.Close()
			defer tty.Close()
			before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			cmd := artCmd(t, append([]string{"run", "-m", ws, "-q"}, tc.args...)...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
			var out ptyOutput
			go io.Copy(&out, ptmx)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			if tc.term {
				if !waitUntil(10*time.Second, func() bool { return strings.Contains(out.String(), "ready") }) {
					cmd.Process.Kill()
					t.Fatalf("no ready; output %q", out.String())
				}
				cmd.Process.Signal(syscall.SIGTERM)
			}
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("art did not end; output %q", out.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit %d, want %d; output %q", code, tc.code, out.String())
			}
			after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			if *after != *before {
				t.Errorf("terminal mode not restored:\nbefore %+v\nafter  %+v", *before, *after)
			}
		})
	}
}

// A host UNIX socket is unreachable however it is named: by path (the
// private /run and /tmp hide it) and abstract (shared with the host's
// network namespace under --net host; Landlock scopes it away).
func TestRunHostAbstractSocketUnreachable(t *testing.T) {
	ws, _ := runWorkspace(t)
	if r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); errno != 0 || r < 6 {
		t.Skipf("Landlock ABI %d (%v): abstract socket scoping needs 6 (Linux 6.12)", r, errno)
	}
	name := fmt.Sprintf("art-run-test-abstract-%d", os.Getpid())
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
	script := fmt.Sprintf(`
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0%s"); print("connected")
except OSError as e:
    print("errno", e.errno)`, name)
	for _, args := range [][]string{{"--net", "host"}, {"--net", "none"}, {"--net", "host", "--trace"}} {
		if args[len(args)-1] == "--trace" {
			testutil.Require(t, "ptrace")
		}
		r := artRun(t, append(append([]string{"run", "-m", ws, "-i=false", "-q"}, args...), "--", "python3", "-c", script)...)
		if r.stdout == "connected\n" || !strings.HasPrefix(r.stdout, "errno ") || r.code != 0 {
			t.Errorf("%s: host abstract socket from inside: %q (exit %d, stderr %s), want an errno", strings.Join(args, " "), r.stdout, r.code, tail(r.stderr))
		}
	}
}

// A read-write --bind of a directory that holds the workspace shows the
// workspace a second time: its policy must stay out of the agent's reach
// there too, whether or not the host has an .art yet.
func TestRunPolicyNotPlantableThroughABindOfTheParent(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		haveArt bool
	}{{"direct", true}, {"overlay", true}, {"direct", false}, {"overlay", false}} {
		t.Run(fmt.Sprintf("%s/.art=%v", tc.mode, tc.haveArt), func(t *testing.T) {
			ws, db := runWorkspace(t)
			parent := filepath.Dir(ws)
			loot := filepath.Join(parent, "loot")
			writeFile(t, filepath.Join(loot, "secret"), "host secret\n")
			if tc.haveArt {
				bindsJSON(t, ws, `{"binds":[]}`)
			}
			if os.Geteuid() == 0 {
				filepath.Walk(parent, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
			}
			args := []string{"run", "-m", ws, "-i=false", "-q"}
			if tc.mode == "overlay" {
				testutil.RequireFUSE(t)
				args = append(args, "-d", db)
			}
			plant := fmt.Sprintf(`{"binds":[{"host":%q,"guest":"/tmp/loot","readonly":false}]}`, loot)
			artRun(t, append(args, "--bind", parent+":/tmp/parent", "--", "sh", "-c",
				fmt.Sprintf(`mkdir -p /tmp/parent/ws/.art/config; echo '%s' > /tmp/parent/ws/.art/config/binds.json; true`, plant))...)
			r := artRun(t, append(args, "--", "sh", "-c", "cat /tmp/loot/secret 2>/dev/null; true")...)
			if r.stdout != "" {
				t.Fatalf("after the agent wrote binds.json through a bind of the workspace's parent, the next run sees the host dir: %q", r.stdout)
			}
		})
	}
}

// The sandbox cannot move itself out of its cgroup (and so out of its
// limits): /sys is read-only inside.
func TestRunCannotLeaveItsCgroup(t *testing.T) {
	ws, _ := runWorkspace(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroup limits")
	}
	r := artRun(t, "run", "-m", ws, "-i=false", "-q", "--pids", "50", "--", "sh", "-c", `
for f in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/pids/$(cut -d: -f3 /proc/self/cgroup | head -1)/pids.max; do
  if echo $$ 2>/dev/null > $f; then echo "$f written"; fi
done 2>/dev/null
echo done`)
	if r.stdout != "done\n" || r.code != 0 {
		t.Fatalf("inside:\n%s(exit %d, stderr %s)\nwant only done", r.stdout, r.code, r.stderr)
	}
}

// Signals sent to art reach the command: SIGINT and SIGQUIT as they are,
// SIGTERM and SIGHUP end the run (SIGTERM to the command, then SIGKILL).
// In overlay mode the run still ends with its snapshot.
func TestRunSignalsToArtReachTheCommand(t *testing.T) {
	ws, db := overlayWorkspace(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGQUIT, 131}, {syscall.SIGTERM, 143}, {syscall.SIGHUP, 143}} {
		t.Run(unix.SignalName(tc.sig), func(t *testing.T) {
			cmd := artCmd(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sleep", "30.5")
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			findBelow(t, cmd.Process.Pid, "sleep")
			cmd.Process.Signal(tc.sig)
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Fatalf("art after %v: exit %d, want %d\n%s", tc.sig, code, tc.code, errb.String())
			}
			re := regexp.MustCompile(fmt.Sprintf(`(?m)^art: killed by %s \(exit %d\) in \d+(\.\d+)?m?s; 0 paths changed; snapshot [0-9a-f]{12} on branch main$`, unix.SignalName(syscall.Signal(tc.code-128)), tc.code))
			if !re.MatchString(errb.String()) {
				t.Fatalf("summary after %v:\n%s\nwant to match %s", tc.sig, errb.String(), re)
			}
		})
	}
}

// A missing command exits 127 and a non-executable one 126, as a shell
// would, with art's message rather than bwrap's exit 1.
func TestRunMissingCommandExits127(t *testing.T) {
	ws, db := overlayWorkspace(t)
	for _, mode := range []string{"direct", "overlay"} {
		args := []string{"run", "-m", ws, "-i=false", "-q"}
		if mode == "overlay" {
			args = append(args, "-d", db)
		}
		for _, tc := range []struct {
			argv []string
			code int
			msg  string
		}{
			{[]string{"no-such-command-xyz"}, 127, "command not found: no-such-command-xyz"},
			{[]string{"./main.py"}, 126, "main.py is not executable"},
		} {
			r := artRun(t, append(append(args, "--"), tc.argv...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%s mode: art run -- %s: exit %d stderr %q, want %d and %q", mode, tc.argv[0], r.code, r.stderr, tc.code, tc.msg)
			}
		}
	}
}
