package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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
// system (/sys/fs/fuse/connections/N/abort; connCtl). Nothing is lost by
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

// mountID identifies the mount at mnt: the kernel's mount id, and the
// FUSE connection's name in the control file system, which is the
// kernel's number for the mount's device (major<<20 | minor). Both are
// read without a request to the daemon (AT_STATX_DONT_SYNC), so the
// daemon's own goroutines may ask.
func mountID(mnt string) (id uint64, conn string) {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, mnt, unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, ""
	}
	return stx.Mnt_id, strconv.FormatUint(uint64(stx.Dev_major)<<20|uint64(stx.Dev_minor), 10)
}

// connCtl holds a FUSE connection's directory in the control file
// system and its "abort" file open. Opened while the connection exists,
// they stay bound to it: once it is gone "waiting" cannot be read
// through the directory and an abort does nothing, even when a new
// connection has taken its number - which is why they are opened before
// the unmount, while the mount (and so the number) is certainly ours.
type connCtl struct {
	dirFD, abortFD int
}

// fusectlDir is where hosts (systemd) mount the control file system.
const fusectlDir = "/sys/fs/fuse/connections"

// openConnCtl opens the control files of connection name: from the
// control file system where the host mounted it (writable by the
// mount's owner), else, as root, from a private instance that is never
// attached to any mount namespace (fsopen, fsmount). nil when neither
// works (not root on a host without it): then Unmount waits for the
// kernel as before, unbounded.
func openConnCtl(name string) *connCtl {
	if name == "" {
		return nil
	}
	if c := openCtlAt(unix.AT_FDCWD, filepath.Join(fusectlDir, name)); c != nil {
		return c
	}
	fsfd, err := unix.Fsopen("fusectl", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil
	}
	defer unix.Close(fsfd)
	if unix.FsconfigCreate(fsfd) != nil {
		return nil
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	// The open files hold the detached mount; it goes when they close.
	// Closing the mount's own descriptor dissolves the private instance,
	// which waits for an RCU grace period (0.2-6 ms measured at load
	// 12): on another goroutine, off the mount's and unmount's path.
	defer func() { go unix.Close(mfd) }()
	return openCtlAt(mfd, name)
}

func openCtlAt(dirfd int, dir string) *connCtl {
	d, err := unix.Openat(dirfd, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	a, err := unix.Openat(d, "abort", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(d)
		return nil
	}
	return &connCtl{dirFD: d, abortFD: a}
}

// waiting is the kernel's count of requests sent or queued and not yet
// answered; ok is false once the connection is gone. The file is read
// afresh each time: the kernel counts at a read from offset 0, and the
// control files cannot seek.
func (c *connCtl) waiting() (n int, ok bool) {
	fd, err := unix.Openat(c.dirFD, "waiting", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var b [32]byte
	k, err := unix.Read(fd, b[:])
	if err != nil || k <= 0 {
		return 0, false
	}
	n, err = strconv.Atoi(string(bytes.TrimSpace(b[:k])))
	return n, err == nil
}

// abort ends the connection: pending requests fail, the readers of
// /dev/fuse get ENODEV, every later access ENOTCONN.
func (c *connCtl) abort() error {
	if _, err := unix.Write(c.abortFD, []byte("1")); err != nil {
		return fmt.Errorf("abort FUSE connection: %w", err)
	}
	return nil
}

func (c *connCtl) close() {
	unix.Close(c.dirFD)
	unix.Close(c.abortFD)
}

// awaitServed returns once the serve loops have ended after the mount
// was detached from our namespace. When another namespace keeps the
// connection alive, the connection is aborted as soon as the kernel has
// no request of it waiting, or after abortWait whatever it has (see
// above); without ctl the wait is the kernel's.
func (f *FS) awaitServed(ctl *connCtl) {
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
		n, alive := ctl.waiting()
		if !alive {
			break // the connection is gone (the usual case): the loops are ending
		}
		if n == 0 || time.Now().After(deadline) {
			f.aborted.Store(true)
			if err := ctl.abort(); err != nil {
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
