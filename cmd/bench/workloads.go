package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/internal/fuseuring"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/session"
	"golang.org/x/sys/unix"
)

// workloads: what an agent does between two model calls, on real data,
// in up to five places side by side in every repetition: natively in a
// plain directory on the disk that holds the stores (N), the same command
// under bare bwrap with that directory bound (B), under bare bwrap in a
// fresh mount of go-fuse's loopback node over a plain directory of its
// own, served by cmd/bench/loopfloor with art's mount options (L: the
// floor a FUSE filesystem reaches with the kernel's protocol and the same
// library, for the rows where art's overhead is in question),
// and `art run -m DIR -d STORE` on a fresh copy of a store that already
// holds DIR (A: the capture at the start finds nothing new, the workload
// runs in the FUSE overlay, the run ends with a snapshot). A fifth place,
// W, is A with --warm on its own store copy: only the workloads with a
// second session run there (git, npm's and gopls's next sessions,
// startup), as the first session of a fresh store is A's with a daemon's
// start added; the harness makes the daemon go after each repetition.
// The same bash script
// runs in all of them; it times its own steps with $EPOCHREALTIME (no
// fork) and prints them on stdout, so a step's time excludes the
// sandbox's start and end (and L's mount), which the "whole session" rows
// time from the outside.
//
// git runs twice: in the ordinary case, a repository owned by an
// unprivileged uid with N, B and L running as that uid and art picking it
// as the agent (the workspace's owner); and in the root case, a root-owned
// repository used by root in N, B and L and by art's agent as uid 65534
// (art never runs the agent as root), whose uid differs from every entry
// of git's index.
//
// The data is real and prepared once into a cache directory (-data,
// default ~/.cache/art-bench) that later runs reuse without the network:
// a Go module cache holding everything gopls@v0.23.0 needs, an npm
// project of 500+ packages with its lockfile and a filled npm cache, and
// a git repository of $GOROOT's files, committed. Everything a run makes
// lives in the run's temporary directory.

var workloadsMarkers = markers{"<!-- bench:workloads:begin -->", "<!-- bench:workloads:end -->",
	"## Workloads: real developer workloads natively, under bare bwrap and in art"}

// Where a workload runs.
type wlPlace int

const (
	wlNative wlPlace = iota // a plain directory
	wlBwrap                 // bare bwrap, the directory bound read-write
	wlLoop                  // bare bwrap in go-fuse's loopback over a plain directory
	wlArt                   // art run -m DIR -d STORE
	wlWarm                  // art run --warm 2m -m DIR -d STORE
)

func (p wlPlace) String() string { return [...]string{"N", "B", "L", "A", "W"}[p] }

// art says whether p runs in art (on a store copy; the script sees the
// workspace at /home/agent/NAME).
func (p wlPlace) art() bool { return p == wlArt || p == wlWarm }

// places are the places a workload runs in, in the order each repetition
// runs them: N, B, then L where it means something (a FUSE floor for a
// step inside the sandbox; not for start-up) and the machine can mount
// it, then A, and W for the workloads with a second session.
func (w *wlRun) places(loop, warm bool) []wlPlace {
	ps := []wlPlace{wlNative, wlBwrap}
	if loop && w.loopOK {
		ps = append(ps, wlLoop)
	}
	ps = append(ps, wlArt)
	if warm {
		ps = append(ps, wlWarm)
	}
	return ps
}

// wlWarmIdle is W's --warm: longer than any gap between two sessions of a
// repetition, so the daemon is still there for the second; the harness
// makes it go when the repetition is done.
const wlWarmIdle = "2m"

// The gopls build.
const (
	goplsPkg = "golang.org/x/tools/gopls"
	goplsVer = "v0.23.0"
)

// npmPackageJSON is the npm project: popular development tools whose
// dependency trees add up to 500+ packages. The lockfile is resolved once
// against the registry and kept in the data cache.
const npmPackageJSON = `{
  "name": "art-bench-npm",
  "version": "1.0.0",
  "private": true,
  "devDependencies": {
    "@babel/core": "7.28.3",
    "@babel/preset-env": "7.28.3",
    "eslint": "9.34.0",
    "jest": "30.1.1",
    "webpack": "5.101.3",
    "webpack-cli": "6.0.1"
  }
}
`

// wlRow is one line of the workloads table.
type wlRow struct{ bench, n, b, l, a, w, lratio, ratio, wratio, goal string }

// wlRun is one run of the workloads section.
type wlRun struct {
	b    *bench
	root string // b.tmp/workloads
	data string // the data cache
	ctl  string // files the harness creates to resume a waiting script; bound at /tmp/ctl
	in   string // inputs bound read-only at /tmp/in
	tmpN string // TMPDIR and HOME of the native runs (the sandboxes have their own /tmp)
	reps int
	drop bool // drop_caches is writable
	dd   int64

	// samples[metric][place] are the timings, one per repetition.
	samples      map[string]map[wlPlace][]time.Duration
	rows         []wlRow
	notes        []string
	facts        map[string]string // sizes and counts for the labels
	seq          int               // names the ctl files
	warm         map[string]bool   // stores whose warm daemon may be running
	loopOK       bool              // L runs: the harness is root (a direct mount with allow_other)
	loopfloor    string            // L's server, once built
	goplsNoFloor bool              // L's gopls no-ops rebuilt: no L for them
	uids         map[wlPlace][]int // the uid each place's scripts ran as, for the notes
}

// workloadsProbe says why the section cannot run here ("" if it can):
// art run with a store needs bwrap and FUSE, and the workloads need their
// tools.
func workloadsProbe() string {
	for _, tool := range []string{"bwrap", "bash", "git", "npm", "tar", "dd", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found"
		}
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return "cannot open /dev/fuse: " + err.Error()
	}
	f.Close()
	return ""
}

func (b *bench) workloads() (err error) {
	w := &wlRun{b: b, root: filepath.Join(b.tmp, "workloads"), reps: b.cfg.reps,
		samples: map[string]map[wlPlace][]time.Duration{}, facts: map[string]string{}, dd: 2 << 30,
		warm: map[string]bool{}, loopOK: os.Geteuid() == 0, uids: map[wlPlace][]int{}}
	// A workload that failed or was interrupted between W's sessions
	// leaves its daemon: none may outlive the run.
	defer func() {
		for store := range w.warm {
			if serr := w.stopWarm(store); serr != nil {
				err = errors.Join(err, serr)
			}
			removeStore(store)
		}
	}()
	if b.cfg.quick {
		w.reps = 1
		w.dd = 256 << 20
	}
	w.data = b.cfg.data
	if w.data == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("data cache: %w (give -data DIR)", err)
		}
		w.data = filepath.Join(c, "art-bench")
	}
	w.drop = unix.Access("/proc/sys/vm/drop_caches", unix.W_OK) == nil
	if !w.drop {
		w.notes = append(w.notes, "**Caches were not dropped** (/proc/sys/vm/drop_caches is not writable: not root): the npm rows ran with warm caches and the cold read is not cold.")
	}
	if !w.loopOK {
		w.notes = append(w.notes, "**L did not run**: go-fuse's loopback mounts directly and with allow_other (as art does) only as root.")
	}
	w.ctl = filepath.Join(w.root, "ctl")
	w.in = filepath.Join(w.root, "in")
	w.tmpN = filepath.Join(w.root, "tmp-native")
	for _, d := range []string{w.root, w.ctl, w.in, w.tmpN, w.data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The sandbox runs as an unprivileged uid: every directory above the
	// workspaces and the bound inputs must let it through.
	for _, d := range []string{b.tmp, w.root, w.ctl, w.in} {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	steps := []struct {
		name string
		f    func() error
	}{
		{"startup", w.startup},
		{"git-user", w.gitUser},
		{"git-root", w.gitRoot},
		{"untar", w.untar},
		{"dd", w.ddRows},
		{"npm", w.npm},
		{"gopls", w.gopls},
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.name)
	}
	pick := map[string]bool{}
	if b.cfg.workloads != "" {
		for _, n := range strings.Split(b.cfg.workloads, ",") {
			n = strings.TrimSpace(n)
			if n == "git" { // both cases
				pick["git-user"], pick["git-root"] = true, true
				continue
			}
			if !slices.Contains(names, n) {
				return fmt.Errorf("-workloads: unknown workload %q (have %s; git is both git-user and git-root)", n, strings.Join(names, ", "))
			}
			pick[n] = true
		}
	}
	for _, s := range steps {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if len(pick) > 0 && !pick[s.name] {
			continue
		}
		b.progress("workloads: %s", s.name)
		// A workload that fails leaves its rows out and says why under
		// the table; the others still run.
		if err := s.f(); err != nil {
			if b.ctx.Err() != nil {
				return err
			}
			b.progress("workloads: %s FAILED: %v", s.name, err)
			w.notes = append(w.notes, fmt.Sprintf("**The %s workload failed**, its rows are missing: %s", s.name, termtext.Text(firstLine(err.Error()))))
		}
	}
	w.table()
	if len(w.uids) > 0 {
		var ran []string
		for p := range wlWarm + 1 {
			if u := w.uids[p]; len(u) > 0 {
				slices.Sort(u)
				ran = append(ran, fmt.Sprintf("%s %s", p, strings.Trim(fmt.Sprint(u), "[]")))
			}
		}
		w.notes = append(w.notes, "The scripts ran as (`$EUID`, checked by the harness): "+strings.Join(ran, "; ")+".")
	}
	b.rep.wl, b.rep.wlNotes = w.rows, w.notes
	return nil
}

// ---- running a script in the places

// wlSession is one process running a script in one place.
type wlSession struct {
	place wlPlace
	ws    string // the host workspace (for L, the directory under its mount)
	store string // the store, for wlArt
	body  string // bash; t NAME 'CMD' times CMD, w NAME waits for the harness
	// hooks run when the script calls w NAME; the script resumes after.
	hooks map[string]func() error
	// uid and gid, when above 0, are the host user N, B and L run as (the
	// workspace's owner; art picks it itself); 0 runs them as the harness.
	uid, gid int
	// anyDir sets git's safe.directory to *, for a repository its user
	// does not own (the root case: art's agent is never root).
	anyDir bool
	// at is where L's sandbox sees its mount ("": at the mount point). The
	// gopls rows' L runs in a copy of N's workspace, which it must see at
	// N's path: a build cache's keys hold the packages' directories, so
	// anywhere else every package would compile again.
	at string
}

// wlPrelude starts every script: where it runs, a fixed environment (art
// clears the environment; the harness passes the same one to the native
// and bwrap runs), and the two helpers. t prints "@@t NAME START END" with
// $EPOCHREALTIME, which bash reads without a fork; "@@u" is the uid the
// script runs as, which the harness checks.
const wlPrelude = `set -e
echo "@@u $EUID"
cd %s
export LC_ALL=C PATH=%s HOME=%s TMPDIR=%s CTL=%s IN=%s
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
export GIT_CONFIG_KEY_0=gc.auto GIT_CONFIG_VALUE_0=0 %s
t() { local n=$1; shift; local s=$EPOCHREALTIME; eval "$@" >/dev/null; local e=$EPOCHREALTIME; echo "@@t $n $s $e"; }
w() { echo "@@w $1"; while [ ! -e "$CTL/$1" ]; do sleep 0.01; done; }
`

// script is s's body behind the prelude for its place, which runs it in
// dir.
func (w *wlRun) script(s wlSession, dir string) (string, error) {
	tmp, ctl, in := "/tmp", "/tmp/ctl", "/tmp/in"
	if s.place == wlNative {
		var err error
		if tmp, err = w.nativeTmp(s.uid, s.gid); err != nil {
			return "", err
		}
		ctl, in = w.ctl, w.in
	}
	git := "GIT_CONFIG_COUNT=1"
	if s.anyDir {
		git = "GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_1=safe.directory GIT_CONFIG_VALUE_1='*'"
	}
	path := filepath.Join(w.b.goroot, "bin") + ":/usr/local/bin:/usr/bin:/bin"
	return fmt.Sprintf(wlPrelude, shq(dir), shq(path), shq(tmp), shq(tmp), shq(ctl), shq(in), git) + s.body, nil
}

// nativeTmp is TMPDIR and HOME of the native runs as uid (the sandboxes
// have their own /tmp): one each user, owned by it.
func (w *wlRun) nativeTmp(uid, gid int) (string, error) {
	if uid <= 0 {
		return w.tmpN, nil
	}
	dir := fmt.Sprintf("%s-%d", w.tmpN, uid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, os.Chown(dir, uid, gid)
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// wlEnv is the environment of the native and bwrap runs (the script sets
// the rest), like art's cleared one.
var wlEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}

// artEnv is the environment of art run: the harness's, without sudo's
// variables, so that art picks the agent's uid by the workspace's owner
// (art's default after $SUDO_UID), whoever started the harness.
func artEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUDO_") {
			env = append(env, kv)
		}
	}
	return env
}

// asUser makes cmd run as uid:gid with no supplementary groups (what
// setpriv --reuid --regid --clear-groups does), when uid is above 0.
func asUser(cmd *exec.Cmd, uid, gid int) {
	if uid > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
}

// wantUID is the uid s's script must report: the harness's own uid when
// it is not root (no one else to be); as root, art's agent is the
// workspace's owner, or nobody (65534) for a root-owned workspace, and
// N, B and L run as s.uid or root.
func wantUID(s wlSession) int {
	if os.Geteuid() != 0 {
		return os.Geteuid()
	}
	if s.place.art() {
		var st unix.Stat_t
		if unix.Stat(s.ws, &st) == nil && st.Uid > 0 && st.Gid > 0 {
			return int(st.Uid)
		}
		return 65534
	}
	return max(s.uid, 0)
}

// bwrapArgs is bare bwrap running script in dir, the host directory src
// bound read-write there (B: at its own path), as uid inside when above 0
// (the process itself must run as that uid: bwrap then maps it to itself
// in its user namespace, as art's sandbox does).
func (w *wlRun) bwrapArgs(src, dir string, uid, gid int, script string) []string {
	a := []string{"--unshare-all", "--die-with-parent",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--bind", src, dir, "--ro-bind", w.ctl, "/tmp/ctl", "--ro-bind", w.in, "/tmp/in"}
	if uid > 0 {
		a = append(a, "--unshare-user", "--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(gid))
	}
	return append(a, "--chdir", dir, "--", "bash", "-c", script)
}

// loopMount is where L mounts the loopback over the plain directory dir.
func (w *wlRun) loopMount(dir string) string {
	return filepath.Join(w.root, "loop-mnt", filepath.Base(dir))
}

// loopBin builds cmd/bench/loopfloor, L's server, once per run.
func (w *wlRun) loopBin() (string, error) {
	if w.loopfloor != "" {
		return w.loopfloor, nil
	}
	bin := filepath.Join(w.root, "loopfloor")
	w.b.progress("workloads: building cmd/bench/loopfloor (go-fuse's loopback node with art's mount options)")
	cmd := exec.CommandContext(w.b.ctx, "go", "build", "-o", bin, "./cmd/bench/loopfloor")
	cmd.Dir = w.b.module
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/bench/loopfloor: %w\n%s", err, out)
	}
	version, _, err := w.b.command(w.b.module, nil, "go", "list", "-m", "-f", "{{.Version}}", "github.com/hanwen/go-fuse/v2")
	if err != nil {
		return "", err
	}
	w.loopfloor, w.b.rep.wlGoFuse = bin, strings.TrimSpace(string(version))
	return bin, nil
}

// loopURing reports whether L serves over io_uring: where art's mount
// does (as root, on a kernel with FUSE over io_uring; overlay/uring.go),
// with the same threads a CPU, so that L stays the floor under A's
// transport.
func loopURing() bool {
	if os.Geteuid() != 0 || os.Getenv("ART_FUSE_URING") == "0" {
		return false
	}
	_, err := os.Stat(fuseuring.EnabledPath)
	return err == nil
}

// mountLoop mounts go-fuse's loopback node over dir, fresh for one
// session (the kernel knows nothing of the tree yet, as at A's new
// mount). The caller stops the daemon, which unmounts.
func (w *wlRun) mountLoop(dir string) (*daemon, string, error) {
	bin, err := w.loopBin()
	if err != nil {
		return nil, "", err
	}
	mnt := w.loopMount(dir)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, "", err
	}
	for _, d := range []string{filepath.Dir(mnt), mnt} {
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, "", err
		}
	}
	argv := []string{bin, mnt, dir}
	if loopURing() {
		argv = []string{bin, "-uring", strconv.Itoa(fuseuring.DefaultThreads), mnt, dir}
	}
	d, err := w.b.startDaemon("loopfloor", mnt, "", time.Minute, argv...)
	if err != nil {
		return nil, "", err
	}
	return d, mnt, nil
}

// run runs s and returns the step times the script printed and the whole
// process's wall time (for L without the mount before and the unmount
// after).
func (w *wlRun) run(s wlSession) (_ map[string]time.Duration, _ time.Duration, err error) {
	dir := s.ws
	src := s.ws // what bwrap binds at dir
	switch s.place {
	case wlArt, wlWarm:
		dir = "/home/agent/" + filepath.Base(s.ws)
	case wlLoop:
		d, mnt, err := w.mountLoop(s.ws)
		if err != nil {
			return nil, 0, err
		}
		// Unmounted whatever happens to the script (a failure, ctrl-c:
		// the context kills bwrap, whose sandbox dies with it).
		defer func() {
			if serr := d.stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}()
		src, dir = mnt, mnt
		if s.at != "" {
			dir = s.at
		}
	}
	script, err := w.script(s, dir)
	if err != nil {
		return nil, 0, err
	}
	var cmd *exec.Cmd
	switch s.place {
	case wlNative:
		cmd = exec.CommandContext(w.b.ctx, "bash", "-c", script)
		cmd.Dir = s.ws
		cmd.Env = wlEnv
		asUser(cmd, s.uid, s.gid)
	case wlBwrap, wlLoop:
		cmd = exec.CommandContext(w.b.ctx, "bwrap", w.bwrapArgs(src, dir, s.uid, s.gid, script)...)
		cmd.Dir = "/" // never inside the loopback mount
		cmd.Env = wlEnv
		asUser(cmd, s.uid, s.gid)
	case wlArt, wlWarm:
		args := []string{"run", "-m", s.ws, "-d", s.store, "-i=false", "-q",
			"--bind", w.ctl + ":/tmp/ctl:ro", "--bind", w.in + ":/tmp/in:ro", "--", "bash", "-c", script}
		if s.place == wlWarm {
			args = append([]string{"run", "--warm", wlWarmIdle}, args[1:]...)
			w.warm[s.store] = true
		}
		cmd = exec.CommandContext(w.b.ctx, w.b.art, args...)
		cmd.Dir = filepath.Dir(s.ws)
		cmd.Env = artEnv()
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	times := map[string]time.Duration{}
	var hookErr error
	var created []string
	uid := -1
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "@@t":
			d, err := epochDiff(f[2], f[3])
			if err != nil {
				hookErr = errors.Join(hookErr, err)
			}
			times[f[1]] = d
		case len(f) == 2 && f[0] == "@@u":
			uid, _ = strconv.Atoi(f[1])
		case len(f) == 2 && f[0] == "@@w":
			if h := s.hooks[f[1]]; h != nil && hookErr == nil {
				hookErr = h()
			}
			// Resume the script even after a failed hook, so it ends.
			p := filepath.Join(w.ctl, f[1])
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				hookErr = errors.Join(hookErr, err)
			}
			created = append(created, p)
		}
	}
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	whole := time.Since(start)
	for _, p := range created {
		os.Remove(p)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s run in %s: %w\n%s", s.place, s.ws, err, tail(stderr.Bytes()))
	}
	if hookErr != nil {
		return nil, 0, hookErr
	}
	if want := wantUID(s); uid != want {
		return nil, 0, fmt.Errorf("%s run in %s: the script ran as uid %d, want %d", s.place, s.ws, uid, want)
	}
	if !slices.Contains(w.uids[s.place], uid) {
		w.uids[s.place] = append(w.uids[s.place], uid)
	}
	return times, whole, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// medianOf is the median of the named step times, which must all be there.
func medianOf(times map[string]time.Duration, names ...string) (time.Duration, error) {
	var ds []time.Duration
	for _, n := range names {
		d, ok := times[n]
		if !ok {
			return 0, fmt.Errorf("the script did not time %s", n)
		}
		ds = append(ds, d)
	}
	return median(ds), nil
}

// epochDiff is e - s for two $EPOCHREALTIME values (seconds.micros).
func epochDiff(s, e string) (time.Duration, error) {
	parse := func(v string) (int64, error) {
		sec, frac, ok := strings.Cut(v, ".")
		if !ok || len(frac) != 6 {
			return 0, fmt.Errorf("bad $EPOCHREALTIME %q", v)
		}
		a, err := strconv.ParseInt(sec, 10, 64)
		if err != nil {
			return 0, err
		}
		b, err := strconv.ParseInt(frac, 10, 64)
		if err != nil {
			return 0, err
		}
		return a*1e6 + b, nil
	}
	a, err := parse(s)
	if err != nil {
		return 0, err
	}
	b, err := parse(e)
	if err != nil {
		return 0, err
	}
	return time.Duration(b-a) * time.Microsecond, nil
}

// add records one sample.
func (w *wlRun) add(metric string, p wlPlace, d time.Duration) {
	m := w.samples[metric]
	if m == nil {
		m = map[wlPlace][]time.Duration{}
		w.samples[metric] = m
	}
	m[p] = append(m[p], d)
}

// addSteps records the step times of one session, which must include
// every name in want, as the metrics prefix+name.
func (w *wlRun) addSteps(prefix string, p wlPlace, times map[string]time.Duration, want ...string) error {
	for _, n := range want {
		d, ok := times[n]
		if !ok {
			return fmt.Errorf("the %s script did not time %s", p, n)
		}
		w.add(prefix+n, p, d)
	}
	return nil
}

// ---- workspaces and stores

// workspaces makes the host workspaces for a workload: dirs[p] for the
// native and bwrap runs (one directory, used in turn), with loop for L
// (its own plain directory, under its mount) and for art (its own, never
// written after the capture). fill makes the contents of one.
func (w *wlRun) workspaces(name string, loop bool, fill func(dir string) error) (map[wlPlace]string, error) {
	dirs := map[wlPlace]string{}
	sides := []string{"host", "art"}
	if loop && w.loopOK {
		sides = append(sides, "loop")
	}
	for _, side := range sides {
		parent := filepath.Join(w.root, side)
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		for _, d := range []string{parent, dir} {
			if err := os.Chmod(d, 0o755); err != nil {
				return nil, err
			}
		}
		if err := fill(dir); err != nil {
			return nil, err
		}
		switch side {
		case "host":
			dirs[wlNative], dirs[wlBwrap] = dir, dir
		case "loop":
			dirs[wlLoop] = dir
		default:
			dirs[wlArt] = dir
		}
	}
	return dirs, nil
}

// baseStore captures dir into a new store, which each repetition copies.
func (w *wlRun) baseStore(dir string) (string, error) {
	db := filepath.Join(w.root, "stores", filepath.Base(dir)+".db")
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		return "", err
	}
	os.Chmod(filepath.Dir(db), 0o755)
	_, d, err := w.b.command(w.root, nil, w.b.art, "push", "-m", dir, "-d", db, "-q")
	if err != nil {
		return "", err
	}
	w.b.progress("workloads: captured %s in %s, store %s", dir, fmtDur(d), fmtBytes(storeBytes(db)))
	return db, nil
}

// storeCopy copies the store base (file, WAL, packs) for one repetition
// in place p (A and W each their own: W's daemon is named for its store).
func (w *wlRun) storeCopy(base string, rep int, p wlPlace) (string, error) {
	dst := strings.TrimSuffix(base, ".db") + fmt.Sprintf("-%s-rep%d.db", p, rep)
	return dst, w.copyStore(base, dst)
}

// copyStore copies the closed store src (file, WAL, packs) to dst,
// replacing what was there.
func (w *wlRun) copyStore(src, dst string) error {
	removeStore(dst)
	for _, suffix := range []string{"", "-wal", ".packs"} {
		if _, err := os.Lstat(src + suffix); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if _, _, err := w.b.command(w.root, nil, "cp", "-a", src+suffix, dst+suffix); err != nil {
			return err
		}
	}
	return nil
}

// stopWarm makes the warm daemon of store's branch go, if one is running,
// and waits until its process has exited; its log in the state directory
// goes too (one per store copy would pile up). A daemon that does not
// yield (it thinks a run is in progress) gets SIGTERM, which it obeys once
// idle.
func (w *wlRun) stopWarm(store string) error {
	delete(w.warm, store)
	pids, err := warmDaemonPIDs(store)
	if err != nil {
		return err
	}
	_, yerr := session.YieldWarm(store, journal.DefaultBranch, 0)
	if yerr != nil {
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGTERM)
		}
	}
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var alive []int
		for _, pid := range pids {
			if processAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(end) {
			return errors.Join(yerr, fmt.Errorf("warm daemon of %s (pid %v) still running", store, alive))
		}
	}
	if err := os.Remove(session.WarmLog(store, journal.DefaultBranch)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Join(yerr, err)
	}
	if _, err := os.Lstat(session.WarmSocket(store, journal.DefaultBranch)); err == nil {
		return errors.Join(yerr, fmt.Errorf("warm daemon of %s exited and left its socket", store))
	}
	if yerr != nil {
		return fmt.Errorf("warm daemon of %s did not yield (it got SIGTERM and is gone): %w", store, yerr)
	}
	if len(pids) > 0 {
		w.b.progress("workloads: warm daemon %v of %s yielded and exited", pids, filepath.Base(store))
	}
	return nil
}

// warmDaemonPIDs are the processes running art's warm daemon for store
// (its argv names the store's absolute path after --db).
func warmDaemonPIDs(store string) ([]int, error) {
	abs, err := filepath.Abs(store)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if len(argv) < 2 || argv[1] != session.WarmDaemonCommand {
			continue
		}
		if i := slices.Index(argv, "--db"); i > 0 && i+1 < len(argv) && argv[i+1] == abs {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// processAlive says whether pid is a process that has not exited (a
// zombie has: the daemon's parent was the art run that started it, long
// gone, so init reaps it).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's name in parentheses, which may
	// itself hold ") ".
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// cp copies src into the new path dst with cp -a.
func (w *wlRun) cp(src, dst string) error {
	_, _, err := w.b.command(w.root, nil, "cp", "-a", src, dst)
	return err
}

// dropCaches empties the page cache, if it can.
func (w *wlRun) dropCaches() error {
	if !w.drop {
		return nil
	}
	return dropCaches()
}

// readAll reads every regular file below the paths, to bring them into
// the page cache after a drop.
func readAll(paths ...string) error {
	buf := make([]byte, 1<<20)
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == root {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.CopyBuffer(io.Discard, f, buf)
			f.Close()
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- data cache

// cached returns the directory name in the data cache, making it with
// make (into a temporary sibling, renamed when complete) if missing.
func (w *wlRun) cached(name string, make func(dir string) error) (string, error) {
	dir := filepath.Join(w.data, name)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	w.b.progress("workloads: preparing %s (once; kept for later runs)", dir)
	tmp := dir + ".partial"
	os.RemoveAll(tmp)
	os.RemoveAll(dir)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if err := make(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("prepare %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}

// goModCache is a module cache holding everything go install gopls needs,
// filled from the module proxy.
func (w *wlRun) goModCache() (string, error) {
	return w.cached("gomod-gopls-"+goplsVer, func(dir string) error {
		mod := filepath.Join(dir, "mod")
		env := []string{"GOMODCACHE=" + mod, "GOFLAGS=-modcacherw", "GOTOOLCHAIN=local", "GOTELEMETRY=off"}
		if _, _, err := w.b.command(w.root, env, "go", "mod", "download", goplsPkg+"@"+goplsVer); err != nil {
			return err
		}
		// Its dependencies: go mod download in a scratch module with
		// gopls's go.mod and go.sum (not in the module cache itself).
		scratch := filepath.Join(w.root, "gopls-scratch")
		if err := os.MkdirAll(scratch, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		for _, f := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(mod, goplsPkg+"@"+goplsVer, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(scratch, f), data, 0o644); err != nil {
				return err
			}
		}
		_, _, err := w.b.command(scratch, env, "go", "mod", "download")
		return err
	})
}

// npmProject is the npm project with its lockfile and a filled cache.
func (w *wlRun) npmProject() (string, error) {
	sum := sha256.Sum256([]byte(npmPackageJSON))
	return w.cached("npm-"+hex.EncodeToString(sum[:6]), func(dir string) error {
		proj := filepath.Join(dir, "project")
		if err := os.MkdirAll(proj, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(npmPackageJSON), 0o644); err != nil {
			return err
		}
		cache := filepath.Join(dir, "cache")
		env := []string{"npm_config_update_notifier=false", "npm_config_cache=" + cache}
		if _, _, err := w.b.command(proj, env, "npm", "install", "--package-lock-only", "--no-audit", "--no-fund"); err != nil {
			return err
		}
		if _, _, err := w.b.command(proj, env, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"); err != nil {
			return err
		}
		os.RemoveAll(filepath.Join(cache, "_logs"))
		return os.RemoveAll(filepath.Join(proj, "node_modules"))
	})
}

// gitRepo is a repository of $GOROOT's files, committed.
func (w *wlRun) gitRepo() (string, error) {
	v, err := os.ReadFile(filepath.Join(w.b.goroot, "VERSION"))
	if err != nil {
		return "", err
	}
	ver := strings.Fields(string(v))[0]
	return w.cached("git-goroot-"+ver, func(dir string) error {
		repo := filepath.Join(dir, "repo")
		if _, err := copyTree(w.b.goroot, repo, 0); err != nil {
			return err
		}
		if _, _, err := w.b.command(repo, gitEnv, "git", "init", "-q", "-b", "main"); err != nil {
			return err
		}
		if _, _, err := w.b.command(repo, gitEnv, "git", "add", "-A"); err != nil {
			return err
		}
		_, _, err := w.b.command(repo, gitEnv, "git", "commit", "-q", "-m", "goroot")
		return err
	})
}

// ---- the workloads

// startup: art run -d -m TINY -- true against bwrap true, whole process,
// and the same with --warm on a store copy of its own, whose daemon the
// untimed first run starts.
// startupGap is the pause before each timed start-up command.
const startupGap = 300 * time.Millisecond

func (w *wlRun) startup() error {
	dirs, err := w.workspaces("tiny", false, func(dir string) error {
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte("x\n"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	db, err := w.baseStore(dirs[wlArt])
	if err != nil {
		return err
	}
	reps := max(w.reps, 15)
	if w.b.cfg.quick {
		reps = 5
	}
	bw := []string{"bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"}
	ar := []string{w.b.art, "run", "-d", db, "-m", dirs[wlArt], "-i=false", "-q", "--", "true"}
	wdb, err := w.storeCopy(db, 0, wlWarm)
	if err != nil {
		return err
	}
	w.warm[wdb] = true
	wa := []string{w.b.art, "run", "--warm", wlWarmIdle, "-d", wdb, "-m", dirs[wlArt], "-i=false", "-q", "--", "true"}
	// One untimed run each warms the page cache (and starts W's daemon).
	// Each timed command starts startupGap after the last one ended: a
	// warm daemon starts its next run's sandbox ahead once a run ends
	// (docs/architecture.md, "Warm mounts"), and that work must not land
	// inside the next place's timing (back to back it made bare bwrap's
	// runs 1.6-2x slower). An agent's runs are that far apart or more:
	// the model's turn comes between them.
	gap := func() { time.Sleep(startupGap) }
	for i := range reps + 1 {
		gap()
		_, d, err := w.b.command(w.root, nil, bw[0], bw[1:]...)
		if err != nil {
			return err
		}
		gap()
		_, a, err := w.b.command(w.root, nil, ar[0], ar[1:]...)
		if err != nil {
			return err
		}
		gap()
		_, wt, err := w.b.command(w.root, nil, wa[0], wa[1:]...)
		if err != nil {
			return err
		}
		if i > 0 {
			w.add("startup", wlBwrap, d)
			w.add("startup", wlArt, a)
			w.add("startup", wlWarm, wt)
		}
	}
	err = w.stopWarm(wdb)
	removeStore(wdb)
	return err
}

// gitUser: the git rows in the ordinary case, a user's own repository.
// As root, the repository belongs to nobody (65534): N, B and L run as
// that uid, and art picks the workspace's owner as the agent; no place
// sets git's safe.directory, so a place that saw the repository as
// someone else's would fail. Not as root, everything runs as the harness.
func (w *wlRun) gitUser() error {
	c := gitCase{name: "gitrepo-user", metric: "u-"}
	if os.Geteuid() == 0 {
		c.uid, c.gid = 65534, 65534
	}
	return w.gitRows(c)
}

// gitRoot: the git rows in the root case, a root-owned repository used by
// root in N, B and L, and by art's agent as uid 65534 (art never runs it
// as root): every entry's uid differs from the index, so git re-reads
// every file once. safe.directory is * in every place, or the agent's
// git would refuse the repository as someone else's.
func (w *wlRun) gitRoot() error {
	if os.Geteuid() != 0 {
		w.notes = append(w.notes, "The root case of git did not run: the harness is not root.")
		return nil
	}
	return w.gitRows(gitCase{name: "gitrepo", anyDir: true})
}

// gitCase is one set of git rows.
type gitCase struct {
	name     string // the workspaces' name
	metric   string // prefix of the rows' metrics
	uid, gid int    // the repository's owner, who N, B and L run as; 0: the harness
	anyDir   bool   // safe.directory=*
}

// gitCmd runs git in dir as uid:gid (the harness when uid is 0) and
// returns its stdout.
func (w *wlRun) gitCmd(dir string, uid, gid int, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(w.b.ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	if uid > 0 {
		home, err := w.nativeTmp(uid, gid)
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+home)
		asUser(cmd, uid, gid)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git %s in %s: %w\n%s", strings.Join(args, " "), dir, err, tail(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// chownTree gives every file below dir (and dir) to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// gitRows: a repository of $GOROOT's files committed on the host (its
// index written there by its owner), status first in a session and
// again, grep, commit.
func (w *wlRun) gitRows(c gitCase) error {
	src, err := w.gitRepo()
	if err != nil {
		return err
	}
	dirs, err := w.workspaces(c.name, true, func(dir string) error {
		os.Remove(dir)
		if err := w.cp(filepath.Join(src, "repo"), dir); err != nil {
			return err
		}
		if c.uid > 0 {
			if err := chownTree(dir, c.uid, c.gid); err != nil {
				return err
			}
		}
		// The copy has new inodes and ctimes: refresh the index on the
		// host, as after a checkout there.
		if _, err := w.gitCmd(dir, c.uid, c.gid, "update-index", "-q", "--refresh"); err != nil {
			return err
		}
		_, err := w.gitCmd(dir, c.uid, c.gid, "status", "--porcelain")
		return err
	})
	if err != nil {
		return err
	}
	host := dirs[wlNative]
	out, err := w.gitCmd(host, c.uid, c.gid, "ls-files")
	if err != nil {
		return err
	}
	files := bytes.Count(out, []byte("\n"))
	out, err = w.gitCmd(host, c.uid, c.gid, "grep", "foo")
	if err != nil {
		return err
	}
	hits := bytes.Count(out, []byte("\n"))
	size, err := duBytes(host)
	if err != nil {
		return err
	}
	w.facts["git"] = fmt.Sprintf("%s-file repository ($GOROOT, %s with .git)", fmtInt(files), fmtBytes(size))
	w.facts["grep"] = fmt.Sprintf("%s hits", fmtInt(hits))
	base, err := w.baseStore(dirs[wlArt])
	if err != nil {
		return err
	}
	const first = "t status1 git status\n"
	const second = "t status2 git status\nt status3 git status\nt grep git grep foo\n" +
		"t commit 'git checkout -q -b bench && echo x >> README.md && git commit -q -a -m bench'\n"
	// The plain repositories go back to main for the next repetition.
	const reset = "git checkout -q main && git branch -q -D bench\n"
	dirs[wlWarm] = dirs[wlArt]
	for rep := range w.reps {
		for _, p := range w.places(true, true) {
			s := wlSession{place: p, ws: dirs[p], uid: c.uid, gid: c.gid, anyDir: c.anyDir}
			if p.art() {
				if s.store, err = w.storeCopy(base, rep, p); err != nil {
					return err
				}
			}
			// Two sessions; for L each on a fresh mount, the second over
			// the directory the first left.
			s.body = first
			t1, _, err := w.run(s)
			if err != nil {
				return err
			}
			s.body = second
			if !p.art() {
				s.body += reset
			}
			t2, _, err := w.run(s)
			if err != nil {
				return err
			}
			// W's first session is A's with the daemon's start added.
			if p != wlWarm {
				if err := w.addSteps(c.metric, p, t1, "status1"); err != nil {
					return err
				}
			}
			if err := w.addSteps(c.metric, p, t2, "status2", "status3", "grep", "commit"); err != nil {
				return err
			}
			if p == wlWarm {
				if err := w.stopWarm(s.store); err != nil {
					return err
				}
			}
			if p.art() {
				removeStore(s.store)
			}
			if c.metric == "u-" && p != wlWarm {
				if err := w.lateStatus(s, c.metric, base, rep); err != nil {
					return err
				}
			}
		}
		w.b.progress("workloads: %s rep %d/%d", c.name, rep+1, w.reps)
	}
	return nil
}

// lateStatus times the first `git status` of one more session, 1.5 s
// after its start: an agent's first command follows a model's turn, and
// art primes the kernel's caches meanwhile (overlay/prime.go). Then, after
// an untimed `git grep` (its reads drop the files' attributes from the
// kernel's cache; art stats them again once the mount is quiet) and
// another 1.5 s turn, it times `git status` again. A runs on a fresh
// store copy (the host's index, as in the first session), L on a fresh
// mount.
func (w *wlRun) lateStatus(s wlSession, metric, base string, rep int) error {
	s.body = "sleep 1.5\nt status1late git status\ngit grep -q foo\nsleep 1.5\nt statusturn git status\n"
	if s.place.art() {
		var err error
		if s.store, err = w.storeCopy(base, rep, s.place); err != nil {
			return err
		}
		defer removeStore(s.store)
	}
	t, _, err := w.run(s)
	if err != nil {
		return err
	}
	return w.addSteps(metric, s.place, t, "status1late", "statusturn")
}

// untar: tar x of Go's src and rm -rf src/cmd, a whole session each.
func (w *wlRun) untar() error {
	var entries int
	dirs, err := w.workspaces("untar", true, func(dir string) error {
		out, _, err := w.b.command(dir, nil, "tar", "-cvf", "src.tar", "-C", w.b.goroot, "src")
		entries = bytes.Count(out, []byte("\n"))
		return err
	})
	if err != nil {
		return err
	}
	st, err := os.Stat(filepath.Join(dirs[wlNative], "src.tar"))
	if err != nil {
		return err
	}
	w.facts["tar"] = fmt.Sprintf("%s entries, %s", fmtInt(entries), fmtBytes(st.Size()))
	base, err := w.baseStore(dirs[wlArt])
	if err != nil {
		return err
	}
	const body = "t untar 'tar --no-same-owner -xf src.tar && rm -rf src/cmd'\n"
	for rep := range w.reps {
		for _, p := range w.places(true, false) {
			s := wlSession{place: p, ws: dirs[p], body: body}
			if p == wlArt {
				if s.store, err = w.storeCopy(base, rep, p); err != nil {
					return err
				}
			} else if err := os.RemoveAll(filepath.Join(s.ws, "src")); err != nil {
				return err
			}
			t, whole, err := w.run(s)
			if err != nil {
				return err
			}
			if err := w.addSteps("", p, t, "untar"); err != nil {
				return err
			}
			w.add("untar-session", p, whole)
			if p == wlArt {
				removeStore(s.store)
			}
		}
		w.b.progress("workloads: untar rep %d/%d", rep+1, w.reps)
	}
	return nil
}

// ddRows: a big file of random bytes written with dd bs=1M into the
// workspace, then, after the harness dropped the caches, read back in the
// same session.
func (w *wlRun) ddRows() error {
	src := filepath.Join(w.in, "big.src")
	if err := writeRandom(src, w.dd); err != nil {
		return err
	}
	defer os.Remove(src)
	dirs, err := w.workspaces("dd", true, func(string) error { return nil })
	if err != nil {
		return err
	}
	base, err := w.baseStore(dirs[wlArt])
	if err != nil {
		return err
	}
	body := "t write dd if=\"$IN/big.src\" of=big bs=1M 2>/dev/null\nw drop\nt read dd if=big of=/dev/null bs=1M 2>/dev/null\nrm -f big\n"
	for rep := range w.reps {
		for _, p := range w.places(true, false) {
			s := wlSession{place: p, ws: dirs[p], body: body, hooks: map[string]func() error{"drop": w.dropCaches}}
			if p == wlArt {
				if s.store, err = w.storeCopy(base, rep, p); err != nil {
					return err
				}
			}
			// No dirty pages of the last run, and the source in the
			// page cache.
			if err := w.dropCaches(); err != nil {
				return err
			}
			if err := readAll(src); err != nil {
				return err
			}
			t, _, err := w.run(s)
			if err != nil {
				return err
			}
			if err := w.addSteps("", p, t, "write", "read"); err != nil {
				return err
			}
			if p == wlArt {
				removeStore(s.store)
			}
		}
		w.b.progress("workloads: dd rep %d/%d", rep+1, w.reps)
	}
	return nil
}

// writeRandom writes n incompressible bytes to path.
func writeRandom(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewChaCha8([32]byte{'d', 'd'}))
	buf := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), n-off)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// npm: npm ci --offline with the cache in the workspace (caches dropped
// and the inputs read back before each run), then in the next session
// find + du over node_modules and rm -rf of it.
func (w *wlRun) npm() error {
	src, err := w.npmProject()
	if err != nil {
		return err
	}
	dirs, err := w.workspaces("npmproj", true, func(dir string) error {
		for _, f := range []string{"package.json", "package-lock.json"} {
			if err := w.cp(filepath.Join(src, "project", f), filepath.Join(dir, f)); err != nil {
				return err
			}
		}
		return w.cp(filepath.Join(src, "cache"), filepath.Join(dir, ".npm-cache"))
	})
	if err != nil {
		return err
	}
	base, err := w.baseStore(dirs[wlArt])
	if err != nil {
		return err
	}
	const ci = "export npm_config_cache=\"$PWD/.npm-cache\" npm_config_update_notifier=false\n" +
		"t ci npm ci --offline --no-audit --no-fund --loglevel=error\n"
	const after = "t find 'find node_modules | wc -l && du -s node_modules'\nt rm rm -rf node_modules\n"
	dirs[wlWarm] = dirs[wlArt]
	for rep := range w.reps {
		for _, p := range w.places(true, true) {
			s := wlSession{place: p, ws: dirs[p], body: ci}
			inputs := []string{s.ws}
			if p.art() {
				if s.store, err = w.storeCopy(base, rep, p); err != nil {
					return err
				}
				inputs = append(inputs, s.store, s.store+"-wal", s.store+".packs")
			} else if err := os.RemoveAll(filepath.Join(s.ws, "node_modules")); err != nil {
				return err
			}
			if err := w.dropCaches(); err != nil {
				return err
			}
			if err := readAll(inputs...); err != nil {
				return err
			}
			t, whole, err := w.run(s)
			if err != nil {
				return err
			}
			// W's first session is A's with the daemon's start added:
			// only its next session is timed.
			if p != wlWarm {
				if err := w.addSteps("", p, t, "ci"); err != nil {
					return err
				}
				w.add("ci-session", p, whole)
			}
			if rep == 0 && p == wlNative {
				nm := filepath.Join(s.ws, "node_modules")
				n, bytes, err := countTree(nm)
				if err != nil {
					return err
				}
				pkgs, err := installedPackages(nm)
				if err != nil {
					return err
				}
				w.facts["npm"] = fmt.Sprintf("%s packages (%s files, %s)", fmtInt(pkgs), fmtInt(n), fmtBytes(bytes))
			}
			s.body = after
			t, _, err = w.run(s)
			if err != nil {
				return err
			}
			if err := w.addSteps("", p, t, "find", "rm"); err != nil {
				return err
			}
			if p == wlWarm {
				if err := w.stopWarm(s.store); err != nil {
					return err
				}
			}
			if p.art() {
				removeStore(s.store)
			}
		}
		w.b.progress("workloads: npm rep %d/%d", rep+1, w.reps)
	}
	return nil
}

// installedPackages counts the packages npm installed into node_modules,
// from the hidden lockfile it writes there.
func installedPackages(nm string) (int, error) {
	data, err := os.ReadFile(filepath.Join(nm, ".package-lock.json"))
	if err != nil {
		return 0, err
	}
	var lk struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(data, &lk); err != nil {
		return 0, fmt.Errorf("%s/.package-lock.json: %w", nm, err)
	}
	return len(lk.Packages), nil
}

// countTree counts the regular files below dir and their bytes.
func countTree(dir string) (int, int64, error) {
	var n int
	var size int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		size += info.Size()
		return nil
	})
	return n, size, err
}

// gopls: the Go edit-build loop on gopls's own sources, offline (the
// proxy is the workspace's own module cache). The first session runs go
// install gopls@version cold, the same three times more with nothing
// changed, then go build ./... in a writable copy of gopls's module in
// the workspace (the build cache already holds what the install
// compiled, so the build compiles the module's own packages, which
// compile in another directory) and that three times more; the next
// session runs both no-ops three times each. W's store is a copy of A's
// after A's two sessions (the build cache A's cold session wrote): its
// first session, on a new warm mount, runs each no-op once, untimed, as
// A's first session ran them after its cold steps, and its second
// session is timed. L runs the cold steps in a copy of N's workspace
// without its build cache and installed binary, then the no-ops in a copy
// of N's workspace after N's sessions, both seen at N's path (goplsFloor).
// So a repetition has one cold install and one cold build a place, and
// none for W.
func (w *wlRun) gopls() error {
	if w.b.cfg.quick && w.b.cfg.workloads == "" {
		w.notes = append(w.notes, "-quick skips the gopls rows (a cold build is about a minute per place) unless -workloads names them.")
		return nil
	}
	src, err := w.goModCache()
	if err != nil {
		return err
	}
	dirs, err := w.workspaces("goplsws", false, func(dir string) error {
		if err := w.cp(filepath.Join(src, "mod"), filepath.Join(dir, ".gomod")); err != nil {
			return err
		}
		// The module cache's copy is read-only: the workspace's is a
		// module being worked on.
		mod := filepath.Join(dir, goplsModDir)
		if err := w.cp(filepath.Join(src, "mod", goplsPkg+"@"+goplsVer), mod); err != nil {
			return err
		}
		return makeWritable(mod)
	})
	if err != nil {
		return err
	}
	host := dirs[wlNative]
	n, size, err := countTree(filepath.Join(host, ".gomod"))
	if err != nil {
		return err
	}
	w.facts["gomod"] = fmt.Sprintf("%s files, %s", fmtInt(n), fmtBytes(size))
	n, size, err = countTree(filepath.Join(host, goplsModDir))
	if err != nil {
		return err
	}
	// go list with the scripts' environment (offline), natively: how
	// many packages go build ./... builds, and how many commands it
	// links (every time: go build caches no linked binary).
	out, _, err := w.b.command(filepath.Join(host, goplsModDir), goplsEnv(host), "go", "list", "-f", "{{.Name}}", "./...")
	if err != nil {
		return err
	}
	names := strings.Fields(string(out))
	w.facts["goplsmod"] = fmt.Sprintf("%s packages of which %d commands, %s files, %s", fmtInt(len(names)), countOf(names, "main"), fmtInt(n), fmtBytes(size))
	if err := os.RemoveAll(filepath.Join(host, ".gocache")); err != nil {
		return err
	}
	base, err := w.baseStore(dirs[wlArt])
	if err != nil {
		return err
	}
	first, next, warmup, floor, cold := goplsBodies()
	reps := w.reps
	if w.b.cfg.goplsReps > 0 {
		reps = w.b.cfg.goplsReps
	}
	if reps != w.reps {
		w.notes = append(w.notes, fmt.Sprintf("The gopls rows come from %d repetition(s) (-gopls-reps), not %d.", reps, w.reps))
	}
	dirs[wlWarm] = dirs[wlArt]
	places := w.places(true, true)
	if slices.Contains(places, wlLoop) {
		dirs[wlLoop] = filepath.Join(w.root, "loop", "goplsws")
	}
	for rep := range reps {
		var aStore string // A's store after its sessions, for W
		for _, p := range places {
			if p == wlLoop {
				if err := w.goplsFloor(dirs[wlLoop], host, cold, floor, next); err != nil {
					return err
				}
				continue
			}
			s := wlSession{place: p, ws: dirs[p], body: first}
			switch p {
			case wlArt:
				if s.store, err = w.storeCopy(base, rep, p); err != nil {
					return err
				}
				aStore = s.store
			case wlWarm:
				s.store = strings.TrimSuffix(aStore, ".db") + "-W.db"
				if err := w.copyStore(aStore, s.store); err != nil {
					return err
				}
				removeStore(aStore)
				s.body = warmup
			default:
				for _, d := range goplsBuilt {
					if err := os.RemoveAll(filepath.Join(s.ws, d)); err != nil {
						return err
					}
				}
			}
			t, whole, err := w.run(s)
			if err != nil {
				return err
			}
			if p != wlWarm {
				if err := w.addSteps("", p, t, "cold", "bcold"); err != nil {
					return err
				}
				for metric, steps := range map[string][]string{"noop": {"noop1", "noop2", "noop3"}, "bnoop": {"bnoop1", "bnoop2", "bnoop3"}} {
					d, err := medianOf(t, steps...)
					if err != nil {
						return err
					}
					w.add(metric, p, d)
				}
				w.add("cold-session", p, whole)
				w.b.progress("workloads: gopls rep %d/%d %s: cold install %s, cold build %s, whole session %s", rep+1, reps, p, fmtDur(t["cold"]), fmtDur(t["bcold"]), fmtDur(whole))
			}
			s.body = next
			t, _, err = w.run(s)
			if err != nil {
				return err
			}
			for metric, steps := range map[string][]string{"next": {"next1", "next2", "next3"}, "bnext": {"bnext1", "bnext2", "bnext3"}} {
				d, err := medianOf(t, steps...)
				if err != nil {
					return err
				}
				w.add(metric, p, d)
			}
			switch p {
			case wlWarm:
				if err := w.stopWarm(s.store); err != nil {
					return err
				}
				removeStore(s.store)
			case wlNative:
				// L's workspace is N's as its sessions left it (B
				// starts over in the same directory next).
				if ld := dirs[wlLoop]; ld != "" {
					if err := w.copyWorkspace(host, ld); err != nil {
						return err
					}
				}
			}
		}
		if aStore != "" {
			removeStore(aStore) // W did not take it
		}
	}
	if ld := dirs[wlLoop]; ld != "" {
		return os.RemoveAll(ld)
	}
	return nil
}

// copyWorkspace replaces dst with a copy of the workspace src (cp -a:
// owners, modes and times kept, which go's caches compare), without the
// entries of src's top directory named in except.
func (w *wlRun) copyWorkspace(src, dst string, except ...string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		return err
	}
	if len(except) == 0 {
		return w.cp(src, dst)
	}
	// The top directory with its owner and mode, then each entry but
	// those left out.
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, st.Mode().Perm()); err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(dst, int(sys.Uid), int(sys.Gid)); err != nil {
			return err
		}
	}
	if err := os.Chmod(dst, st.Mode().Perm()); err != nil { // past the umask
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.Contains(except, e.Name()) {
			if err := w.cp(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// goplsFloor takes L's samples of the gopls rows. The cold steps run
// first, in a fresh mount over a copy of ws without its build cache and
// installed binary, seen at N's path at (a compile's cache key holds its
// package's directory), so that the cold rows have their floor too. The
// no-ops run in ws, a copy of N's workspace after N's two sessions, seen
// at the same path: its first session (a fresh mount) runs body (each no-op once
// untimed, as the mount's first, then three timed: A's timed no-ops
// follow its cold steps in the same mount), its next session (a fresh
// mount over what the first left, as A's next session is a new mount)
// runs next. A no-op that compiled or linked anything is no floor: then
// L's gopls samples go, every repetition's (the ratios pair repetitions
// by index), and L takes none after.
func (w *wlRun) goplsFloor(ws, at, cold, body, next string) error {
	if err := w.goplsColdFloor(ws, at, cold); err != nil {
		return err
	}
	if w.goplsNoFloor {
		return nil
	}
	before, err := readGoState(ws)
	if err != nil {
		return err
	}
	s := wlSession{place: wlLoop, ws: ws, at: at, body: body}
	first, _, err := w.run(s)
	if err != nil {
		return err
	}
	s.body = next
	second, _, err := w.run(s)
	if err != nil {
		return err
	}
	after, err := readGoState(ws)
	if err != nil {
		return err
	}
	if why := before.rebuilt(after); why != "" {
		w.goplsNoFloor = true
		for _, m := range []string{"noop", "bnoop", "next", "bnext"} {
			delete(w.samples[m], wlLoop)
		}
		w.notes = append(w.notes, "**L of the gopls no-op rows is missing**: its no-ops in a copy of N's workspace rebuilt ("+why+"), so they were no floor.")
		w.b.progress("workloads: gopls L rebuilt (%s): no L for the gopls rows", why)
		return nil
	}
	got := map[string]time.Duration{}
	for _, m := range []struct {
		metric string
		times  map[string]time.Duration
	}{{"noop", first}, {"bnoop", first}, {"next", second}, {"bnext", second}} {
		d, err := medianOf(m.times, m.metric+"1", m.metric+"2", m.metric+"3")
		if err != nil {
			return err
		}
		got[m.metric] = d
	}
	for m, d := range got {
		w.add(m, wlLoop, d)
	}
	w.b.progress("workloads: gopls L: no-op install %s, no-op build %s; next session %s, %s; nothing rebuilt (%d build-cache files)",
		fmtDur(got["noop"]), fmtDur(got["bnoop"]), fmtDur(got["next"]), fmtDur(got["bnext"]), len(after.cache))
	return nil
}

// goplsBuilt are what a gopls workspace's builds leave in it (the build
// cache and GOBIN): a cold session starts without them.
var goplsBuilt = []string{".gocache", "bin"}

// goplsColdFloor times L's cold install and cold build (body cold) in a
// copy of ws without what its builds left (goplsBuilt), as N, B and A
// start theirs, and removes the copy.
func (w *wlRun) goplsColdFloor(ws, at, cold string) (err error) {
	dir := ws + ".cold"
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if err := w.copyWorkspace(ws, dir, goplsBuilt...); err != nil {
		return err
	}
	t, _, err := w.run(wlSession{place: wlLoop, ws: dir, at: at, body: cold})
	if err != nil {
		return err
	}
	if err := w.addSteps("", wlLoop, t, "cold", "bcold"); err != nil {
		return err
	}
	w.b.progress("workloads: gopls L: cold install %s, cold build %s", fmtDur(t["cold"]), fmtDur(t["bcold"]))
	return nil
}

// goState is what a rebuild in a gopls workspace leaves: the build
// cache's files (a compile that ran wrote its output and action entry
// under a new key; a no-op only reads and touches them) and the
// installed binary's bytes (go install links only when the link's action
// ID no longer matches the build ID in the binary, so a relinked binary
// differs; an up-to-date one it only touches).
type goState struct {
	cache map[string]bool // paths below .gocache of its regular files
	bin   [sha256.Size]byte
}

// readGoState reads the goState of the workspace ws.
func readGoState(ws string) (goState, error) {
	st := goState{cache: map[string]bool{}}
	root := filepath.Join(ws, ".gocache")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		st.cache[rel] = true
		return err
	})
	if err != nil {
		return goState{}, fmt.Errorf("build cache of %s: %w", ws, err)
	}
	bin, err := os.ReadFile(filepath.Join(ws, "bin", "gopls"))
	if err != nil {
		return goState{}, fmt.Errorf("installed gopls in %s: %w", ws, err)
	}
	st.bin = sha256.Sum256(bin)
	return st, nil
}

// rebuilt says what after, read after some no-ops, shows was built since
// before ("" for nothing).
func (before goState) rebuilt(after goState) string {
	var added []string
	for p := range after.cache {
		if !before.cache[p] {
			added = append(added, p)
		}
	}
	var why []string
	if len(added) > 0 {
		slices.Sort(added)
		why = append(why, fmt.Sprintf("%d new build-cache files, first %s", len(added), added[0]))
	}
	if after.bin != before.bin {
		why = append(why, "bin/gopls relinked")
	}
	return strings.Join(why, "; ")
}

// countOf is how many of ss are s.
func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// goplsModDir is where the workspace holds its copy of gopls's module.
const goplsModDir = "gopls"

// goplsEnvScript sets the Go environment of every gopls script, in the
// workspace ($PWD): module cache, build cache and GOBIN in it, its own
// module cache as the proxy, no checksum database, no network.
const goplsEnvScript = "export GOMODCACHE=\"$PWD/.gomod\" GOCACHE=\"$PWD/.gocache\" GOBIN=\"$PWD/bin\" GOFLAGS=-mod=mod " +
	"GOPROXY=\"file://$PWD/.gomod/cache/download\" GOSUMDB=off GOTOOLCHAIN=local GOTELEMETRY=off GOENV=off\n"

// goplsEnv is goplsEnvScript's environment for a command the harness
// runs itself in the workspace ws.
func goplsEnv(ws string) []string {
	return []string{"GOMODCACHE=" + filepath.Join(ws, ".gomod"), "GOCACHE=" + filepath.Join(ws, ".gocache"),
		"GOBIN=" + filepath.Join(ws, "bin"), "GOFLAGS=-mod=mod", "GOPROXY=file://" + filepath.Join(ws, ".gomod", "cache", "download"),
		"GOSUMDB=off", "GOTOOLCHAIN=local", "GOTELEMETRY=off", "GOENV=off"}
}

// goplsBodies are the gopls scripts: the first session (cold install and
// its no-ops, cold build and its no-ops), the next session (the no-ops
// of both), W's untimed first session (each no-op once), L's first
// session (first's with each cold step an untimed no-op) and L's cold
// session (the two cold steps alone).
func goplsBodies() (first, next, warmup, floor, cold string) {
	install := "go install " + goplsPkg + "@" + goplsVer
	build := "go -C " + goplsModDir + " build ./..."
	steps := func(prefix, cmd string, from, to int) string {
		var s strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&s, "t %s%d %s\n", prefix, i, cmd)
		}
		return s.String()
	}
	first = goplsEnvScript + "t cold " + install + "\n" + steps("noop", install, 1, 3) +
		"t bcold " + build + "\n" + steps("bnoop", build, 1, 3)
	next = goplsEnvScript + steps("next", install, 1, 3) + steps("bnext", build, 1, 3)
	warmup = goplsEnvScript + install + "\n" + build + "\n"
	floor = goplsEnvScript + install + "\n" + steps("noop", install, 1, 3) + build + "\n" + steps("bnoop", build, 1, 3)
	cold = goplsEnvScript + "t cold " + install + "\n" + "t bcold " + build + "\n"
	return first, next, warmup, floor, cold
}

// makeWritable gives the owner write permission on every file and
// directory below dir (and dir), as a checkout has; symlinks untouched.
func makeWritable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, info.Mode().Perm()|0o200)
	})
}

// ---- the table

// wlSpec is how one row is made from the samples.
type wlSpec struct {
	metric string
	label  string
	places []wlPlace // measured places; the others show blank
	rate   bool      // the goal is a rate ratio A/N >= goal; else a time ratio <= goal
	goal   float64
	vsB    bool // the ratio and goal are against bwrap (+ goalAdd), not native
}

func (w *wlRun) table() {
	n, b, l, a, wm := wlNative, wlBwrap, wlLoop, wlArt, wlWarm
	nba := []wlPlace{n, b, a}          // no floor to show (the session around npm ci)
	nbla := []wlPlace{n, b, l, a}      // a first session
	nblaw := []wlPlace{n, b, l, a, wm} // the rows of a second session
	f := func(k, def string) string {
		if v := w.facts[k]; v != "" {
			return v
		}
		return def
	}
	owner := "uid 65534"
	if os.Geteuid() != 0 {
		owner = fmt.Sprintf("uid %d (the harness)", os.Geteuid())
	}
	ddSize := fmtSize(w.dd)
	specs := []wlSpec{
		{"cold", fmt.Sprintf("`go install gopls@%s`, cold (module cache of %s in the workspace, offline)", goplsVer, f("gomod", "?")), nbla, false, 1.1, false},
		{"noop", "the same `go install` again, nothing changed (median of 3 in the same session)", nbla, false, 1.5, false},
		{"next", "the same in the next session (build cache in the store; median of 3)", nblaw, false, 1.5, false},
		{"bcold", fmt.Sprintf("`go build ./...` in a writable copy of gopls's module in the workspace (%s), first build, after the install in the same session (its build cache holds the dependencies; the module's own packages compile)", f("goplsmod", "?")), nbla, false, 1.1, false},
		{"bnoop", "the same `go build ./...` again, nothing changed (median of 3 in the same session)", nbla, false, 1.5, false},
		{"bnext", "the same in the next session (median of 3)", nblaw, false, 1.5, false},
		{"ci", fmt.Sprintf("`npm ci --offline` of %s; caches dropped and inputs read back before each run", f("npm", "?")), nbla, false, 1.2, false},
		{"ci-session", "the whole `art run` around it (start, capture, snapshot)", nba, false, 1.3, false},
		{"find", "`find` + `du` over that node_modules (next session)", nblaw, false, 1.5, false},
		{"rm", "`rm -rf node_modules` (after that)", nblaw, false, 1.5, false},
		{"u-status1", fmt.Sprintf("git, %s, owned by %s, who runs N, B and L and is art's agent (the ordinary case): first `git status` of a session (index written on the host by the owner)", f("git", "?"), owner), nbla, false, 3, false},
		{"u-status1late", "the same, 1.5 s after the session's start (an agent's first command follows a model's turn; art lists the tree meanwhile, see below; owner case)", nbla, false, 3, false},
		{"u-statusturn", "in that session, after a `git grep` and another 1.5 s turn, `git status` again (the grep's reads drop the files' attributes from the kernel's cache; art stats them again meanwhile, see below; owner case)", nbla, false, 1.2, false},
		{"u-status2", "the same in a second session (owner case)", nblaw, false, 3, false},
		{"u-status3", "second `git status` in the session (owner case)", nblaw, false, 1.2, false},
		{"u-grep", fmt.Sprintf("`git grep foo` (%s; owner case)", f("grep", "?")), nblaw, false, 1.5, false},
		{"u-commit", "`git checkout -b` + append + `git commit -a` (owner case)", nblaw, false, 1.5, false},
		{"status1", "git, **root case**: the same repository owned by root, N, B and L as root, art's agent as uid 65534: first `git status` of a session (index written on the host)", nbla, false, 3, false},
		{"status2", "the same in a second session (index refreshed inside art in the first; root case)", nblaw, false, 3, false},
		{"status3", "second `git status` in the session (root case)", nblaw, false, 1.2, false},
		{"grep", "`git grep foo` (root case)", nblaw, false, 1.5, false},
		{"commit", "`git checkout -b` + append + `git commit -a` (root case)", nblaw, false, 1.5, false},
		{"untar-session", fmt.Sprintf("`tar x` of Go's src.tar (%s) then `rm -rf src/cmd`, whole session (L: without its mount and unmount)", f("tar", "?")), nbla, false, 2, false},
		{"write", fmt.Sprintf("%s `dd bs=1M` of random bytes into the workspace", ddSize), nbla, true, 0.5, false},
		{"read", "cold read of that file in the same session (caches dropped)", nbla, true, 0.8, false},
		{"startup", "`art run -d STORE -m TINY -- true`, whole process (20-file workspace) against `bwrap ... true`", []wlPlace{b, a, wm}, false, 0, true},
	}
	for _, sp := range specs {
		if r, ok := wlTableRow(sp, w.samples[sp.metric], w.dd); ok {
			w.rows = append(w.rows, r)
		}
	}
}

// wlTableRow makes sp's row from its samples m (by place), false when
// there are none. The goal is judged on A; when W ran, its verdict
// against the same goal follows.
func wlTableRow(sp wlSpec, m map[wlPlace][]time.Duration, dd int64) (wlRow, bool) {
	if m == nil {
		return wlRow{}, false
	}
	r := wlRow{bench: sp.label}
	cells := map[wlPlace]*string{wlNative: &r.n, wlBwrap: &r.b, wlLoop: &r.l, wlArt: &r.a, wlWarm: &r.w}
	for _, p := range sp.places {
		if len(m[p]) == 0 {
			continue
		}
		*cells[p] = fmtDur(median(m[p]))
		if sp.rate {
			*cells[p] += " (" + fmtRate(dd, median(m[p])) + ")"
		}
	}
	hasW := len(m[wlWarm]) > 0
	if sp.vsB {
		bw := median(m[wlBwrap])
		vsB := func(x time.Duration) string {
			return fmt.Sprintf("%.1fx bwrap (+%s)", float64(x)/float64(bw), fmtDur(x-bw))
		}
		a := median(m[wlArt])
		r.ratio = vsB(a)
		r.goal = "<= bwrap + 10 ms: " + metText(a-bw <= 10*time.Millisecond)
		if hasW {
			x := median(m[wlWarm])
			r.wratio = vsB(x)
			r.goal += "; W: " + metText(x-bw <= 10*time.Millisecond)
		}
		return r, true
	}
	judge := func(p wlPlace) (ratio string, met bool) {
		x := pairedRatio(m[p], m[wlNative], sp.rate)
		if sp.rate {
			return fmt.Sprintf("%.2fx rate", x), x >= sp.goal
		}
		return fmtRatio(x), x <= sp.goal
	}
	if slices.Contains(sp.places, wlLoop) && len(m[wlLoop]) > 0 {
		r.lratio, _ = judge(wlLoop) // the floor: no goal of its own
	}
	ratio, met := judge(wlArt)
	r.ratio = ratio
	if sp.rate {
		r.goal = fmt.Sprintf(">= %.1fx rate: %s", sp.goal, metText(met))
	} else {
		r.goal = fmt.Sprintf("<= %gx: %s", sp.goal, metText(met))
	}
	if hasW {
		ratio, met := judge(wlWarm)
		r.wratio = ratio
		r.goal += "; W: " + metText(met)
	}
	return r, true
}

// pairedRatio is the median over repetitions of a[i]/n[i] (time), or of
// n[i]/a[i] (rate: art's throughput over native's).
func pairedRatio(a, n []time.Duration, rate bool) float64 {
	var rs []float64
	for i := range min(len(a), len(n)) {
		if rate {
			rs = append(rs, float64(n[i])/float64(a[i]))
		} else {
			rs = append(rs, float64(a[i])/float64(n[i]))
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// workloadsMarkdown renders the workloads section.
func (b *bench) workloadsMarkdown(took time.Duration) string {
	var s strings.Builder
	b.generated(&s, took)
	if b.rev != "" {
		fmt.Fprintf(&s, "art built from %s. ", b.rev)
	}
	reps := b.cfg.reps
	if b.cfg.quick {
		reps = 1
	}
	fmt.Fprintf(&s, "Machine: %s. N: natively in a directory on the disk that holds the stores; B: the same script under bare `bwrap` with the directory bound; L: the same under bare `bwrap` in a fresh mount of go-fuse's loopback node, with art's mount options, over a plain directory of its own (the FUSE floor, see below); A: `art run -m DIR -d STORE` on a fresh copy of a store that already holds DIR; W: `art run --warm %s -m DIR -d STORE` on a fresh copy of its own (rows of a second session only, see below). %s Medians of %d repetitions, N, B, L, A and W back to back in each; L/N, A/N and W/N are the medians of the per-repetition ratios (time: lower is better; rate: higher is better). The goal is judged on A, then on W where W ran; L has none (it is what art's goal is measured against). The steps are timed inside the script with bash's `$EPOCHREALTIME`; \"whole\" rows time the process from outside.\n\n",
		b.machine(), wlWarmIdle, whoRuns(), reps)
	s.WriteString(wlTable(b.rep.wl))
	goFuse := "go-fuse" // L did not run: no version was read
	if v := b.rep.wlGoFuse; v != "" {
		goFuse += " " + v
	}
	notes := append([]string{
		"gopls: `GOMODCACHE`, `GOCACHE` and `GOBIN` in the workspace, `GOFLAGS=-mod=mod`, `GOPROXY=file://$PWD/.gomod/cache/download` (the workspace's own module cache: `GOPROXY=off` refuses `go install pkg@version`, which looks the module's deprecation up), `GOSUMDB=off`; the sandboxes have no network. The module cache was filled once from the module proxy into the data cache. `go build ./...` (`go -C gopls build ./...`) runs in a copy of gopls's own module taken from that module cache (with its go.mod and go.sum, made writable) in the workspace, with the same environment and build cache: its first build follows the install in the same session, so it finds the dependencies the install compiled, and compiles the module's own packages (their directory, part of a compile's cache key, is not the module cache's) and the packages of `./...` the gopls binary does not import. It links every command of the module (its main packages) at every build, no-op or not (Go's build cache keeps no binary `go build` links), so its no-op rows are mostly the linker's CPU and its reads of the build cache's archives. So each repetition has one cold install and one cold build a place (none for W, below). L's cold steps run in a session of their own: the harness copies N's workspace after its sessions without its build cache and `GOBIN`, as N, B and A start, onto a plain directory of its own, mounts it, and L's bwrap binds the mount at N's path (a compile's cache key holds its package's directory: anywhere else every package would compile again); L runs the cold install and the cold build there, and the copy goes. For its no-op rows, after N's two sessions the harness copies N's workspace (`cp -a`: module cache, build cache, `GOBIN`, the module's copy) onto L's plain directory, and L's bwrap binds the mount at N's path again. L's first session, on a fresh mount, runs the no-op install once untimed (the mount's first: A's timed no-ops follow its cold install in the same mount), times three, runs the no-op build once untimed (as A's follow its cold build), times three; its next session, on a fresh mount over what the first left, times the next session's no-ops as A's does. The harness checks that L's sessions built nothing (no new file in the build cache, the installed binary's bytes unchanged) and shows no L for gopls otherwise (a note says so).",
		"npm: `npm ci --offline --no-audit --no-fund` with `npm_config_cache` in the workspace (filled once from the registry); the lockfile was resolved once. Before each run the harness drops the caches and reads the workspace (and for A and W the store copy, for L its plain directory) back. `find` + `du` and `rm -rf` run in the next session, so for A the tree comes from the store through a new mount, and for L through a new loopback mount.",
		"L: `cmd/bench/loopfloor`, " + goFuse + "'s loopback node (`fs.NewLoopbackRoot`, the node go-fuse's example/loopback serves) mounted with the options art's mount gives the kernel: names, attributes and negative lookups kept an hour (the example as shipped keeps them 1 s, libfuse's default, so its second `git status` a few seconds after the first looked every file up again where art's mount answered from the kernel's caches: no floor), allow_other with `default_permissions`, a direct mount, 1 MiB writes, 64 background requests, HANDLE_KILLPRIV_V2 and ATOMIC_O_TRUNC, and, as root, FUSE passthrough for every open file and, where art's mount serves its requests over io_uring (as root on a kernel that has it), the same transport with the same threads. The harness starts it natively as root, as art's daemon runs, over a plain directory of its own on the same disk, made and reset like N's. Each session mounts afresh (a second session over the directory the first left), so the kernel knows nothing of the tree, as at A's new mount; the script runs under bare `bwrap` with the mount bound as B binds its directory, as B's user. L is the floor under A: what the kernel's FUSE protocol costs with a server that only forwards, written with art's library; where A/N is near L/N, the rest is outside art. It is no lower bound where art answers from its own index what the loopback asks the disk for (a lookup is an lstat of the host file there): A can beat L. No L for start-up and for the session around `npm ci` (art's capture and snapshot have no counterpart there).",
		"git: two sets of rows. The owner case, the ordinary one (a user running art on their own repository): the repository belongs to uid 65534, which refreshed its index on the host before the capture; N runs as that uid (setresuid and setresgid with no supplementary groups, as `setpriv --reuid --regid --clear-groups`), B and L start bwrap as it with `--unshare-user --uid --gid` (mapped to itself, as art's sandbox does), and `art run` (the harness drops sudo's variables from its environment) picks the workspace's owner as the agent. No place sets git's `safe.directory` there: a place that saw someone else's repository would fail the workload with git's dubious-ownership error (a note under the table would say so). The root case (marked so, the rows of earlier tables): the repository is root's, N, B and L run as root, art's agent is uid 65534 (art never runs it as root), so every entry's uid differs from git's index and git re-reads every file once a session until the agent's own index is written; `safe.directory` is `*` in every place, or the agent's git refuses root's repository. Every script reports the uid it ran as, and the harness checks it. Each place runs two sessions per repetition: the first times `git status`; the second times `git status` twice, `git grep foo` and the commit; N, B and L then go back to main (A's store copy is new each repetition). In the owner case a third session (A on a fresh store copy, L on a fresh mount, no W) sleeps 1.5 s, as an agent's first command follows a model's turn, then times `git status`: art's mount lists the tree while nothing else asks it anything (docs/architecture.md, \"Priming the kernel's caches\"), so that row is the first status an agent meets; the first row, timed at once, races the walk, which waits for the mount to be quiet (it runs as without one). The session then runs `git grep -q foo` (untimed), sleeps 1.5 s again and times `git status` once more: the grep's reads drop every file's attributes from the kernel's cache (natively nothing is dropped), and art's mount stats them again once it is quiet (\"Keeping the caches primed\"), so that row is the status an agent meets after a search and a turn. L lists and stats nothing ahead.",
		"W: art run --warm " + wlWarmIdle + ": the first session of a repetition starts the warm daemon (it captures and mounts), later ones of the repetition run over its mount, so a second session finds the kernel's dentry, attribute and page caches of the first; after the repetition's W sessions the harness asks the daemon to go (`session.YieldWarm`) and waits for its process to exit. Rows of a first session on a fresh store (`npm ci`, `tar x`, dd, the first `git status`) have no W: that is A's session with the daemon's start added. git: W runs A's two sessions and times the second's steps. npm: W runs `npm ci` (untimed) and times the next session's `find` + `du` and `rm -rf`. startup: one untimed `art run --warm` starts the daemon, the timed runs reuse it; every timed start-up command (B, A and W alike) starts 0.3 s after the one before ended, so that the sandbox a warm daemon starts ahead after a run (as between an agent's calls) is not timed inside the next command. gopls: W's store is a copy of A's after A's two sessions (it holds the build cache and binary A's cold steps wrote); W's first session, untimed, starts the daemon and runs the no-op install and build once each (as A's first session ran them after its cold steps), and its second session's no-ops are timed.",
		"dd: the source file is bound read-only into the sandboxes (page cache warm); after the write the script waits while the harness drops the caches, then reads the file back with `dd bs=1M`.",
	}, b.rep.wlNotes...)
	s.WriteString("\n")
	for _, n := range notes {
		fmt.Fprintf(&s, "- %s\n", n)
	}
	return s.String()
}

// wlTable is the table's markdown.
func wlTable(rows []wlRow) string {
	var s strings.Builder
	s.WriteString("| Workload (real data) | N | B | L | A | W | L/N | A/N | W/N | Goal (A; W) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(r.bench), cell(r.n), cell(r.b), cell(r.l), cell(r.a), cell(r.w),
			cell(r.lratio), cell(r.ratio), cell(r.wratio), cell(r.goal))
	}
	return s.String()
}

// whoRuns says as whom the harness ran: as root, art runs the sandboxed
// command as the workspace's owner, uid 65534 for a root-owned one, so
// git's index written on the host (uid 0) no longer matches.
func whoRuns() string {
	if os.Geteuid() == 0 {
		return "The harness ran as root: N, B and L ran as root and A's command as uid 65534 (the workspaces are root's), except in git's owner case, where everything ran as uid 65534, the repository's owner."
	}
	return fmt.Sprintf("The harness ran as uid %d, and so did every place.", os.Geteuid())
}
