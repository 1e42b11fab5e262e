package overlay_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/overlay"
)

// TestMountOpensConnCtl: Mount opens the connection's control files (as
// root: a private control file system where the host mounts none), so
// the unmount does not pay for them - dissolving the private instance
// waits for an RCU grace period - and its abort reaches this connection.
func TestMountOpensConnCtl(t *testing.T) {
	testutil.RequireMount(t)
	_, _, fsys := mount(t)
	if !overlay.HasConnCtl(fsys) {
		t.Fatal("no control files of the connection after Mount")
	}
}

// TestUnmountWithCopyInAnotherNamespace: a mount namespace made while the
// mount exists holds a copy of it, and the kernel keeps the FUSE
// connection for as long as that namespace lives. Unmount used to wait
// for it (go-fuse's Server.Unmount waits for its readers of /dev/fuse,
// which only end with the connection): art hung at exit for as long as
// another session's sandbox, a container or an unshare -m shell lived.
// Now Unmount returns at once, with what was written and closed in the
// store (also through the other namespace's copy) and the mount gone
// from this namespace; the copy is cut off (its accesses fail).
func TestUnmountWithCopyInAnotherNamespace(t *testing.T) {
	testutil.RequireMount(t) // a namespace of one's own, and the control file system
	for _, holder := range []string{"unshare", "bwrap"} {
		t.Run(holder, func(t *testing.T) {
			if holder == "bwrap" {
				// As other art sessions' sandboxes hold it: an
				// unprivileged user namespace, where the copy is locked.
				testutil.Require(t, "bwrap")
			}
			db, mnt, fsys := mount(t)
			writeChild(t, filepath.Join(mnt, "kept"), []byte("written and closed\n"))

			var cmd *exec.Cmd
			switch holder {
			case "unshare":
				// Its working directory in its copy, and requests going
				// to the mount until they fail.
				cmd = exec.Command("/bin/sh", "-c", `cd "$1" || exit 1; echo theirs > theirs || exit 1; echo ready; while cat kept >/dev/null; do :; done; echo cut off`, "sh", mnt)
				cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			case "bwrap":
				cmd = exec.Command("bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
					"--", "/bin/sh", "-c", "echo ready; exec sleep 600")
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			cmd.Dir = "/"
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
			}()
			lines := bufio.NewReader(out)
			if l, err := lines.ReadString('\n'); l != "ready\n" {
				t.Fatalf("holder: %q, %v", l, err)
			}
			if !strings.Contains(readFile(t, "/proc/"+strconv.Itoa(cmd.Process.Pid)+"/mountinfo"), " "+mnt+" ") {
				t.Fatalf("the holder's namespace has no copy of %s", mnt)
			}

			unmounted := make(chan error, 1)
			go func() { unmounted <- fsys.Unmount(context.Background()) }()
			select {
			case err := <-unmounted:
				if err != nil {
					t.Fatalf("unmount: %v", err)
				}
			case <-time.After(30 * time.Second):
				// Unbounded before: until the holder ended. End it so
				// that Unmount and the test's cleanup can finish.
				cmd.Process.Kill()
				<-unmounted
				t.Fatal("Unmount waited for another mount namespace's copy of the mount (30 s)")
			}
			if strings.Contains(readFile(t, "/proc/self/mountinfo"), " "+mnt+" ") {
				t.Errorf("%s still mounted here after Unmount", mnt)
			}
			// Size and content (not mode or time) as written, also what
			// the other namespace's process wrote and closed.
			tree := journalTree(t, db)
			files := map[string]string{"kept": "written and closed\n"}
			if holder == "unshare" {
				files["theirs"] = "theirs\n"
			}
			for name, content := range files {
				got := strings.Fields(tree[name])
				want := strings.Fields(fileDesc(0, []byte(content), 0))
				if len(got) != len(want) || got[2] != want[2] || got[3] != want[3] {
					t.Errorf("%s in the store: %q, want %q", name, got, want)
				}
			}
			if holder == "unshare" {
				// The connection is gone, not just our mount: the copy's
				// user is cut off.
				done := make(chan string, 1)
				go func() { b, _ := io.ReadAll(lines); done <- string(b) }()
				select {
				case rest := <-done:
					if !strings.Contains(rest, "cut off") {
						t.Errorf("holder after the unmount: %q", rest)
					}
				case <-time.After(30 * time.Second):
					t.Error("the copy in the other namespace is still served after Unmount")
				}
			}
		})
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
