package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"golang.org/x/sys/unix"
)

// The remount stress test (issue 20): a git repository made in the mount
// must pass `git fsck --full` after the daemon is stopped and the branch
// mounted again, and every file must read back byte for byte what was
// written, whatever the timing, the load, and the stale-session cleanup
// happening around it.
//
// Each cycle: push the host workspace (files inside or outside the
// capture's 2 s racy window), mount with -m, read files, move and remove
// a directory, git init/add/commit (and sometimes gc) in the mount, write
// a file and patch a large one in place (passthrough), sync, stop the
// daemon (SIGINT; SIGKILL, so the next mount must clean up after it; or
// SIGINT with a shell still in the repository, so the unmount fails),
// remount with or without -m after a random pause, then git fsck --full,
// git status, and compare a listing with the hash of every file against
// the one taken before the stop. A neighbour mount of another store stays
// live throughout with a file held open for writing, and is sometimes
// stopped while the next mount starts: the stale-upper cleanup of every
// mount must never touch a live or just-closed session's private copies.
//
// In `make test` it runs 6 cycles; ART_STRESS_CYCLES=1000 runs long,
// ART_STRESS_SEED replays a seed's choices (not its timing), and
// ART_STRESS_CAPTURE=0 leaves out the capture cases it found
// (stress.capture).
// All activity inside the mounts is in child processes (sh, git): the
// test process never touches a mount.

func TestRemountStress(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "git")
	cycles := 6
	if testing.Short() {
		cycles = 1
	}
	if v := os.Getenv("ART_STRESS_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ART_STRESS_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("ART_STRESS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("ART_STRESS_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("%d cycles, ART_STRESS_SEED=%d", cycles, seed)

	s := newStress(t, seed)
	s.startNeighbour()
	start := time.Now()
	for i := 1; i <= cycles; i++ {
		s.cycle(i)
		if t.Failed() {
			return
		}
		if i%50 == 0 {
			t.Logf("%d cycles in %s", i, time.Since(start).Round(time.Second))
		}
	}
	s.stopNeighbour(false)
	t.Logf("%d cycles in %s: %s", cycles, time.Since(start).Round(time.Second), s.counts())
}

type stress struct {
	t    *testing.T
	rng  *rand.Rand
	bin  string
	base string
	tmp  string // TMPDIR of every art process: where uppers are made and cleaned
	ws   string
	db   string
	mnt  string
	env  []string
	log  bytes.Buffer // the current cycle's commands and output
	n    map[string]int

	model map[string]string // ws-relative path -> entry, the host workspace as pushed
	bin3  []byte            // ws/bin's content

	nb    *neighbour
	stale []string // upper directories of killed daemons
	live  map[*daemon]bool
	// capture also runs the two capture cases this test found (pinned by
	// workspace/capture_stale_test.go, fixed by the exact capture of issue
	// 13): one store kept for all cycles, and the deleted tree's files
	// inside the racy window. On unless ART_STRESS_CAPTURE=0.
	capture bool
}

// neighbour is a second mount, of its own store, that stays live with a
// file held open for writing by passthrough while the cycles run.
type neighbour struct {
	ws, db, mnt string
	d           *daemon
	sh          *exec.Cmd
	in          *os.File // commands to the shell holding the file
	out         *bufio.Reader
	want        []byte // held.txt as written so far
	off         int    // the holder's write offset
	upper       string
}

type daemon struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
	upper  string
	args   []string
	sent   bool // signalled already (a second SIGINT would kill it)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newStress(t *testing.T, seed int64) *stress {
	base := t.TempDir()
	s := &stress{t: t, rng: rand.New(rand.NewSource(seed)), bin: artBinary(t), base: base,
		tmp: filepath.Join(base, "tmp"), ws: filepath.Join(base, "ws"), db: filepath.Join(base, "ws.db"),
		mnt: filepath.Join(base, "mnt"), n: map[string]int{}, live: map[*daemon]bool{},
		capture: os.Getenv("ART_STRESS_CAPTURE") != "0"}
	for _, d := range []string{s.tmp, s.mnt, filepath.Join(base, "home")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.env = append(os.Environ(), "TMPDIR="+s.tmp, "HOME="+filepath.Join(base, "home"), "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com",
		"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
	if err := os.WriteFile(filepath.Join(base, "home", ".gitconfig"),
		[]byte("[safe]\n\tdirectory = *\n[gc]\n\tautoDetach = false\n[init]\n\tdefaultBranch = main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Runs after the daemons are killed (registered later) and before
	// t.TempDir's removal (earlier): whatever a failure left mounted goes
	// first.
	t.Cleanup(func() {
		for _, m := range []string{s.mnt, filepath.Join(base, "mnt2")} {
			for unix.Unmount(m, unix.MNT_DETACH) == nil {
			}
		}
	})
	return s
}

func (s *stress) logf(format string, args ...any) {
	fmt.Fprintf(&s.log, format+"\n", args...)
}

// fail reports the cycle's log with the failure and ends the test.
func (s *stress) fail(format string, args ...any) {
	s.t.Helper()
	for d := range s.live {
		s.logf("--- stderr of the live art mount %s:\n%s", strings.Join(d.args, " "), d.stderr.String())
	}
	s.t.Fatalf("%s\n--- this cycle's commands and output:\n%s", fmt.Sprintf(format, args...), s.log.String())
}

// sh runs script with sh in dir, in its own process group, and returns
// its combined output and whether it exited 0.
func (s *stress) sh(dir, script string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir, cmd.Env = dir, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	s.logf("$ (cd %s && %s)\n%s[%v]", dir, script, out, err)
	return string(out), err == nil
}

func (s *stress) mustSh(dir, script string) string {
	s.t.Helper()
	out, ok := s.sh(dir, script)
	if !ok {
		s.fail("%s failed", script)
	}
	return out
}

func (s *stress) art(args ...string) {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	s.logf("$ art %s\n%s[%v]", strings.Join(args, " "), out, err)
	if err != nil {
		s.fail("art %s: %v", strings.Join(args, " "), err)
	}
}

// mount starts `art mount ARGS` and waits until it serves.
func (s *stress) mount(args ...string) *daemon {
	s.t.Helper()
	d := &daemon{stderr: &syncBuffer{}, done: make(chan error, 1), args: args}
	d.cmd = exec.Command(s.bin, append([]string{"mount"}, args...)...)
	d.cmd.Env = s.env
	pr, pw, err := os.Pipe()
	if err != nil {
		s.t.Fatal(err)
	}
	d.cmd.Stderr = pw
	if err := d.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	pw.Close()
	ready, copied := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		once := false
		for sc.Scan() {
			d.stderr.Write([]byte(sc.Text() + "\n"))
			if !once && strings.HasPrefix(sc.Text(), "serving ") {
				once = true
				close(ready)
			}
		}
		pr.Close()
	}()
	go func() {
		err := d.cmd.Wait()
		// Wait does not wait for the copy of a pipe the test made: the
		// daemon's last line (its error) may still be on the way.
		select {
		case <-copied:
		case <-time.After(10 * time.Second):
		}
		d.done <- err
	}()
	s.t.Cleanup(func() { d.cmd.Process.Kill() })
	select {
	case <-ready:
	case err := <-d.done:
		d.done <- err
		s.fail("art mount %s exited before serving (%v):\n%s", strings.Join(args, " "), err, d.stderr.String())
	case <-time.After(2 * time.Minute):
		s.fail("art mount %s did not serve within 2 min:\n%s", strings.Join(args, " "), d.stderr.String())
	}
	d.upper = upperOf(d.cmd.Process.Pid, s.tmp)
	if d.upper == "" {
		s.fail("art mount (pid %d) holds no upper directory lock in %s", d.cmd.Process.Pid, s.tmp)
	}
	s.logf("$ art mount %s: serving, upper %s", strings.Join(args, " "), filepath.Base(d.upper))
	s.live[d] = true
	return d
}

// upperOf finds the upper directory whose lock process pid holds.
func upperOf(pid int, tmp string) string {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		p, err := os.Readlink(fd)
		if err == nil && strings.HasPrefix(p, tmp+"/art-upper-") && filepath.Base(p) == "lock" {
			return filepath.Dir(p)
		}
	}
	return ""
}

// stop ends d with sig and waits until it has exited and its mountpoint
// is gone (SIGINT) or it has exited (SIGKILL: the mount stays, stale).
func (s *stress) stop(d *daemon, sig syscall.Signal, mnt string) {
	s.t.Helper()
	if !d.sent {
		d.cmd.Process.Signal(sig)
	}
	var err error
	select {
	case err = <-d.done:
	case <-time.After(2 * time.Minute):
		s.fail("art mount did not exit within 2 min of %v:\n%s", sig, d.stderr.String())
	}
	delete(s.live, d)
	s.logf("$ kill -%s art mount %s: %v\n%s", unix.SignalName(sig), strings.Join(d.args, " "), err, d.stderr.String())
	if sig == syscall.SIGKILL {
		return
	}
	if err != nil {
		s.fail("art mount after %v: %v", sig, err)
	}
	if isMounted(mnt) {
		s.fail("%s still mounted after art mount exited", mnt)
	}
	if _, err := os.Stat(d.upper); err == nil {
		s.fail("upper %s left behind by a clean exit", d.upper)
	}
}

// stopBusy sends d SIGINT while a shell has its working directory in
// dir (on d's mount), expects art mount to give up on the busy unmount
// and exit with an error, then ends the shell.
func (s *stress) stopBusy(d *daemon, dir string) {
	s.t.Helper()
	sh := exec.Command("sh", "-c", `echo in; exec sleep 600`)
	sh.Dir = dir
	out, err := sh.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { sh.Process.Kill() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "in\n" {
		s.fail("shell in %s: %q %v", dir, l, err)
	}
	d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err = <-d.done:
	case <-time.After(2 * time.Minute):
		s.fail("art mount did not give up on a busy unmount within 2 min:\n%s", d.stderr.String())
	}
	delete(s.live, d)
	s.logf("$ kill -INT art mount %s (a shell in %s): %v\n%s", strings.Join(d.args, " "), dir, err, d.stderr.String())
	if err == nil || !strings.Contains(d.stderr.String(), "busy") {
		s.fail("art mount with a shell in its mount: %v, want a busy unmount", err)
	}
	sh.Process.Kill()
	sh.Wait()
}

func isMounted(mnt string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

// listing describes every entry below dir (type, mode, symlink target,
// SHA-256 of file contents), read by child processes only.
func (s *stress) listing(dir string) map[string]string {
	s.t.Helper()
	out := s.mustSh(dir, `find . -mindepth 1 -printf '%y %m %p %l\n' | sort; echo ---; find . -type f -print0 | sort -z | xargs -0 -r sha256sum`)
	m := map[string]string{}
	ent, sums, ok := strings.Cut(out, "---\n")
	if !ok {
		s.fail("listing of %s: no separator", dir)
	}
	for _, l := range strings.Split(strings.TrimSpace(ent), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		p := strings.TrimPrefix(f[2], "./")
		switch f[0] {
		case "l":
			m[p] = "l " + strings.Join(f[3:], " ")
		default:
			m[p] = f[0] + " " + f[1]
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(sums), "\n") {
		sum, p, ok := strings.Cut(l, "  ")
		if !ok {
			continue
		}
		p = strings.TrimPrefix(p, "./")
		m[p] += " " + sum
	}
	return m
}

func diffListings(want, got map[string]string) string {
	var d []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			d = append(d, "missing "+p+" ("+w+")")
		} else if g != w {
			d = append(d, "changed "+p+": want "+w+", got "+g)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			d = append(d, "unexpected "+p+" ("+g+")")
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// writeHost writes a host file, its mtime inside or outside the capture's
// racy window.
func (s *stress) writeHost(rel string, data []byte, racy bool) {
	p := filepath.Join(s.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		s.t.Fatal(err)
	}
	if !racy {
		old := time.Now().Add(-time.Duration(5+s.rng.Intn(100)) * time.Second)
		if err := os.Chtimes(p, old, old); err != nil {
			s.t.Fatal(err)
		}
	}
	s.model[rel] = "f 644 " + sum(data)
}

// prepareHost makes the host workspace anew (a 3 MB binary, a symlink, an
// empty directory, a small tree), each file racy or not.
func (s *stress) prepareHost(i int) {
	if err := os.RemoveAll(s.ws); err != nil {
		s.t.Fatal(err)
	}
	s.model = map[string]string{}
	for _, d := range []string{"", "empty", "src", "src/sub"} {
		if err := os.MkdirAll(filepath.Join(s.ws, d), 0o755); err != nil {
			s.t.Fatal(err)
		}
		if d != "" {
			s.model[d] = "d 755"
		}
	}
	racy := func() bool { return s.rng.Intn(2) == 0 }
	s.bin3 = make([]byte, 3<<20)
	s.rng.Read(s.bin3)
	s.writeHost("bin", s.bin3, racy())
	s.writeHost("notes.txt", []byte(fmt.Sprintf("notes of cycle %d\n", i)), racy())
	// The tree the session deletes: inside the racy window at every
	// import, the capture at the remount brings it back
	// (TestCaptureKeepsAgentDeletionOfRacyFiles).
	s.writeHost("src/a.txt", []byte(fmt.Sprintf("a %d\n", i)), s.capture && racy())
	s.writeHost("src/sub/b.txt", bytes.Repeat([]byte{'b'}, 200<<10), s.capture && racy())
	if err := os.Symlink("bin", filepath.Join(s.ws, "link")); err != nil {
		s.t.Fatal(err)
	}
	s.model["link"] = "l bin"
}

// load starts CPU and/or I/O load (goroutines and a writer process of
// its own) and returns what stops it.
func (s *stress) load(cpu, io bool) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	if cpu {
		for range runtime.NumCPU() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := 0
				for !quit.Load() {
					end := time.Now().Add(20 * time.Millisecond)
					for time.Now().Before(end) {
						x++
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}
	var w *exec.Cmd
	if io {
		dir := filepath.Join(s.base, "load")
		os.Mkdir(dir, 0o755)
		w = exec.Command("sh", "-c", `while :; do dd if=/dev/zero of=f bs=1M count=32 conv=fsync status=none; rm -f f; done`)
		w.Dir = dir
		w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := w.Start(); err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { syscall.Kill(-w.Process.Pid, syscall.SIGKILL) })
	}
	return func() {
		quit.Store(true)
		wg.Wait()
		if w != nil {
			syscall.Kill(-w.Process.Pid, syscall.SIGKILL)
			w.Wait()
		}
	}
}

func (s *stress) pause(max time.Duration) {
	if s.rng.Intn(2) == 0 {
		return // at once
	}
	d := time.Duration(s.rng.Int63n(int64(max)))
	s.logf("(pause %s)", d.Round(time.Millisecond))
	time.Sleep(d)
}

// cycle runs one push, mount, work, stop, remount, check.
func (s *stress) cycle(i int) {
	s.log.Reset()
	s.logf("=== cycle %d", i)
	cpu, io := s.rng.Intn(2) == 0, s.rng.Intn(3) == 0
	s.logf("(load: cpu %v, io %v)", cpu, io)
	stopLoad := s.load(cpu, io)
	defer stopLoad()

	s.prepareHost(i)
	if !s.capture {
		// A new store, as in the issue. With the store kept, a file the
		// previous cycle cached and this one pushes inside the racy
		// window keeps its stale cache entry, and the capture at the
		// remount takes the agent's patch of it for a clash with the host
		// and drops it (TestCaptureStaleStatCacheKeepsAgentEdit).
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(s.db + suffix); err != nil && !os.IsNotExist(err) {
				s.t.Fatal(err)
			}
		}
	}
	s.pause(2500 * time.Millisecond) // the push sees racy files or not
	// --replace: the branch equal to the host (the last cycle's agent
	// work dropped), which the check below expects.
	s.art("push", "-q", "--replace", "-m", s.ws, "-d", s.db)
	d := s.mount("-d", s.db, "-m", s.ws, s.mnt)
	s.checkStaleGone()
	wsm := filepath.Join(s.mnt, "ws")

	// The session: what the user did, with variations.
	if got := s.listing(wsm); diffListings(s.model, got) != "" {
		s.fail("mounted workspace differs from the host's:\n%s", diffListings(s.model, got))
	}
	commits := 1 + s.rng.Intn(3)
	var script strings.Builder
	script.WriteString(`set -e
cat bin link src/a.txt src/sub/b.txt notes.txt >/dev/null
mv src src2 && rm -rf src2 && mkdir src2
git init -q r && cd r
echo hi > f && git add f && git commit -qm one
`)
	for c := 2; c <= commits; c++ {
		fmt.Fprintf(&script, "head -c %d /dev/urandom > big%d && echo %d >> f && git add -A && git commit -qm c%d\n", 1+s.rng.Intn(400<<10), c, c, c)
	}
	switch s.rng.Intn(4) {
	case 0:
		script.WriteString("git gc -q\n")
	case 1:
		script.WriteString("git gc -q --aggressive --prune=now\n")
	}
	script.WriteString("cd ..\n")
	fmt.Fprintf(&script, "echo data %d > new.txt\n", i)
	off := s.rng.Intn(len(s.bin3) - 16)
	fmt.Fprintf(&script, "printf XYZ%d | dd of=bin bs=1 seek=%d conv=notrunc status=none\n", i%10, off)
	script.WriteString("sync\n")
	s.mustSh(wsm, script.String())
	for p := range s.model {
		if p == "src" || strings.HasPrefix(p, "src/") {
			delete(s.model, p)
		}
	}
	s.model["src2"] = "d 755"
	s.model["new.txt"] = "f 644 " + sum([]byte(fmt.Sprintf("data %d\n", i)))
	copy(s.bin3[off:], fmt.Sprintf("XYZ%d", i%10))
	s.model["bin"] = "f 644 " + sum(s.bin3)

	before := s.listing(wsm)
	mine := map[string]string{}
	for p, e := range before {
		if p != "r" && !strings.HasPrefix(p, "r/") {
			mine[p] = e
		}
	}
	if d := diffListings(s.model, mine); d != "" {
		s.fail("the mount does not show what was written:\n%s", d)
	}
	s.pause(1500 * time.Millisecond)

	// Stop the daemon: cleanly, or killed so the next mount cleans up,
	// or with a shell still in the repository so the unmount fails (art
	// mount gives up and exits, its mount and upper left as a killed
	// one's: everything was closed, so nothing may be missing).
	switch sig := syscall.SIGINT; s.rng.Intn(10) {
	case 0, 1:
		s.n["kill9"]++
		s.stop(d, syscall.SIGKILL, s.mnt)
		s.stale = append(s.stale, d.upper)
	case 2:
		s.n["busy"]++
		s.stopBusy(d, filepath.Join(wsm, "r"))
		s.stale = append(s.stale, d.upper)
	default:
		s.stop(d, sig, s.mnt)
	}
	s.pause(3 * time.Second)

	// Remount, with the capture or without, maybe while the neighbour
	// stops: a just-closed session next to a starting one.
	args := []string{"-d", s.db, s.mnt}
	if s.rng.Intn(2) == 0 {
		args = []string{"-d", s.db, "-m", s.ws, s.mnt}
		s.n["remount-m"]++
	}
	restart := s.rng.Intn(4) == 0
	if restart {
		s.nb.close(s)
		s.nb.d.cmd.Process.Signal(syscall.SIGINT)
		s.nb.d.sent = true
		s.n["neighbour-restart"]++
	}
	d = s.mount(args...)
	if restart {
		s.stopNeighbour(true)
		s.startNeighbour()
	}
	s.checkStaleGone()
	s.checkNeighbour(i)

	repo := filepath.Join(wsm, "r")
	if out, ok := s.sh(repo, "git fsck --full"); !ok {
		s.diagnose(repo)
		s.fail("git fsck --full after remount (%s) failed:\n%s", strings.Join(args, " "), out)
	}
	if out, ok := s.sh(repo, "git status --porcelain && git rev-list --count HEAD"); !ok || out != fmt.Sprintf("%d\n", commits) {
		s.diagnose(repo)
		s.fail("git after remount (%s): want a clean tree and %d commits, got:\n%s", strings.Join(args, " "), commits, out)
	}
	after := s.listing(wsm)
	if d := diffListings(before, after); d != "" {
		// What the store holds, to tell a write the journal lost from
		// one read back wrong.
		for p := range before {
			if strings.HasPrefix(before[p], "f ") && before[p] != after[p] {
				cmd := exec.Command("sh", "-c", `"$0" cat -d "$1" "main:ws/$2" | sha256sum`, s.bin, s.db, p)
				cmd.Env = s.env
				out, err := cmd.CombinedOutput()
				s.logf("$ art cat main:ws/%s | sha256sum\n%s[%v]", p, out, err)
			}
		}
		s.fail("after remount (%s) the workspace differs from what was written:\n%s", strings.Join(args, " "), d)
	}
	s.stop(d, syscall.SIGINT, s.mnt)
	s.n["cycles"]++
}

// diagnose logs what a failing repository looks like.
func (s *stress) diagnose(repo string) {
	s.sh(repo, "ls -laR .git | head -200; git count-objects -v; git log --oneline; cat .git/HEAD .git/refs/heads/* .git/packed-refs")
	cmd := exec.Command(s.bin, "log", "-d", s.db)
	cmd.Env = s.env
	out, _ := cmd.CombinedOutput()
	s.logf("$ art log\n%s", out)
}

// checkStaleGone asserts that the upper directories of killed daemons
// are gone once a new mount has started (it cleans them).
func (s *stress) checkStaleGone() {
	s.t.Helper()
	for _, u := range s.stale {
		if _, err := os.Stat(u); err == nil {
			s.fail("upper %s of a killed daemon still there after a new mount", u)
		}
	}
	s.stale = nil
}

// startNeighbour mounts a store of its own at base/mnt2, with held.txt
// (large enough to be served by passthrough) held open for writing by a
// shell that writes a line at each cycle's request.
func (s *stress) startNeighbour() {
	s.t.Helper()
	nb := s.nb
	if nb == nil {
		nb = &neighbour{ws: filepath.Join(s.base, "ws2"), db: filepath.Join(s.base, "ws2.db"), mnt: filepath.Join(s.base, "mnt2")}
		nb.want = bytes.Repeat([]byte{'x'}, 100<<10)
		if err := os.MkdirAll(nb.ws, 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(nb.ws, "held.txt"), nb.want, 0o644); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Mkdir(nb.mnt, 0o755); err != nil {
			s.t.Fatal(err)
		}
		s.art("push", "-q", "-m", nb.ws, "-d", nb.db)
		s.nb = nb
	}
	nb.d = s.mount("-d", nb.db, nb.mnt)
	nb.off = 0
	sh := exec.Command("sh", "-c", `exec 3<>held.txt; echo open; while read n; do printf 'cycle %06d\n' "$n" >&3; echo ok; done`)
	sh.Dir, sh.Env = filepath.Join(nb.mnt, "ws2"), s.env
	in, err := sh.StdinPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	outp, err := sh.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	sh.Stderr = os.Stderr
	if err := sh.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { sh.Process.Kill() })
	nb.sh, nb.in, nb.out = sh, in.(*os.File), bufio.NewReader(outp)
	if l, err := nb.out.ReadString('\n'); err != nil || l != "open\n" {
		s.fail("neighbour: holder did not open held.txt: %q %v", l, err)
	}
	nb.upper = nb.d.upper
	// A first write: where the kernel has no passthrough, the private
	// copy is made at the first read or write rather than at the open.
	nb.write(s, 0)
}

// checkNeighbour asserts the live neighbour's upper directory is intact
// and writes a line through its held file.
func (s *stress) checkNeighbour(i int) {
	s.t.Helper()
	nb := s.nb
	ents, err := os.ReadDir(nb.upper)
	if err != nil || len(ents) < 2 {
		s.fail("live neighbour's upper %s: %d entries, %v (its private copy must stay)", nb.upper, len(ents), err)
	}
	if u := upperOf(nb.d.cmd.Process.Pid, s.tmp); u != nb.upper {
		s.fail("live neighbour's upper lock: %q, want %q", u, nb.upper)
	}
	nb.write(s, i)
}

// write has the holder write a line through its open file.
func (nb *neighbour) write(s *stress, i int) {
	s.t.Helper()
	fmt.Fprintf(nb.in, "%d\n", i)
	if l, err := nb.out.ReadString('\n'); err != nil || l != "ok\n" {
		s.fail("neighbour write: %q %v", l, err)
	}
	line := fmt.Sprintf("cycle %06d\n", i)
	copy(nb.want[nb.off:], line)
	nb.off += len(line)
}

// close ends the neighbour's holder (its close journals held.txt).
func (nb *neighbour) close(s *stress) {
	nb.in.Close()
	if err := nb.sh.Wait(); err != nil {
		s.fail("neighbour holder: %v", err)
	}
}

// stopNeighbour unmounts the neighbour (its holder already closed and
// the daemon signalled when closed) and checks what its store holds.
func (s *stress) stopNeighbour(closed bool) {
	s.t.Helper()
	nb := s.nb
	if !closed {
		nb.close(s)
	}
	s.stop(nb.d, syscall.SIGINT, nb.mnt)
	cmd := exec.Command(s.bin, "cat", "-d", nb.db, "main:ws2/held.txt")
	cmd.Env = s.env
	got, err := cmd.Output()
	if err != nil || !bytes.Equal(got, nb.want) {
		s.fail("neighbour's held.txt after its unmount: %d bytes (%v), want %d; first 64: %q", len(got), err, len(nb.want), got[:min(64, len(got))])
	}
}

func (s *stress) counts() string {
	var k []string
	for n, v := range s.n {
		k = append(k, fmt.Sprintf("%s=%d", n, v))
	}
	sort.Strings(k)
	return strings.Join(k, " ")
}
