package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artrt/art/internal/fusectl"
)

// Why Unmount does not use go-fuse's Server.Unmount, and what it does
// instead.
//
// Server.Unmount is umount(2) and then a wait for the serve loops to end.
// The loops end when the kernel destroys the FUSE connection, which it
// does when the last mount of the file system goes - and that need not be
// ours. Every mount namespace made while the mount exists (another art
// run's bwrap, a container, any unshare -m, on a host whose mounts are
// private there is no unmount propagation) gets a copy of it, and the
// connection lives until the last such namespace dies. The umount in our
// namespace succeeds at once; the wait then lasted as long as the other
// namespaces did: minutes, seen as art hanging at exit on a machine busy
// with other sandboxes (the loops were blocked reading /dev/fuse with no
// request in sight).
//
// So Unmount detaches the mount itself (detach), and when the connection
// outlives that, it aborts it through the kernel's FUSE control file
// system (/sys/fs/fuse/connections/N/abort; internal/fusectl). Nothing is lost by
// that. Our own processes can no longer reach the file system: the
// mount is gone from our namespace and, for a session, the sandbox's
// processes have been reaped (a warm daemon's client that went away
// leaves a sandbox being killed, whose run is recorded as killed
// already). Every request the kernel had sent us is
// still answered (the abort waits until the kernel counts none waiting,
// up to abortWait), and one in a handler when it comes finishes all the
// same (only its reply is dropped); Unmount journals after the handlers
// are done. What the abort refuses is a request not yet answered, whose
// caller gets an error (ECONNABORTED, later ENOTCONN) rather than a
// success: nothing acknowledged - no close, fsync or write that returned
// - is taken back. Those callers are processes of the other namespaces,
// which were never the session's to serve.
//
// "waiting" does not count the kernel's background requests that no
// caller waits for (made with args->force: the RELEASE of a closed file,
// the write-back of a mapping's pages whose munmap or msync has not
// returned), so one still queued at the abort is dropped. The kernel
// drops them the same way at the last unmount of any FUSE mount (it
// aborts the connection then), and nothing is lost: the close returned
// after its FLUSH, and what a Release would journal (a mapping's or a
// passthrough writer's unseen writes) journalAll journals, the node
// being still live.

// abortWait bounds how long Unmount lets requests that other mount
// namespaces keep sending be answered before it aborts the connection
// with them pending (their callers get errors).
const abortWait = 5 * time.Second

// detach unmounts mnt from this mount namespace: umount(2), or, when this
// process may not (not root), fusermount -u as go-fuse would.
func detach(mnt string) error {
	err := unix.Unmount(mnt, 0)
	if err == nil || os.Geteuid() == 0 || !errors.Is(err, unix.EPERM) {
		return err
	}
	bin, lerr := fusermount()
	if lerr != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-u", mnt)
	cmd.Stderr = &stderr
	if rerr := cmd.Run(); rerr != nil {
		if stderr.Len() > 0 {
			if bytes.Contains(stderr.Bytes(), []byte("busy")) {
				return fmt.Errorf("%s: %w", bytes.TrimSpace(stderr.Bytes()), unix.EBUSY)
			}
			return fmt.Errorf("%s: %w", bytes.TrimSpace(stderr.Bytes()), rerr)
		}
		return rerr
	}
	return nil
}

// fusermount finds fusermount3, else fusermount, on $PATH or in /bin.
func fusermount() (string, error) {
	for _, name := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		if p := filepath.Join("/bin", name); executable(p) {
			return p, nil
		}
	}
	return "", errors.New("no fusermount3 or fusermount")
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// awaitServed returns once the serve loops have ended after the mount
// was detached from our namespace. When another namespace keeps the
// connection alive, the connection is aborted as soon as the kernel has
// no request of it waiting, or after abortWait whatever it has (see
// above); without ctl the wait is the kernel's.
func (f *FS) awaitServed(ctl *fusectl.Conn) {
	if ctl == nil {
		select {
		case <-f.served: // the kernel let go with our mount: the usual case
		case <-time.After(time.Second):
			f.logf("%s is still mounted in another mount namespace: waiting until it lets go", f.mountpoint)
			<-f.served
		}
		return
	}
	deadline := time.Now().Add(abortWait)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.served:
			return
		default:
		}
		n, alive := ctl.Waiting()
		if !alive {
			break // the connection is gone (the usual case): the loops are ending
		}
		if n == 0 || time.Now().After(deadline) {
			f.aborted.Store(true)
			if err := ctl.Abort(); err != nil {
				f.logf("%v", err)
			}
			break
		}
		<-tick.C
	}
	<-f.served // the readers end at once; a request being handled finishes first
}

// fuseLog passes go-fuse's messages on to the mount's log, less the
// failed replies of requests the abort cut off (their callers got an
// error from the kernel; the reply had nowhere to go).
func (f *FS) fuseLog(line string) {
	if f.aborted.Load() && strings.Contains(line, "Write/Writev failed") {
		return
	}
	f.log(line)
}
