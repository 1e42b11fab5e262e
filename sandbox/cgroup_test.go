package sandbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// cgroupLines is the command's own pids and memory cgroups, as it sees
// them inside its cgroup namespace (which bwrap makes at its child's
// clone, rooted where bwrap then was).
const cgroupLines = `grep -E '^[0-9]+:(pids|memory):' /proc/self/cgroup | cut -d: -f2,3 | sort`

// The sandbox is born in its cgroup (the forking thread joins it cheaply,
// see cgroup_linux.go): bwrap was already in it when it made the cgroup
// namespace, so the command sees itself at that namespace's root. And no
// thread of art stays behind in it.
func TestSandboxIsBornInItsCgroup(t *testing.T) {
	requireRoot(t)
	if cgroupMechanism(t) != "cgroup v1" {
		t.Skip("cgroup v2 here: bwrap is moved in, not born in")
	}
	c := direct(t)
	c.Limits.Pids = 20 // written once art's thread has left
	if got, want := sh(t, c, cgroupLines), "memory:/\npids:/\n"; got != want {
		t.Fatalf("the command's cgroups inside:\n%s\nwant the namespace's root (bwrap born in the sandbox's cgroup):\n%s", got, want)
	}
	own := "8:pids:" + ownPidsCgroup(t)
	tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, ":pids:") && strings.Contains(line, "/art-") {
				t.Fatalf("%s: a thread of art still in a sandbox's cgroup: %q (own %q)", f, line, own)
			}
		}
	}
}

// A Starter that does not join the cgroup (the tracer's) still gets bwrap
// and its child moved in before the command is released.
func TestCustomStarterTreeIsMovedIntoItsCgroup(t *testing.T) {
	requireRoot(t)
	c := direct(t)
	c.Limits.Pids = 20
	c.Command = []string{"sh", "-c", cgroupLines}
	var out bytes.Buffer
	p, err := sandbox.Start(c, sandbox.IO{Stdout: &out}, plainStarter)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Wait: %v, exit %d", err, res.ExitCode)
	}
	// Inside a namespace rooted at art's own cgroup, the sandbox's shows
	// as a child of it: art-PID-N.
	want := regexp.MustCompile(`^memory:/art-\d+-\d+\npids:/art-\d+-\d+\n$`)
	if cgroupMechanism(t) == "cgroup v2" {
		want = regexp.MustCompile(`^$`) // no v1 lines to read
	}
	if !want.MatchString(out.String()) {
		t.Fatalf("the command's cgroups inside:\n%s\nwant the sandbox's (art-PID-N)", out.String())
	}
}

// plainStarter starts cmd on a locked thread that is never the main one,
// as the tracer does, without joining any cgroup.
func plainStarter(cmd *exec.Cmd) (func() (syscall.WaitStatus, *syscall.Rusage, error), error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	f := func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := sandbox.PrepareThread(cmd); err != nil {
			started <- err
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}
	go func() {
		// Never on the main thread (as goOffMainThread): PrepareThread
		// changes the thread for good.
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		ran := make(chan struct{})
		go func() { defer close(ran); f() }()
		<-ran
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() (syscall.WaitStatus, *syscall.Rusage, error) {
		<-done
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		return ws, nil, nil
	}, nil
}
