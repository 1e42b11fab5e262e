// Command sbparts runs a command under bare bwrap with art's sandbox parts
// added one at a time, to measure what each costs a real workload (the
// benchmarks' "The sandbox's parts, one at a time"). Run as root.
//
//	sbparts [-uid N] [-seccomp] [-landlock] [-cgroup] [-capdrop] [-art]
//	        [-bind HOST:GUEST]... -- CMD [ARG...]
//
// The base is the bench's B: bwrap --unshare-all --die-with-parent
// --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /home and the
// binds, as uid N in a user namespace when N > 0 (bwrap itself then runs
// as N, as art starts it), as root otherwise. Each flag adds one part the
// way art sets it up:
//
//	-seccomp   seccomp.Policy{}.Program() through --seccomp FD
//	-landlock  sandbox.ScopeThread on the thread that forks bwrap
//	-cgroup    the sandbox's cgroups (v1: memory and pids, made under this
//	           process's own; v2: one directory), bwrap born in them
//	           through the forking thread, as art's StartLocked does
//	-capdrop   --cap-drop ALL
//	-art       art's own bwrap argument list (sandbox.Config.Args, direct
//	           mode, the first -bind as the workspace at /home/agent/ws,
//	           the others as binds) in place of the base
//
// It waits for bwrap and exits with its status.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/seccomp"
)

type binds []string

func (b *binds) String() string     { return strings.Join(*b, ",") }
func (b *binds) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	// The thread that forks bwrap carries the Landlock domain and the
	// cgroup placement: keep main on one thread throughout.
	runtime.LockOSThread()
	uid := flag.Int("uid", 65534, "uid (and gid) inside; 0: bwrap as root")
	useSeccomp := flag.Bool("seccomp", false, "art's seccomp program")
	useLandlock := flag.Bool("landlock", false, "art's Landlock scope")
	useCgroup := flag.Bool("cgroup", false, "art's cgroups")
	capDrop := flag.Bool("capdrop", false, "--cap-drop ALL")
	artArgs := flag.Bool("art", false, "art's own bwrap argument list")
	verbose := flag.Bool("v", false, "print bwrap's arguments")
	var bs binds
	flag.Var(&bs, "bind", "HOST:GUEST, read-write (repeatable)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "sbparts: no command")
		os.Exit(2)
	}
	code, err := run(*uid, *useSeccomp, *useLandlock, *useCgroup, *capDrop, *artArgs, *verbose, bs, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbparts:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(uid int, useSeccomp, useLandlock, useCgroup, capDrop, artArgs, verbose bool, bs []string, command []string) (int, error) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return 0, err
	}
	var files []*os.File
	seccompFD := -1
	if useSeccomp {
		prog, err := seccomp.Policy{}.Program()
		if err != nil {
			return 0, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		if _, err := w.Write(prog); err != nil {
			return 0, err
		}
		w.Close()
		files = append(files, r)
		seccompFD = 3
	}
	args, err := bwrapArgs(uid, seccompFD, capDrop, artArgs, bs, command)
	if err != nil {
		return 0, err
	}
	if verbose {
		fmt.Fprintln(os.Stderr, "bwrap", strings.Join(args, " "))
	}
	cmd := exec.Command(bw, args...)
	cmd.ExtraFiles = files
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if uid > 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	if useLandlock {
		ok, err := sandbox.ScopeThread(bw)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, errors.New("no Landlock scoping on this kernel")
		}
	}
	var cg *cgroups
	if useCgroup {
		if cg, err = makeCgroups(fmt.Sprintf("art-sbparts-%d", os.Getpid())); err != nil {
			return 0, err
		}
		defer cg.remove()
		if err := cg.join(); err != nil {
			return 0, err
		}
	}
	err = cmd.Start()
	if cg != nil {
		if lerr := cg.leave(); lerr != nil && err == nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, lerr
		}
	}
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		f.Close()
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// bwrapArgs is the base's argument list with -capdrop and the seccomp fd
// (-1: none), or art's own (-art).
func bwrapArgs(uid, seccompFD int, capDrop, artArgs bool, bs, command []string) ([]string, error) {
	var args []string
	if artArgs {
		if uid == 0 {
			return nil, errors.New("-art needs -uid > 0 (art never runs the sandbox as root)")
		}
		c := &sandbox.Config{Command: command, Name: "ws", UID: uid, GID: uid}
		for i, b := range bs {
			h, g, _ := strings.Cut(b, ":")
			if i == 0 {
				c.Workspace = h
				continue
			}
			c.Binds = append(c.Binds, sandbox.Bind{Host: h, Guest: g})
		}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		args = c.Args(seccompFD)
	} else {
		args = []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--tmpfs", "/tmp", "--tmpfs", "/home"}
		for _, b := range bs {
			h, g, _ := strings.Cut(b, ":")
			args = append(args, "--bind", h, g)
		}
		if capDrop {
			args = append(args, "--cap-drop", "ALL")
		}
		if seccompFD >= 0 {
			args = append(args, "--seccomp", strconv.Itoa(seccompFD))
		}
		if uid > 0 {
			args = append(args, "--unshare-user", "--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(uid))
		}
		args = append(append(args, "--"), command...)
	}
	return args, nil
}

// cgroups are the sandbox's cgroup directories as art makes them
// (sandbox/cgroup_linux.go, no limits): v1 memory and pids under this
// process's own cgroup in each; v2 one directory.
type cgroups struct {
	v2   bool
	dirs []string
}

func makeCgroups(name string) (*cgroups, error) {
	own := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		p := strings.SplitN(line, ":", 3)
		if len(p) != 3 {
			continue
		}
		for _, c := range strings.Split(p[1], ",") {
			if _, dup := own[c]; !dup {
				own[c] = p[2]
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, err
	}
	cg := &cgroups{}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		cg.v2 = true
		d := filepath.Join("/sys/fs/cgroup", own[""], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		cg.dirs = []string{d}
		return cg, nil
	}
	for _, c := range []string{"memory", "pids"} {
		d := filepath.Join("/sys/fs/cgroup", c, own[c], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			cg.remove()
			return nil, err
		}
		cg.dirs = append(cg.dirs, d)
	}
	return cg, nil
}

// join moves the calling thread in (v1: "0" to tasks, as art's
// joinThread); on v2 the whole process goes (this one runs nothing else).
func (cg *cgroups) join() error {
	for _, d := range cg.dirs {
		f, v := "tasks", "0"
		if cg.v2 {
			f = "cgroup.procs"
		}
		if err := os.WriteFile(filepath.Join(d, f), []byte(v), 0); err != nil {
			return err
		}
	}
	return nil
}

func (cg *cgroups) leave() error {
	var errs []error
	for _, d := range cg.dirs {
		f := "tasks"
		if cg.v2 {
			f = "cgroup.procs"
		}
		errs = append(errs, os.WriteFile(filepath.Join(filepath.Dir(d), f), []byte("0"), 0))
	}
	return errors.Join(errs...)
}

func (cg *cgroups) remove() {
	for _, d := range cg.dirs {
		// Exiting tasks leave asynchronously: retry a moment.
		for i := 0; i < 100; i++ {
			if err := os.Remove(d); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
