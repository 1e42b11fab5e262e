package overlay

import (
	"os"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/artrt/art/internal/fusectl"
	"github.com/artrt/art/internal/fuseuring"
)

// Requests over io_uring.
//
// A FUSE request is a round trip: the caller's system call blocks, the
// daemon reads the request from /dev/fuse, answers it with a write and
// reads again. Most of what the agent's inner loop costs in the mount
// (git status, git grep, find, rm -rf: tens of thousands of LOOKUPs,
// GETATTRs, OPENs, RELEASEs) is these round trips, not the daemon's
// work. Since Linux 6.14 the kernel can hand requests over io_uring
// instead (internal/fuseuring): one queue per CPU, a request queued on
// its caller's CPU, the reply and the wait for the next request one
// system call. Measured on the FUSE floor (go-fuse's loopback node with
// art's options) over a 15k-file repository, git status twice, git grep,
// find and du took 0.60x the wall time and 0.64x the CPU of the classic
// transport (docs/benchmarks.md, "Requests over io_uring").
//
// It is used as root (the mount is then art's own direct mount, so the
// daemon holds the /dev/fuse descriptor the rings register on) when the
// kernel has it; art switches the fuse module's enable_uring on, which
// lets any FUSE server on the host that asks for the transport use it
// (others are served as before). ART_FUSE_URING=0 keeps the classic
// transport and leaves the switch alone. A connection that asked for
// io_uring holds every request until each queue has a ring, so the rings
// are set up before the mount and only their registration is left after
// INIT; a registration the kernel refuses makes it serve the connection
// through /dev/fuse again (fuseuring.Prepare, Serve).
//
// An INTERRUPT of a request served over a ring reaches go-fuse's Server,
// which does not know the request: the handler runs to its end and the
// caller gets its answer then (art's handlers do not wait on anything the
// caller could give up).

var uringOnce struct {
	sync.Once
	ok bool
}

// uringWanted reports whether mounts of this process serve over
// io_uring: as root, unless ART_FUSE_URING=0, when the kernel has the
// transport (switched on here if it is off).
func uringWanted() bool {
	if os.Getenv("ART_FUSE_URING") == "0" || os.Geteuid() != 0 {
		return false
	}
	uringOnce.Do(func() { uringOnce.ok = fuseuring.SwitchOn() })
	return uringOnce.ok
}

// serveURing mounts and serves raw at mountpoint with the rings
// (fuseuring.MountServe). A registration the kernel refused leaves the
// mount served through /dev/fuse, said in the log; one that could not be
// submitted (not seen) leaves the connection holding every request: it
// is ended and the mount detached, and the caller mounts the classic
// way. On an error nothing is left mounted.
func serveURing(raw fuse.RawFileSystem, mountpoint string, mo fuse.MountOptions, logf func(string, ...any)) (*fuse.Server, *fuseuring.Rings, error) {
	server, rings, err := fuseuring.MountServe(raw, mountpoint, mo, fuseuring.Options{Threads: fuseuring.DefaultThreads, Entries: 1, MaxPayload: mo.MaxWrite})
	switch {
	case err == nil:
		return server, rings, nil
	case server == nil:
		return nil, nil, err
	case !fuseuring.Stuck(err):
		logf("%s: requests over io_uring: %v", mountpoint, err)
		return server, rings, nil
	}
	if id, conn := fusectl.MountID(mountpoint); id != 0 {
		if ctl := fusectl.Open(conn); ctl != nil {
			ctl.Abort()
			ctl.Close()
		}
	}
	unix.Unmount(mountpoint, unix.MNT_DETACH)
	server.Wait()
	rings.Wait()
	return nil, nil, err
}
