package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunUnmountBusyDeletesNothing pins what the remount stress work of
// issue 20 found: when a run's unmount failed because a host process
// still had a file of the session's mount open, closing the session
// removed its directory recursively - through the still-served mount -
// and journaled the deletion of every file of the branch.
func TestRunUnmountBusyDeletesNothing(t *testing.T) {
	ws, db := overlayWorkspace(t)
	mustRun(t, "push", "-q", "-m", ws, "-d", db)
	cmd := artCmd(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo agent > agent.txt; i=0; while [ ! -e held ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done")
	out, errb := &strings.Builder{}, &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	// The session's directory: the one whose lock the run holds.
	var session string
	if !waitUntil(20*time.Second, func() bool {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", cmd.Process.Pid))
		for _, fd := range fds {
			if p, err := os.Readlink(fd); err == nil && strings.Contains(p, "/session-") && filepath.Base(p) == "lock" {
				session = filepath.Dir(p)
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no session lock held by art run:\n%s", errb)
	}
	home := filepath.Join(session, "home")
	// A host process holds a file of the mount open past the command's
	// end (opened from a child: the test never touches the mount), and
	// then lets the command end.
	var holder *exec.Cmd
	if !waitUntil(20*time.Second, func() bool {
		holder = exec.Command("sh", "-c", `exec 3<"$0/main.py" && : >"$0/held" && echo held && exec sleep 60`, filepath.Join(home, "ws"))
		b, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 5)
		n, _ := b.Read(line)
		if string(line[:n]) == "held\n" {
			return true
		}
		holder.Wait()
		return false
	}) {
		t.Fatalf("cannot open a file in %s", home)
	}
	t.Cleanup(func() {
		holder.Process.Kill()
		holder.Wait()
		for unix.Unmount(home, unix.MNT_DETACH) == nil {
		}
		os.Remove(home)
		os.Remove(filepath.Join(session, "lock"))
		os.Remove(session)
	})
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("art run did not end")
	}
	t.Logf("art run with its mount busy: %s", strings.TrimSpace(errb.String()))
	for f, want := range map[string]string{"main.py": "print('hello')\n", "agent.txt": "agent\n"} {
		if got := mustRun(t, "cat", "-d", db, "main:ws/"+f).stdout; got != want {
			t.Errorf("main:ws/%s after a run whose unmount was busy: %q, want %q", f, got, want)
		}
	}
	// Once the holder is gone, the next run cleans the session up.
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "true")
	if _, err := os.Lstat(session); !os.IsNotExist(err) {
		t.Errorf("session %s still there after the next run: %v", session, err)
	}
	if got := mustRun(t, "cat", "-d", db, "main:ws/agent.txt").stdout; got != "agent\n" {
		t.Errorf("main:ws/agent.txt after the cleanup: %q", got)
	}
}
