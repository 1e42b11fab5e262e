package tracer

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/seccomp"
	"golang.org/x/sys/unix"
)

// helperEnv turns the test binary into a helper program (see helpers).
const helperEnv = "ART_TRACER_HELPER"

func TestMain(m *testing.M) {
	if h, ok := os.LookupEnv(helperEnv); ok {
		helpers[h](os.Args[1:])
		os.Exit(0)
	}
	testutil.Main(m)
}

var helpers = map[string]func(args []string){
	// exec-thread: execve from a thread that is not the leader.
	"exec-thread": func(args []string) {
		done := make(chan struct{})
		for {
			go func() {
				runtime.LockOSThread()
				if unix.Gettid() != unix.Getpid() {
					syscall.Exec(args[0], args, nil)
					os.Exit(99)
				}
				done <- struct{}{}
			}()
			<-done
		}
	},
	// threads: several threads each run a child (Go's exec is vfork+exec).
	"threads": func(args []string) {
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				exec.Command("/bin/echo", "thread", strconv.Itoa(i)).Run()
			}()
		}
		wg.Wait()
	},
	// connect: connect to each address in args ("tcp:ADDR" or "unix:PATH").
	"connect": func(args []string) {
		for _, a := range args {
			network, addr, _ := strings.Cut(a, ":")
			if c, err := net.Dial(network, addr); err == nil {
				c.Close()
			}
		}
	},
	// jobstop: stop a child with SIGSTOP; the real parent must see it
	// stopped (group-stop held), then continued, then its exit 0.
	"jobstop": func(args []string) {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "0.3"}, &os.ProcAttr{})
		if err != nil {
			os.Exit(10)
		}
		unix.Kill(p.Pid, unix.SIGSTOP)
		var ws unix.WaitStatus
		unix.Wait4(p.Pid, &ws, unix.WUNTRACED, nil)
		if !ws.Stopped() {
			fmt.Printf("not stopped: %#x\n", uint32(ws))
			os.Exit(11)
		}
		unix.Kill(p.Pid, unix.SIGCONT)
		unix.Wait4(p.Pid, &ws, 0, nil)
		if !ws.Exited() || ws.ExitStatus() != 0 {
			fmt.Printf("bad exit: %#x\n", uint32(ws))
			os.Exit(12)
		}
		fmt.Println("stopped and continued")
	},
	// tracer: trace args (as art would) and print the root pid; used to
	// kill the tracer from outside.
	"tracer": func(args []string) {
		cmd := exec.Command(args[0], args[1:]...)
		tr, err := Start(cmd, Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(tr.Pid())
		tr.Wait()
	},
}

type collector struct {
	mu   sync.Mutex
	recs []Record
}

func (c *collector) Records(rs []Record) {
	c.mu.Lock()
	c.recs = append(c.recs, rs...)
	c.mu.Unlock()
}

// sandboxed returns argv run under bwrap with policy's seccomp program,
// the way art runs commands.
func sandboxed(t *testing.T, policy seccomp.Policy, argv ...string) *exec.Cmd {
	t.Helper()
	prog, err := policy.Program()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "seccomp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(prog); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/var/tmp", "--unshare-pid", "--die-with-parent", "--seccomp", "3", "--"}, argv...)
	cmd := exec.Command("bwrap", args...)
	cmd.ExtraFiles = []*os.File{f}
	return cmd
}

func helper(t *testing.T, name string, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"env", helperEnv + "=" + name, exe}, args...)
}

// trace runs cmd under the tracer and returns the records and status.
func trace(t *testing.T, cmd *exec.Cmd) ([]Record, syscall.WaitStatus, string) {
	t.Helper()
	testutil.Require(t, "ptrace")
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	c := &collector{}
	tr, err := Start(cmd, Options{Sink: c, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if testing.Verbose() {
		for _, r := range c.recs {
			t.Log(r.String())
		}
	}
	return c.recs, ws, out.String()
}

func execs(rs []Record) []Record {
	var out []Record
	for _, r := range rs {
		if r.Kind == KindExec {
			out = append(out, r)
		}
	}
	return out
}

func findExec(t *testing.T, rs []Record, argv ...string) Record {
	t.Helper()
	for _, r := range rs {
		if r.Kind == KindExec && slices.Equal(r.Argv, argv) {
			return r
		}
	}
	t.Fatalf("no exec of %q among %d records", argv, len(rs))
	return Record{}
}

func TestShellPipeline(t *testing.T) {
	testutil.Require(t, "bwrap")
	cmd := sandboxed(t, seccomp.DefaultTrace(), "/bin/sh", "-c", "echo hello | tr a-z A-Z | cat > /var/tmp/out; cat /var/tmp/out; exit 7")
	rs, ws, out := trace(t, cmd)
	if got, want := ws.ExitStatus(), 7; got != want {
		t.Errorf("exit status %d, want %d", got, want)
	}
	if got, want := out, "HELLO\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	sh := findExec(t, rs, "/bin/sh", "-c", "echo hello | tr a-z A-Z | cat > /var/tmp/out; cat /var/tmp/out; exit 7")
	for _, argv := range [][]string{{"tr", "a-z", "A-Z"}, {"cat"}, {"cat", "/var/tmp/out"}} {
		r := findExec(t, rs, argv...)
		if r.PPID != sh.PID || r.ExecParent != sh.PID {
			t.Errorf("%q: parent %d, exec parent %d, want sh %d", argv, r.PPID, r.ExecParent, sh.PID)
		}
		if r.Cwd == "" || !strings.HasPrefix(r.Path, "/") {
			t.Errorf("%q: path %q cwd %q", argv, r.Path, r.Cwd)
		}
	}
	// The redirection is an open with write intent, by sh's child.
	var open *Record
	for i, r := range rs {
		if r.Kind == KindSyscall && r.Path == "/var/tmp/out" && strings.Contains(r.Flags, "O_CREAT") {
			open = &rs[i]
		}
	}
	if open == nil || open.Errno != 0 || open.Ret < 0 {
		t.Fatalf("no successful write-open of /var/tmp/out recorded: %+v", open)
	}
	if !strings.Contains(open.Flags, "O_WRONLY") || !strings.Contains(open.Flags, "O_TRUNC") {
		t.Errorf("flags %q", open.Flags)
	}
	// Read-only opens are not stopped by the default filter.
	for _, r := range rs {
		if r.Kind == KindSyscall && strings.HasPrefix(r.Flags, "O_RDONLY") && !strings.Contains(r.Flags, "O_CREAT") && !strings.Contains(r.Flags, "O_TRUNC") {
			t.Errorf("read-only open traced: %s", r.String())
		}
	}
}

func TestExitAndSignalsUnchanged(t *testing.T) {
	testutil.Require(t, "bwrap")
	for _, script := range []string{"exit 0", "exit 42", "kill -TERM $$", "kill -SEGV $$"} {
		t.Run(script, func(t *testing.T) {
			plain := sandboxed(t, seccomp.Policy{}, "/bin/sh", "-c", script)
			err := plain.Run()
			want := plain.ProcessState.Sys().(syscall.WaitStatus)
			if err != nil && plain.ProcessState == nil {
				t.Fatal(err)
			}
			_, got, _ := trace(t, sandboxed(t, seccomp.DefaultTrace(), "/bin/sh", "-c", script))
			if got != want {
				t.Errorf("traced status %#x (%s), untraced %#x (%s)", uint32(got), ExitString(got), uint32(want), ExitString(want))
			}
		})
	}
	// Directly, without bwrap in between: the signal itself is seen.
	t.Run("direct kill", func(t *testing.T) {
		_, ws, _ := trace(t, exec.Command("/bin/sh", "-c", "kill -USR1 $$"))
		if !ws.Signaled() || ws.Signal() != unix.SIGUSR1 {
			t.Errorf("status %s, want signal USR1", ExitString(ws))
		}
	})
}

// compile builds a small C program for the cases Go's runtime hides
// (a real vfork, a process-wide signal mask).
func compile(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "p")
	if out, err := exec.Command("cc", "-o", bin, filepath.Join(dir, "p.c")).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v %s", err, out)
	}
	return bin
}

func TestSignalBlockingProgram(t *testing.T) {
	testutil.Require(t, "bwrap")
	bin := compile(t, `#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
	sigset_t s; sigemptyset(&s); sigaddset(&s, SIGTERM);
	sigprocmask(SIG_BLOCK, &s, 0);
	kill(getpid(), SIGTERM);
	usleep(50000);
	printf("still alive while blocked\n"); fflush(stdout);
	sigprocmask(SIG_UNBLOCK, &s, 0);
	sleep(1);
	return 3;
}
`)
	rs, ws, out := trace(t, sandboxed(t, seccomp.DefaultTrace(), bin))
	if !strings.Contains(out, "still alive while blocked") {
		t.Errorf("output %q: the blocked signal was not held", out)
	}
	// bwrap reports a child killed by signal N as 128+N.
	if got, want := ws.ExitStatus(), 128+int(unix.SIGTERM); got != want {
		t.Errorf("exit %s, want %d", ExitString(ws), want)
	}
	var died bool
	for _, r := range rs {
		if r.Kind == KindExit && r.Status.Signaled() && r.Status.Signal() == unix.SIGTERM {
			died = true
		}
	}
	if !died {
		t.Errorf("no exit record of a death by SIGTERM")
	}
}

func TestMultiThreaded(t *testing.T) {
	testutil.Require(t, "bwrap")
	rs, ws, out := trace(t, sandboxed(t, seccomp.DefaultTrace(), helper(t, "threads")...))
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %s: %s", ExitString(ws), out)
	}
	parent := findExec(t, rs, helper(t, "threads")[2])
	for i := range 4 {
		r := findExec(t, rs, "/bin/echo", "thread", strconv.Itoa(i))
		if r.PPID != parent.PID {
			t.Errorf("echo %d: parent %d, want %d", i, r.PPID, parent.PID)
		}
	}
}

func TestExecFromNonLeaderThread(t *testing.T) {
	testutil.Require(t, "bwrap")
	rs, ws, out := trace(t, sandboxed(t, seccomp.DefaultTrace(), helper(t, "exec-thread", "/bin/sh", "-c", "echo $$")...))
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %s: %s", ExitString(ws), out)
	}
	parent := findExec(t, rs, helper(t, "exec-thread")[2], "/bin/sh", "-c", "echo $$")
	sh := findExec(t, rs, "/bin/sh", "-c", "echo $$")
	if sh.PID != parent.PID {
		t.Errorf("exec from a thread: pid %d, want the process's pid %d", sh.PID, parent.PID)
	}
	if sh.PPID != parent.PPID {
		t.Errorf("ppid %d, want %d", sh.PPID, parent.PPID)
	}
}

func TestFailingExec(t *testing.T) {
	testutil.Require(t, "bwrap")
	rs, ws, _ := trace(t, sandboxed(t, seccomp.DefaultTrace(), "/bin/sh", "-c", "/no/such/program arg; exit 0"))
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %s", ExitString(ws))
	}
	var failed bool
	for _, r := range rs {
		if r.Kind == KindSyscall && r.Syscall == "execve" && r.Path == "/no/such/program" {
			failed = r.Errno == unix.ENOENT && slices.Equal(r.Argv, []string{"/no/such/program", "arg"})
		}
	}
	if !failed {
		t.Errorf("no failed execve of /no/such/program with ENOENT and its argv")
	}
	// The root itself missing: Start fails and nothing is left behind.
	if _, err := Start(exec.Command("/no/such/root"), Options{}); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
}

func TestHundredChildren(t *testing.T) {
	testutil.Require(t, "bwrap")
	rs, ws, _ := trace(t, sandboxed(t, seccomp.DefaultTrace(), "/bin/sh", "-c", "i=0; while [ $i -lt 100 ]; do /bin/true $i & i=$((i+1)); done; wait"))
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %s", ExitString(ws))
	}
	sh := findExec(t, rs, "/bin/sh", "-c", "i=0; while [ $i -lt 100 ]; do /bin/true $i & i=$((i+1)); done; wait")
	seen := map[string]bool{}
	for _, r := range execs(rs) {
		if len(r.Argv) == 2 && r.Argv[0] == "/bin/true" {
			if r.PPID != sh.PID {
				t.Errorf("%q: parent %d, want %d", r.Argv, r.PPID, sh.PID)
			}
			seen[r.Argv[1]] = true
		}
	}
	if len(seen) != 100 {
		t.Errorf("%d distinct children recorded, want 100", len(seen))
	}
	exits := 0
	for _, r := range rs {
		if r.Kind == KindExit && r.PPID == sh.PID {
			exits++
		}
	}
	if exits != 100 {
		t.Errorf("%d child exits recorded, want 100", exits)
	}
}

func TestVforkExec(t *testing.T) {
	testutil.Require(t, "bwrap")
	bin := compile(t, `#include <unistd.h>
#include <sys/wait.h>
int main(void) {
	pid_t p = vfork();
	if (p == 0) { execl("/bin/echo", "echo", "from", "vfork", (char *)0); _exit(127); }
	int st; waitpid(p, &st, 0);
	return WEXITSTATUS(st) == 0 ? 0 : 1;
}
`)
	rs, ws, out := trace(t, sandboxed(t, seccomp.DefaultTrace(), bin))
	if ws.ExitStatus() != 0 || out != "from vfork\n" {
		t.Fatalf("exit %s, output %q", ExitString(ws), out)
	}
	parent := findExec(t, rs, bin)
	child := findExec(t, rs, "echo", "from", "vfork")
	if child.PPID != parent.PID || child.PID == parent.PID {
		t.Errorf("vfork child %d<%d>, want a child of %d", child.PID, child.PPID, parent.PID)
	}
}

func TestConnect(t *testing.T) {
	testutil.Require(t, "bwrap")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err == nil {
		defer ln6.Close()
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	lu, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lu.Close()
	args := []string{"tcp:" + ln.Addr().String(), "unix:" + sock}
	want := []string{"inet " + ln.Addr().String(), "unix " + sock}
	if ln6 != nil {
		args = append(args, "tcp:"+ln6.Addr().String())
		want = append(want, "inet6 "+ln6.Addr().String())
	}
	rs, ws, out := trace(t, sandboxed(t, seccomp.DefaultTrace(), helper(t, "connect", args...)...))
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %s: %s", ExitString(ws), out)
	}
	for _, w := range want {
		ok := false
		for _, r := range rs {
			// Go's sockets are non-blocking: EINPROGRESS is a success.
			if r.Syscall == "connect" && r.Addr == w && (r.Errno == 0 || r.Errno == unix.EINPROGRESS) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no successful connect to %q recorded", w)
		}
	}
}

func TestJobControlStop(t *testing.T) {
	testutil.Require(t, "bwrap")
	_, ws, out := trace(t, sandboxed(t, seccomp.DefaultTrace(), helper(t, "jobstop")...))
	if ws.ExitStatus() != 0 || !strings.Contains(out, "stopped and continued") {
		t.Fatalf("exit %s, output %q", ExitString(ws), out)
	}
}

// TestKillingTracerKillsTracees: kill -9 of the tracing process leaves no
// traced process behind (PTRACE_O_EXITKILL).
func TestKillingTracerKillsTracees(t *testing.T) {
	testutil.Require(t, "ptrace")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "/bin/sleep", "1000")
	cmd.Env = append(os.Environ(), helperEnv+"=tracer")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("tracee %d not running: %v", pid, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(time.Second)
	for {
		// The tracee was the helper's child: once the helper is reaped it
		// is reparented and, dead, reaped by init; gone means ESRCH.
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tracee %d survives its tracer: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGuestPaths: paths are resolved as the sandboxed process sees them
// (its mount namespace), relative to its cwd or to a directory fd.
func TestGuestPaths(t *testing.T) {
	testutil.Require(t, "bwrap")
	host := t.TempDir()
	os.Mkdir(filepath.Join(host, "sub"), 0o755)
	cmd := sandboxed(t, seccomp.DefaultTrace(), "/bin/sh", "-c", "echo a > rel; cd sub && echo b > ../up")
	// Bind the host dir at a guest path that does not exist on the host.
	cmd.Args = slices.Insert(cmd.Args, len(cmd.Args)-4, "--tmpfs", "/home", "--bind", host, "/home/agent", "--chdir", "/home/agent")
	rs, ws, out := trace(t, cmd)
	if ws.ExitStatus() != 0 {
		t.Fatalf("exit %s: %s", ExitString(ws), out)
	}
	want := map[string]bool{"/home/agent/rel": false, "/home/agent/up": false}
	for _, r := range rs {
		if _, ok := want[r.Path]; ok && r.Syscall == "openat" {
			want[r.Path] = true
		}
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("no open of %s recorded", p)
		}
	}
}

// TestTraceAll: with every call stopping, results are still recorded for
// calls whose exit comes after an event stop (fork/clone), and the
// program's behaviour is unchanged.
func TestTraceAll(t *testing.T) {
	testutil.Require(t, "bwrap")
	rs, ws, out := trace(t, sandboxed(t, seccomp.Policy{TraceAll: true}, "/bin/sh", "-c", "echo a | cat; exit 3"))
	if ws.ExitStatus() != 3 || out != "a\n" {
		t.Fatalf("exit %s, output %q", ExitString(ws), out)
	}
	forks, calls := 0, 0
	for _, r := range rs {
		if r.Kind != KindSyscall {
			continue
		}
		calls++
		if (r.Syscall == "clone" || r.Syscall == "fork" || r.Syscall == "vfork" || r.Syscall == "clone3") && r.Errno == 0 {
			if r.Ret <= 0 {
				t.Errorf("%s recorded without its child pid: %s", r.Syscall, r.String())
			}
			forks++
		}
	}
	if forks < 2 || calls < 50 {
		t.Errorf("%d forks, %d calls recorded; want >= 2 forks of sh and many calls", forks, calls)
	}
}

// TestSkipOpensUnder: opens below a skipped directory are not recorded;
// others and execs still are.
func TestSkipOpensUnder(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.Require(t, "ptrace")
	cmd := sandboxed(t, seccomp.DefaultTrace(), "/bin/sh", "-c", "echo a > /var/tmp/skip/a; echo b > /var/tmp/b")
	cmd.Args = slices.Insert(cmd.Args, len(cmd.Args)-4, "--dir", "/var/tmp/skip")
	c := &collector{}
	tr, err := Start(cmd, Options{Sink: c, SkipOpensUnder: []string{"/var/tmp/skip/"}})
	if err != nil {
		t.Fatal(err)
	}
	if ws, err := tr.Wait(); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("wait: %v %s", err, ExitString(ws))
	}
	var paths []string
	for _, r := range c.recs {
		if r.Syscall == "openat" {
			paths = append(paths, r.Path)
		}
	}
	if !slices.Equal(paths, []string{"/var/tmp/b"}) {
		t.Errorf("recorded opens %q, want only /var/tmp/b", paths)
	}
	findExec(t, c.recs, "/bin/sh", "-c", "echo a > /var/tmp/skip/a; echo b > /var/tmp/b")
}
