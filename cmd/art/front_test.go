package main

// Tests of art's thin front (cmd/art-front) and the raw warm runs its
// daemon serves (warmexec.go, session/warmexec.go): the built binaries,
// a real daemon, FUSE and bwrap.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/internal/warmwire"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

var builtFront string

// frontBinary builds the front as art with the full art (art-core) and
// the sandbox stub beside it, as make build does, once per test binary.
func frontBinary(t *testing.T) string {
	t.Helper()
	if builtFront != "" {
		return builtFront
	}
	base, err := testutil.BuildDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "front")
	for _, b := range [][]string{
		{"-tags", "urfave_cli_no_docs", "-o", filepath.Join(dir, "art-core"), "."},
		{"-o", filepath.Join(dir, "art"), "../art-front"},
		{"-o", filepath.Join(dir, "art-sandbox-stub"), "../art-sandbox-stub"},
	} {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+map[bool]string{true: "0", false: "1"}[strings.HasSuffix(b[len(b)-1], "art-front")])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", b, err, out)
		}
	}
	builtFront = filepath.Join(dir, "art")
	return builtFront
}

// frontRun runs bin with args, stdin in, ART_PHASES unset (it makes the
// daemon fall back: it measures the client's process).
func frontRun(t *testing.T, bin, in string, args ...string) runOut {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ART_PHASES=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin = strings.NewReader(in)
	return exe(t, cmd)
}

// notServed counts the raw runs the daemon of db's main fell back on.
func notServed(t *testing.T, db string) int {
	t.Helper()
	b, _ := os.ReadFile(session.WarmLog(db, "main"))
	return strings.Count(string(b), "raw run not served")
}

// timing masks what differs between two runs' summary lines.
var timing = regexp.MustCompile(`in [0-9.]+m?s|snapshot [0-9a-f]+`)

func TestFrontServesWarmRunsAsTheFullArt(t *testing.T) {
	ws, db := warmWorkspace(t)
	front := frontBinary(t)
	core := filepath.Join(filepath.Dir(front), "art-core")
	warm := func(bin string, argv ...string) runOut {
		args := append([]string{"run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-e", "PATH=/usr/bin:/bin", "--"}, argv...)
		return frontRun(t, bin, "in\n", args...)
	}
	// No daemon yet: the front executes the full art, which starts one.
	if r := warm(front, "true"); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	cases := [][]string{
		{"sh", "-c", "cat; echo to-stderr >&2; echo x > f; rm f; exit 0"},
		{"sh", "-c", "echo out; exit 3"},
		{"sh", "-c", "kill -TERM $$"},
	}
	for _, argv := range cases {
		before := notServed(t, db)
		viaFront := warm(front, argv...)
		if n := notServed(t, db); n != before {
			b, _ := os.ReadFile(session.WarmLog(db, "main"))
			t.Fatalf("%q through the front was not served by the daemon:\n%s", argv, b)
		}
		viaCore := warm(core, argv...)
		if viaFront.code != viaCore.code || viaFront.stdout != viaCore.stdout ||
			timing.ReplaceAllString(viaFront.stderr, "") != timing.ReplaceAllString(viaCore.stderr, "") {
			t.Errorf("%q: front exit %d %q %q; full art exit %d %q %q", argv, viaFront.code, viaFront.stdout, viaFront.stderr,
				viaCore.code, viaCore.stdout, viaCore.stderr)
		}
		if !strings.Contains(viaFront.stderr, "; snapshot ") {
			t.Errorf("%q: no summary line: %q", argv, viaFront.stderr)
		}
	}
	// The journal: each front run's op and events are its full-art twin's.
	evs := runEvents(t, db)
	if len(evs) != 2*len(cases) {
		t.Fatalf("%d run ops, want %d", len(evs), 2*len(cases))
	}
	for i := 0; i < len(evs); i += 2 {
		if !reflect.DeepEqual(evs[i], evs[i+1]) {
			t.Errorf("run %d: front's events %v\nfull art's %v", i/2, evs[i], evs[i+1])
		}
	}
	// -q: no summary line; exit code and output still the command's.
	r := frontRun(t, front, "", "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo q; exit 5")
	if r.code != 5 || r.stdout != "q\n" || r.stderr != "" {
		t.Errorf("-q through the front: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// Limits: their line comes before the command's output, as the full
	// art writes it. The full art's run leaves the next sandbox ahead
	// with its policy; the front's is served on it.
	limited := []string{"run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-e", "PATH=/usr/bin:/bin", "--pids", "100",
		"--", "sh", "-c", "echo to-stderr >&2; exit 4"}
	viaCore := frontRun(t, core, "", limited...)
	before := notServed(t, db)
	viaFront := frontRun(t, front, "", limited...)
	if n := notServed(t, db); n != before {
		t.Errorf("a run with limits through the front was not served by the daemon")
	}
	if !strings.HasPrefix(viaCore.stderr, "art: limits enforced by ") || viaFront.code != 4 || viaCore.code != 4 ||
		timing.ReplaceAllString(viaFront.stderr, "") != timing.ReplaceAllString(viaCore.stderr, "") {
		t.Errorf("limits: front exit %d %q; full art exit %d %q", viaFront.code, viaFront.stderr, viaCore.code, viaCore.stderr)
	}
	// Bytes that are not UTF-8 reach the command as they are, through
	// the front and through the full art (the daemon's requests are
	// JSON, which would make them U+FFFD). Each run follows one that
	// leaves a sandbox ahead with its policy.
	for _, bin := range []string{front, core} {
		run := func(arg string) runOut {
			return frontRun(t, bin, "", "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "-e", "PATH=/usr/bin:/bin",
				"--", "sh", "-c", `printf %s "$1"`, "sh", arg)
		}
		if r := run("ready"); r.code != 0 || r.stdout != "ready" {
			t.Fatalf("%s: exit %d %q %q", filepath.Base(bin), r.code, r.stdout, r.stderr)
		}
		if r := run("\xe9t\xe9"); r.code != 0 || r.stdout != "\xe9t\xe9" {
			t.Errorf("%s: an argument not UTF-8: exit %d %q %q", filepath.Base(bin), r.code, r.stdout, r.stderr)
		}
	}

	// Fallbacks run through the full art: a usage error it reports...
	r = frontRun(t, front, "", "run", "--warm", "1m", "-m", ws, "-d", db, "--trace", "-i=false", "--", "true")
	c := frontRun(t, core, "", "run", "--warm", "1m", "-m", ws, "-d", db, "--trace", "-i=false", "--", "true")
	if r.code != 2 || r != (runOut{stdout: c.stdout, stderr: c.stderr, code: c.code, wall: r.wall}) {
		t.Errorf("--trace: front %+v, full art %+v", r, c)
	}
	// ... and another workspace, which the full art runs on a new daemon.
	other := filepath.Join(filepath.Dir(ws), "other")
	writeFile(t, filepath.Join(other, "g"), "g\n")
	os.Chmod(other, 0o755)
	r = frontRun(t, front, "", "run", "--warm", "1m", "-m", other, "-d", db, "-i=false", "--", "sh", "-c", "cat g")
	if r.code != 0 || r.stdout != "g\n" {
		t.Errorf("another workspace through the front: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestFrontHostEditIsSeen: a raw run's reuse check (the branch's head,
// the host workspace unchanged) begins as its request arrives, while the
// daemon parses it (lookAhead); an edit made on the host before the run
// is still never served from the old mount, run after run.
func TestFrontHostEditIsSeen(t *testing.T) {
	ws, db := warmWorkspace(t)
	front := frontBinary(t)
	run := func(argv ...string) runOut {
		args := append([]string{"run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "-e", "PATH=/usr/bin:/bin", "--"}, argv...)
		return frontRun(t, front, "", args...)
	}
	if r := run("true"); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	for i := range 3 {
		before := notServed(t, db)
		if r := run("true"); r.code != 0 || notServed(t, db) != before {
			t.Fatalf("edit %d: the run before it was not served by the daemon: exit %d %q", i, r.code, r.stderr)
		}
		body := fmt.Sprintf("print('edited on the host, %d')\n", i)
		writeFile(t, filepath.Join(ws, "main.py"), body)
		if r := run("cat", "main.py"); r.code != 0 || r.stdout != body {
			t.Fatalf("edit %d: the run after it read %q (exit %d, %q)", i, r.stdout, r.code, r.stderr)
		}
		if got := mustRun(t, "cat", "-d", db, "main:ws/main.py").stdout; got != body {
			t.Fatalf("edit %d was not captured: %q", i, got)
		}
	}
}

func TestFrontOtherVerbs(t *testing.T) {
	_, db := runWorkspace(t)
	front := frontBinary(t)
	core := filepath.Join(filepath.Dir(front), "art-core")
	mustRun(t, "push", "-m", filepath.Join(filepath.Dir(db), "ws"), "-d", db)
	for _, args := range [][]string{{"--version"}, {"log", "-d", db}, {"log", "-d", filepath.Join(filepath.Dir(db), "none.db")}} {
		f, c := frontRun(t, front, "", args...), frontRun(t, core, "", args...)
		if f.code != c.code || f.stdout != c.stdout || f.stderr != c.stderr {
			t.Errorf("art %q: front %+v, full art %+v", args, f, c)
		}
	}
	// Without the full art beside it, one line says what is missing.
	alone := filepath.Join(t.TempDir(), "art")
	b, err := os.ReadFile(front)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	r := frontRun(t, alone, "", "--version")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "art-core") {
		t.Errorf("front alone: exit %d %q", r.code, r.stderr)
	}
}

// rawExec sends an exec request for args to the daemon at sock, with
// /dev/null as stdio, and returns its reply.
func rawExec(t *testing.T, sock string, args []string, cwd string) map[string]any {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	um, ign, _ := warmwire.Status()
	msg, _ := json.Marshal(map[string]any{"op": "exec", "args": args, "env": os.Environ(), "cwd": cwd,
		"umask": um, "sig_ign": ign, "proc": warmwire.ProcKey()})
	fd := int(null.Fd())
	if _, _, err := c.(*net.UnixConn).WriteMsgUnix(append(msg, '\n'), unix.UnixRights(fd, fd, fd), nil); err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRawRunFallbackDoesNothing(t *testing.T) {
	ws, db := warmWorkspace(t)
	front := frontBinary(t)
	base := []string{"run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "-e", "PATH=/usr/bin:/bin"}
	if r := frontRun(t, front, "", append(base, "--", "sh", "-c", "true")...); r.code != 0 {
		t.Fatalf("first run: exit %d %s", r.code, r.stderr)
	}
	ops := len(runEvents(t, db))
	sock := session.WarmSocket(db, "main")
	other := t.TempDir()
	otherDB := filepath.Join(filepath.Dir(db), "other.db")
	for _, args := range [][]string{
		append(append([]string{}, base...), "--trace", "--", "sh", "-c", "true"),
		{"run", "--warm", "1m", "-m", other, "-d", db, "-i=false", "--", "sh", "-c", "true"},
		append(append([]string{}, base...), "--bogus", "--", "sh", "-c", "true"),
		{"log", "-d", db},
		append(append([]string{}, base...), "-b", "elsewhere", "--", "sh", "-c", "true"),
		// Another store with the same workspace and branch: the daemon's
		// sandbox records into its own store, never this one's.
		{"run", "--warm", "1m", "-m", ws, "-d", otherDB, "-i=false", "-q", "-e", "PATH=/usr/bin:/bin", "--", "sh", "-c", "true"},
		append(append([]string{}, base...), "--", "no-such-command"),
	} {
		r := rawExec(t, sock, args, "/")
		if r["fallback"] == nil || r["fallback"] == "" {
			t.Errorf("%q: not a fallback: %v", args, r)
		}
	}
	if ops != 1 {
		t.Fatalf("%d run ops after the first run", ops)
	}
	if n := len(runEvents(t, db)); n != ops {
		t.Fatalf("fallbacks recorded %d run ops", n-ops)
	}
	if _, err := os.Lstat(otherDB); !os.IsNotExist(err) {
		t.Fatalf("the other store: %v", err)
	}
	// The daemon is as it was: its next run is served on the sandbox
	// started ahead.
	before := notServed(t, db)
	if r := frontRun(t, front, "", append(base, "--", "sh", "-c", "true")...); r.code != 0 || notServed(t, db) != before {
		t.Fatalf("run after the fallbacks: exit %d %s (served: %v)", r.code, r.stderr, notServed(t, db) == before)
	}
	// Another user reaches nothing: the socket is the daemon's user's.
	if os.Geteuid() == 0 {
		py := "/usr/bin/python3" // readable by nobody (not a user's shim)
		if _, err := os.Stat(py); err != nil {
			t.Skip("no /usr/bin/python3 for another user's client")
		}
		cmd := exec.Command(py, "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError:
    sys.exit(0)
s.sendall(b'{"op":"exec","args":["run","--warm","1m","-d","x","--","true"],"cwd":"/"}\n')
sys.exit(1 if s.recv(100) else 0)`, sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("another user's client got an answer: %v %s", err, out)
		}
		if n := len(runEvents(t, db)); n != ops+1 {
			t.Errorf("%d run ops after another user's request, want %d", n, ops+1)
		}
	}
}

// TestRawRunSameOptions: the options and the sandbox a warm daemon
// computes from a client's raw inputs are the ones the client computes
// from its own process. While the "daemon" parses, this process's own
// environment, working directory and terminal differ from the client's
// (as a daemon's do), so that a parse reading them instead of the
// client's inputs fails here.
func TestRawRunSameOptions(t *testing.T) {
	testutil.Require(t, "bwrap")
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	writeFile(t, filepath.Join(ws, "a"), "a\n")
	writeFile(t, filepath.Join(dir, "data", "d"), "d\n")
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)
	// A relative $HOME's config, under the client's directory only.
	writeFile(t, filepath.Join(dir, "h", ".config", "art", "config.json"), `{"net":{"mode":"none"}}`)
	// The daemon's own config (its process's $XDG_CONFIG_HOME): a parse
	// that finds it reads another policy.
	decoy := filepath.Join(dir, "decoy")
	writeFile(t, filepath.Join(decoy, "art", "config.json"), `{"net":{"mode":"none"}}`)
	daemonEnv := map[string]string{"TERM": "daemon-term", "XDG_CONFIG_HOME": decoy}
	clientEnv := map[string]string{"TERM": "xterm-test", "SUDO_UID": "4242", "SUDO_GID": "4243", "HOME": home, "XDG_CONFIG_HOME": ""}
	keys := []string{"TERM", "SUDO_UID", "SUDO_GID", "HOME", "XDG_CONFIG_HOME"}
	for _, k := range keys {
		t.Setenv(k, "") // restored after the test
	}
	setEnv := func(vars map[string]string) {
		for _, k := range keys {
			if v, ok := vars[k]; ok && v != "" {
				os.Setenv(k, v)
			} else {
				os.Unsetenv(k)
			}
		}
	}
	relHome := map[string]string{"HOME": "h"}
	for k, v := range clientEnv {
		if k != "HOME" {
			relHome[k] = v
		}
	}
	t.Chdir(dir)
	type tc struct {
		flags []string
		env   map[string]string
		tty   bool
	}
	matrix := []tc{
		{flags: []string{"-m", "ws", "-d", "s.db"}},
		{flags: []string{"-m", ws, "-d", filepath.Join(dir, "s.db")}},
		{flags: []string{"-m", "ws", "-d", "s.db", "--bind", "data:/data:ro", "-e", "A=b", "--net", "none"}},
		{flags: []string{"-m", "./ws/", "-d", "s.db", "-b", "try", "--bind", filepath.Join(dir, "data") + ":/data", "--net", "host"}},
		{flags: []string{"-m", "ws", "-d", "s.db", "--user", "1234:1235", "--memory", "64M", "--pids", "50", "--timeout", "3s", "-q"}},
		{flags: []string{"-m", "ws", "-d", "s.db", "-i=false", "--", "sh", "-c", "echo"}},
		{flags: []string{"-m", "ws", "-d", "s.db", "-i=false"}, tty: true},
		{flags: []string{"-m", "ws", "-d", "s.db"}, env: relHome},
	}
	for _, c := range matrix {
		env := c.env
		if env == nil {
			env = clientEnv
		}
		args := append([]string{"run", "--warm", "1m"}, c.flags...)
		parse := func(in procInputs) (runOptions, error) {
			var o runOptions
			var perr error
			if !parseRunArgs(context.Background(), args, in, nil, func(_ *cli.Context, got runOptions, err error) { o, perr = got, err }) {
				t.Fatalf("%q: not parsed as art run", args)
			}
			return o, perr
		}
		// The client: its own process's inputs (ownInputs, with the
		// terminal the case gives).
		setEnv(env)
		own, err := ownInputs()
		if err != nil {
			t.Fatal(err)
		}
		own.stdoutTTY = c.tty
		client, cerr := parse(own)
		// The daemon: its own environment and working directory, no
		// terminal; the client's given.
		setEnv(daemonEnv)
		t.Chdir("/")
		daemon, derr := parse(procInputs{getenv: func(k string) string { return env[k] }, cwd: dir, stdoutTTY: c.tty})
		t.Chdir(dir)
		if cerr != nil || derr != nil {
			t.Fatalf("%q %v: client %v, daemon %v", args, env, cerr, derr)
		}
		if journal.BranchKey(client.Store, client.Branch) != journal.BranchKey(filepath.Join(dir, daemon.Store), daemon.Branch) &&
			journal.BranchKey(client.Store, client.Branch) != journal.BranchKey(daemon.Store, daemon.Branch) {
			t.Errorf("%q: stores %s and %s", args, client.Store, daemon.Store)
		}
		client.Store, daemon.Store = "", ""
		if !reflect.DeepEqual(client, daemon) {
			t.Errorf("%q %v:\nclient %+v\ndaemon %+v", args, env, client, daemon)
		}
		ccfg, cerr := session.SandboxConfig(client.Options, client.Command)
		dcfg, derr := session.SandboxConfig(daemon.Options, daemon.Command)
		if cerr != nil || derr != nil || !reflect.DeepEqual(ccfg, dcfg) {
			t.Errorf("%q %v: sandbox\nclient %+v %v\ndaemon %+v %v", args, env, ccfg, cerr, dcfg, derr)
		}
		if c.tty && !slices.Contains(client.Env, "TERM=xterm-test") {
			t.Errorf("%q: a terminal's client passes no $TERM: %q", args, client.Env)
		}
		if c.env != nil && client.Net != sandbox.NetNone {
			t.Errorf("%q: relative $HOME's config not read: net %q", args, client.Net)
		}
	}
}

// TestWarmSocketName: the front's socket name is the daemon's.
func TestWarmSocketName(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.Symlink(dir, filepath.Join(dir, "link"))
	writeFile(t, filepath.Join(dir, "s.db"), "") // links resolve in an existing path
	for _, c := range [][2]string{{"s.db", "main"}, {filepath.Join(dir, "link", "s.db"), "try"}, {"./x/../s.db", "b/c"}} {
		if a, b := warmwire.Socket(c[0], c[1]), session.WarmSocket(c[0], c[1]); a != b {
			t.Errorf("%q: front %s, daemon %s", c, a, b)
		}
		if a, b := warmwire.Socket(c[0], c[1]), filepath.Join(journal.LockDir(), "warm-"+journal.BranchKey(filepath.Join(dir, "s.db"), c[1])+".sock"); a != b {
			t.Errorf("%q: %s, want %s", c, a, b)
		}
	}
}

// TestFrontSignalBeforeFallback: a signal the front caught before the
// daemon answered fallback ends the front; the full art is not run (nor
// the command). The daemon is a stand-in that delays its fallback until
// the front has the signal.
func TestFrontSignalBeforeFallback(t *testing.T) {
	ws, db := runWorkspace(t)
	front := frontBinary(t)
	t.Cleanup(func() {
		if warmPID(db) != 0 { // the full art ran after all: its daemon
			stopWarm(t, db, "main")
		}
	})
	sock := warmwire.Socket(db, "main")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(sock)
	defer l.Close()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(front, "run", "--warm", "1m", "-m", ws, "-d", db, "-i=false", "-q", "-e", "PATH=/usr/bin:/bin",
		"--bind", filepath.Dir(marker)+":/out", "--", "sh", "-c", "touch /out/ran")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The request (its descriptors are closed unread), then the signal.
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(300 * time.Millisecond) // caught by the front
	json.NewEncoder(c).Encode(map[string]string{"fallback": "test"})
	l.Close()
	os.Remove(sock)
	var err2 error
	select {
	case err2 = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the front did not end")
	}
	ee, ok := err2.(*exec.ExitError)
	if !ok {
		t.Fatalf("the front: %v, want ended by SIGINT", err2)
	}
	if ws, _ := ee.Sys().(syscall.WaitStatus); !(ws.Signaled() && ws.Signal() == syscall.SIGINT) && ee.ExitCode() != 130 {
		t.Errorf("the front: %v, want ended by SIGINT", err2)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the command ran after the signal: %v", err)
	}
}
