package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// buildArt builds cmd/art once per test binary.
var builtArt string

func artBinary(t *testing.T) string {
	t.Helper()
	if builtArt != "" {
		return builtArt
	}
	dir, err := testutil.BuildDir() // removed after the package's tests
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "art")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	builtArt = bin
	return bin
}

// startMount runs `art mount` in the background and waits until it serves.
func startMount(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(artBinary(t), append([]string{"mount"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "serving ") {
				ready <- ""
			}
		}
		ready <- all.String()
	}()
	select {
	case out := <-ready:
		if out != "" {
			t.Fatalf("art mount exited before serving:\n%s", out)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("art mount did not start serving")
	}
	return cmd
}

func TestMountSurvivesKill9(t *testing.T) {
	testutil.RequireFUSE(t)
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	writeFile(t, filepath.Join(ws, "lower.txt"), "from the host\n")
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) }) // if the test fails midway

	cmd := startMount(t, "-d", db, "-m", ws, mnt)
	// The lower layer is visible, and a file written and closed...
	if b, err := os.ReadFile(filepath.Join(mnt, "ws", "lower.txt")); err != nil || string(b) != "from the host\n" {
		t.Fatalf("lower file through the mount: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "ws", "agent.txt"), []byte("written by the agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "ws", "newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(mnt, "ws", "newdir", "synced"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("fsynced\n")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// ...survives kill -9 of the daemon, even with this one still open.
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	f.Close()
	if got := mustArt(t, "cat", "-d", db, "main:ws/agent.txt"); got != "written by the agent\n" {
		t.Fatalf("closed file after kill -9: %q", got)
	}
	if got := mustArt(t, "cat", "-d", db, "main:ws/newdir/synced"); got != "fsynced\n" {
		t.Fatalf("fsynced file after kill -9: %q", got)
	}
	// The next mount finds the stale mount and takes its place.
	cmd = startMount(t, "-d", db, mnt)
	if b, err := os.ReadFile(filepath.Join(mnt, "ws", "agent.txt")); err != nil || string(b) != "written by the agent\n" {
		t.Fatalf("after remount: %q %v", b, err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("art mount after SIGINT: %v", err)
	}
	if out := mustArt(t, "verify", "-d", db, "--rebuild"); !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify:\n%s", out)
	}
}

// TestMountKill9KeepsEveryClose: a writer closes file after file while
// the daemon is killed (kill -9) in the middle: every close that returned
// survives, whether the daemon's last transaction committed or only its
// redo log held it (journal.Batch.Persist; the next open of the store
// replays the log). The writer runs without fsync, so at the kill most
// of the last few milliseconds' closes are in the log alone.
func TestMountKill9KeepsEveryClose(t *testing.T) {
	testutil.RequireFUSE(t)
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	writeFile(t, filepath.Join(ws, "lower.txt"), "from the host\n")
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })

	logged := false
	for attempt := 1; attempt <= 3 && !logged; attempt++ {
		args := []string{"-d", db, mnt}
		if attempt == 1 {
			args = []string{"-d", db, "-m", ws, mnt}
		}
		daemon := startMount(t, args...)
		// Killed, it leaves its private copies: gone with the test.
		if upper := upperOf(daemon.Process.Pid, os.TempDir()); upper != "" {
			t.Cleanup(func() { os.RemoveAll(upper) })
		}
		dir := fmt.Sprintf("d%d", attempt)
		// The writer is a child process: the test never touches the mount.
		w := exec.Command("sh", "-c", `mkdir `+dir+` && cd `+dir+` && i=0; while :; do i=$((i+1)); printf 'content %d\n' $i > f$i || exit 1; echo $i; done`)
		w.Dir = filepath.Join(mnt, "ws")
		out, err := w.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		last := 0
		for last < 300 && lines.Scan() {
			last, _ = strconv.Atoi(lines.Text())
		}
		daemon.Process.Signal(syscall.SIGKILL)
		daemon.Wait()
		for lines.Scan() { // closes that returned before the kill reached them
			if n, err := strconv.Atoi(lines.Text()); err == nil {
				last = n
			}
		}
		w.Wait()
		if last < 300 {
			t.Fatalf("attempt %d: the writer reported %d closes", attempt, last)
		}
		// What the kill left: a redo log with records (closes not yet
		// committed), or none (the kill fell just after a commit).
		logs, _ := filepath.Glob(filepath.Join(journal.RedoDir(db), "*.log"))
		for _, l := range logs {
			if st, err := os.Stat(l); err == nil && st.Size() > 32 {
				logged = true
			}
		}
		// The last file reported may be the one whose close the kill cut
		// short (the shell does not check a close): every one before it
		// was closed and acknowledged.
		last--
		listing := mustArt(t, "ls", "-d", db, "main:ws/"+dir)
		for i := 1; i <= last; i++ {
			if !strings.Contains(listing, fmt.Sprintf("f%d\n", i)) {
				t.Fatalf("attempt %d: f%d of %d closed files is gone after kill -9 (redo log left: %v):\n%s", attempt, i, last, logged, listing)
			}
		}
		if got := mustArt(t, "cat", "-d", db, fmt.Sprintf("main:ws/%s/f%d", dir, last)); got != fmt.Sprintf("content %d\n", last) {
			t.Fatalf("attempt %d: the last closed file reads %q", attempt, got)
		}
	}
	if !logged {
		t.Fatal("no kill of three left a redo log with records: the recovery was not exercised")
	}
	if out := mustArt(t, "verify", "-d", db, "--rebuild"); !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify:\n%s", out)
	}
}

func TestMountReadOnlyPastState(t *testing.T) {
	testutil.RequireFUSE(t)
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	writeFile(t, filepath.Join(ws, "main.py"), "print('v2')\n")
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	cmd := startMount(t, "-d", db, "--at", "main~1", "--read-only", mnt)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if got := mustArt(t, "branch", "-d", db); strings.Contains(got, "tmp") {
			t.Errorf("temporary branch left behind:\n%s", got)
		}
	}()
	if b, err := os.ReadFile(filepath.Join(mnt, "ws", "main.py")); err != nil || string(b) != "print('hello')\n" {
		t.Fatalf("main~1:ws/main.py through a read-only mount: %q %v", b, err)
	}
	err := os.WriteFile(filepath.Join(mnt, "ws", "x"), []byte("no"), 0o644)
	if !errorsIsErrno(err, syscall.EROFS) {
		t.Fatalf("write to a read-only mount: %v, want EROFS", err)
	}
}

func errorsIsErrno(err error, want syscall.Errno) bool {
	var pe *os.PathError
	if e, ok := err.(*os.PathError); ok {
		pe = e
	}
	return pe != nil && pe.Err == want
}

// TestMountUnmountedFromOutside: `umount` (or fusermount -u) of an art
// mount ends it like Ctrl-C: exit 0 at once, everything written is
// journaled, and the store verifies.
func TestMountUnmountedFromOutside(t *testing.T) {
	testutil.RequireFUSE(t)
	base := t.TempDir()
	db, mnt := filepath.Join(base, "ws.db"), filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) }) // if the test fails midway
	writeFile(t, filepath.Join(base, "ws", "a.txt"), "a\n")
	mustArt(t, "push", "-m", filepath.Join(base, "ws"), "-d", db, "-q")
	cmd := startMount(t, "-d", db, mnt)
	if err := os.WriteFile(filepath.Join(mnt, "ws", "out.txt"), []byte("written before the umount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 100; i++ { // a moment of EBUSY while the kernel lets go of the write
		if err = unix.Unmount(mnt, 0); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("umount: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("art mount after an outside umount: %v", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("art mount did not end after an outside umount")
	}
	if got := mustArt(t, "cat", "-d", db, "main:ws/out.txt"); got != "written before the umount\n" {
		t.Fatalf("file after the outside umount: %q", got)
	}
	if out := mustArt(t, "verify", "-d", db); !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("verify:\n%s", out)
	}
}
