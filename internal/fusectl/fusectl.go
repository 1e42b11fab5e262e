// Package fusectl reaches a FUSE connection through the kernel's FUSE
// control file system (fusectl): how many of its requests wait for an
// answer, and its abort.
//
// A FUSE connection lives as long as the last mount of its file system,
// and every mount namespace made while a mount exists (a bwrap sandbox, a
// container, any unshare -m) holds a copy of it. On a host whose mounts
// are private no unmount propagates to those copies: the umount in one's
// own namespace succeeds and the connection, and with it the server's
// loops, live on until the last such namespace dies. Aborting the
// connection ends it whoever holds a copy.
package fusectl

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// MountID identifies the mount at mnt: the kernel's mount id, and the
// FUSE connection's name in the control file system, which is the
// kernel's number for the mount's device (major<<20 | minor). Both are
// read without a request to the file system's server
// (AT_STATX_DONT_SYNC), so the server's own goroutines may ask. id is 0
// when mnt cannot be looked at.
func MountID(mnt string) (id uint64, conn string) {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, mnt, unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, ""
	}
	return stx.Mnt_id, strconv.FormatUint(uint64(stx.Dev_major)<<20|uint64(stx.Dev_minor), 10)
}

// Conn holds a FUSE connection's directory in the control file system
// and its "abort" file open. Opened while the connection exists, they
// stay bound to it: once it is gone "waiting" cannot be read through the
// directory and an abort does nothing, even when a new connection has
// taken its number - which is why they are opened before the unmount,
// while the mount (and so the number) is certainly the opener's.
type Conn struct {
	dirFD, abortFD int
}

// Dir is where hosts (systemd) mount the control file system.
const Dir = "/sys/fs/fuse/connections"

// Open opens the control files of connection name (MountID's conn):
// from the control file system where the host mounted it (writable by
// the mount's owner), else, as root, from a private instance that is
// never attached to any mount namespace (fsopen, fsmount). nil when
// neither works (not root on a host without it).
func Open(name string) *Conn {
	if name == "" {
		return nil
	}
	if c := openAt(unix.AT_FDCWD, filepath.Join(Dir, name)); c != nil {
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
	return openAt(mfd, name)
}

func openAt(dirfd int, dir string) *Conn {
	d, err := unix.Openat(dirfd, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	a, err := unix.Openat(d, "abort", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(d)
		return nil
	}
	return &Conn{dirFD: d, abortFD: a}
}

// Waiting is the kernel's count of requests sent or queued and not yet
// answered; ok is false once the connection is gone. The file is read
// afresh each time: the kernel counts at a read from offset 0, and the
// control files cannot seek.
func (c *Conn) Waiting() (n int, ok bool) {
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

// Abort ends the connection: pending requests fail, the readers of
// /dev/fuse get ENODEV, every later access ENOTCONN.
func (c *Conn) Abort() error {
	if _, err := unix.Write(c.abortFD, []byte("1")); err != nil {
		return fmt.Errorf("abort FUSE connection: %w", err)
	}
	return nil
}

// Close closes the control files.
func (c *Conn) Close() {
	unix.Close(c.dirFD)
	unix.Close(c.abortFD)
}
