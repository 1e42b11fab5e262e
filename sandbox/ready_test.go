package sandbox_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/warmwire"
	"github.com/artrt/art/sandbox"
)

// readyScript shows what a command gets from its sandbox: its fds, its
// whole environment, where it runs, as whom, its umask, capabilities,
// seccomp, no_new_privs, signal mask and ignored signals, rlimits, its
// stdin, its session; and it exits 3.
const readyScript = `ls /proc/self/fd; env | sort; pwd; id -u; id -g; umask; ` +
	`grep -E '^(Cap|NoNewPrivs|Seccomp|SigBlk|SigIgn|Sig)' /proc/self/status; ulimit -a; ` +
	`cat; echo err >&2; exit 3`

// runFiles runs a sandbox with its stdio on files: fresh by Start, or
// through ready (then c was the configuration ready was started with).
func runFiles(t *testing.T, c *sandbox.Config, ready *sandbox.Ready) (string, string, sandbox.Result) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte("from stdin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var files [3]*os.File
	for i, name := range []string{"in", "out", "err"} {
		flag := os.O_RDWR | os.O_CREATE
		f, err := os.OpenFile(filepath.Join(dir, name), flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	var p *sandbox.Process
	var err error
	if ready == nil {
		p, err = sandbox.Start(c, sandbox.IO{Stdin: files[0], Stdout: files[1], Stderr: files[2]}, nil)
	} else {
		_, ign, ok := warmwire.Status()
		if !ok {
			t.Fatal("no SigIgn")
		}
		p, err = ready.Run(sandbox.Handoff{Argv: c.Command, Env: c.Environ(), Cwd: c.WorkDir(), Umask: umask(t), SigIgn: ign}, files)
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out"))
	errb, _ := os.ReadFile(filepath.Join(dir, "err"))
	return string(out), string(errb), res
}

// umask is this process's umask (from /proc: reading it with umask(2)
// would change it for a moment under the test's other goroutines).
func umask(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Umask:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatal("no Umask in /proc/self/status")
	return 0
}

func TestReadySandboxRunsLikeAFreshOne(t *testing.T) {
	c := direct(t)
	c.Net = sandbox.NetNone
	c.Limits = sandbox.Limits{Pids: 64}
	ready, err := sandbox.StartReady(c)
	if err != nil {
		t.Fatal(err)
	}
	if ready.Key() != sandbox.ReadyKey(c) {
		t.Fatal("key of the ready sandbox is not its configuration's")
	}
	// The run's own command and environment: not the ones it started with.
	c.Command = []string{"sh", "-c", readyScript}
	c.Env = []string{"FOO=bar baz", "PATH=/usr/bin:/bin"}
	if ready.Key() != sandbox.ReadyKey(c) {
		t.Fatal("the command or environment changed the key")
	}
	fout, ferr, fres := runFiles(t, c, nil)
	rout, rerr, rres := runFiles(t, c, ready)
	if fout != rout || ferr != rerr {
		t.Fatalf("fresh:\n%s\n%s\nready:\n%s\n%s", fout, ferr, rout, rerr)
	}
	if fres.ExitCode != 3 || rres.ExitCode != 3 {
		t.Fatalf("exit codes: fresh %d, ready %d", fres.ExitCode, rres.ExitCode)
	}
	for _, want := range []string{"0\n1\n2\n3\nFOO=bar baz\n", "/home/agent/ws\n65534\n65534\n", "from stdin\n", "CapEff:\t0000000000000000"} {
		if !strings.Contains(rout, want) {
			t.Fatalf("ready run's output lacks %q:\n%s", want, rout)
		}
	}
	if rres.Wall <= 0 || rres.Wall > time.Minute {
		t.Fatalf("ready run's wall %s", rres.Wall)
	}
}

func TestReadySandboxCommandNotFound(t *testing.T) {
	c := direct(t)
	ready, err := sandbox.StartReady(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Command = []string{"no-such-command-here"}
	fout, ferr, fres := runFiles(t, c, nil)
	rout, rerr, rres := runFiles(t, c, ready)
	if fout != rout || ferr != rerr || fres.ExitCode != rres.ExitCode {
		t.Fatalf("fresh: %q %q exit %d; ready: %q %q exit %d", fout, ferr, fres.ExitCode, rout, rerr, rres.ExitCode)
	}
}

func TestReadyKeyChangesWithThePolicy(t *testing.T) {
	c := direct(t)
	base := sandbox.ReadyKey(c)
	for name, change := range map[string]func(c *sandbox.Config){
		"net":     func(c *sandbox.Config) { c.Net = sandbox.NetNone },
		"uid":     func(c *sandbox.Config) { c.UID++ },
		"limits":  func(c *sandbox.Config) { c.Limits.MemoryBytes = 1 << 30 },
		"bind":    func(c *sandbox.Config) { c.Binds = []sandbox.Bind{{Host: "/etc", Guest: "/mnt/etc", ReadOnly: true}} },
		"tmpsize": func(c *sandbox.Config) { c.TmpSize = 1 << 20 },
		"seccomp": func(c *sandbox.Config) { c.Seccomp = []byte{1, 2, 3, 4, 5, 6, 7, 8} },
		"hide":    func(c *sandbox.Config) { c.Hide = []string{"/etc/hostname"} },
	} {
		cc := *c
		change(&cc)
		if sandbox.ReadyKey(&cc) == base {
			t.Errorf("%s: same key", name)
		}
	}
}

func TestReadySandboxDiscardLeavesNothing(t *testing.T) {
	c := direct(t)
	ready, err := sandbox.StartReady(c)
	if err != nil {
		t.Fatal(err)
	}
	kids := tree(os.Getpid())
	if len(kids) == 0 {
		t.Fatal("no sandbox process")
	}
	ready.Discard()
	for _, pid := range kids {
		if syscall.Kill(pid, 0) == nil && procStatus(pid, "State") != "" && !strings.HasPrefix(procStatus(pid, "State"), "Z") {
			t.Fatalf("process %d (%s) of the discarded sandbox still runs", pid, comm(pid))
		}
	}
}
