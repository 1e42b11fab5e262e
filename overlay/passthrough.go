package overlay

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FUSE passthrough of file contents.
//
// An open served by passthrough names a backing file; the kernel then
// reads, writes and maps that file itself, and the daemon sees only open,
// flush, fsync, release, setattr, fallocate and lseek. Two kernel rules
// shape what art may answer (fs/fuse/iomode.c): while an inode has a
// passthrough open, every new open of it must be passthrough to the same
// backing file, and while it has a daemon-served ("cached") open, none
// may be passthrough; a wrong answer fails the open with EIO. The
// kernel forgets an open before the daemon sees its RELEASE, so the
// daemon's counts (node.ptOpens, lowerOpens, the rest of opens) are never
// below the kernel's, and answering by them never breaks either rule.
//
// go-fuse keeps one backing id per inode and hands it to every
// passthrough open until its last release, after the daemon's Release
// returns. So a node's backing file must never change while one may be
// registered: upper, once made, keeps its path until the node is
// forgotten; and a node that ever served the host file (lowerUsed) never
// passes through to its upper - a stale backing id would let an open for
// writing reach the host file.
//
// go-fuse's bridge also drops a backing reference at the end of every
// release of a node that has a backing id, whether or not the released
// file took one. Had an open registered a backing file while a
// daemon-served file of the node was being released, that release would
// drop the open's reference and unregister the id under it: the kernel
// fails the open with EIO when its reply names an id gone by then, or the
// next open, which registers a second backing file for the inode. So the
// daemon counts releases in flight until the bridge is done with them
// (node.releases, rawFS.Release) and registers no backing file while one
// is, unless the inode has one in use already.
//
// Writers through passthrough are not seen write by write: a node open
// for writing that way (ptWriters) is journaled at every flush, fsync and
// release of a writer whether or not it looks dirty (an unchanged result
// records no event, but costs a read and hash of the file), and the upper file's mtime is
// the file's while it is written that way (ptTimes). A shared mapping
// outlives its open: the kernel maps the backing file itself and
// releases the FUSE file at close, so a mapping can go on writing the
// upper file with no request at all. After the last writer's release the
// daemon asks whether anything still has the upper file open for writing
// (a mapping holds a backing file that is); if so the node is "mapped":
// the mount's watcher re-journals it when its mtime moves and once more
// when the mapping is gone, and unmount and Flush journal it
// unconditionally. (An msync of such a mapping makes the private copy
// durable at once, the journal only at the watcher's next look.) Not
// passed through: forensic mode (every write request journaled), a quota
// (every write request counted), setuid/setgid files (the daemon clears
// those bits at the first write), and mounts where the kernel refuses
// backing files (Mount probes once). A node already open by passthrough
// must keep being opened that way, so a later quota, or a setuid bit set
// meanwhile, applies from its next first open.

// Release counts the release in flight on its node (node.releases) until
// go-fuse's bridge has finished it, the backing reference it drops
// included (see openPassthroughLocked).
func (r *rawFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	if n := r.f.live(int64(in.NodeId)); n != nil {
		n.mu.Lock()
		n.releases++
		n.mu.Unlock()
		defer func() {
			n.mu.Lock()
			n.releases--
			n.mu.Unlock()
			if fn := hooks.releaseDone.Load(); fn != nil {
				(*fn)(n.ino)
			}
		}()
	}
	r.RawFileSystem.Release(cancel, in)
}

// hooks are called, when set, by the daemon for tests to step in.
var hooks struct {
	// handleReleased: at the end of a daemon-served file's Release
	// (inside the bridge's release, before it drops a backing reference).
	handleReleased atomic.Pointer[func(ino int64)]
	// releaseDone: after the bridge has finished a file's release.
	releaseDone atomic.Pointer[func(ino int64)]
	// noLowerBacking: host files give the bridge no backing file.
	noLowerBacking atomic.Bool
	// writebackFails: how many more of the streams' sync_file_range
	// calls on their private copies fail with EIO (stream.go).
	writebackFails atomic.Int32
}

// ptMinCopy is the smallest file copied out of the store at an open, to
// be served by passthrough; smaller ones are served by the daemon (and
// the page cache) and copied out at their first read or write as before.
// A variable only for tests, which pass everything through.
var ptMinCopy int64 = 64 << 10

// ptEnabledLocked says whether an open of n may be served by passthrough
// to its upper file. The caller holds n.mu.
func (n *node) ptEnabledLocked() bool {
	f := n.fsys
	return f.ptOK.Load() && !f.journalWrites && f.quota.Load() == 0 && !n.lowerUsed &&
		n.attr.Mode&(syscall.S_ISUID|syscall.S_ISGID) == 0
}

// cachedOpensLocked counts the opens served by the daemon. The caller
// holds n.mu.
func (n *node) cachedOpensLocked() int { return n.opens - n.ptOpens - n.lowerOpens }

// openPassthroughLocked returns a handle served by passthrough to the
// upper file, or nil when this open must or should go through the daemon.
// modifies is whether the open writes or truncates. The caller holds n.mu.
func (n *node) openPassthroughLocked(ctx context.Context, flags uint32, modifies bool) (*ptHandle, error) {
	if n.cachedOpensLocked() > 0 || n.lowerOpens > 0 {
		return nil, nil // the kernel would refuse passthrough
	}
	if n.ptOpens == 0 {
		// Free to choose.
		if !n.ptEnabledLocked() {
			return nil, nil
		}
		if n.releases > 0 {
			return nil, nil // no backing file while a release is in flight (see above)
		}
		if n.upper == "" && (n.inMem || n.attr.Size < ptMinCopy || flags&syscall.O_TRUNC != 0) {
			// Small or about to be empty: the daemon serves it from
			// memory (a new file until it grows), or from the store
			// (readStore) and copies it out at the first write. A
			// private file per new file (and its removal) made tar x
			// half as slow again.
			return nil, nil
		}
		if n.upper == "" && !modifies && !n.takeKeptLocked() {
			// Read-only, and only in the store: the daemon reads what is
			// asked from the store (readStore) rather than copy the whole
			// file out first - a no-op go install opened a 30 MB binary
			// for its build ID, and copying it out was a third of the
			// daemon's CPU. A file read in full is copied out as it goes
			// on, and its later opens pass through.
			return nil, nil
		}
	}
	// With ptOpens > 0 the answer must be passthrough, to the same upper.
	trunc := flags&syscall.O_TRUNC != 0
	if err := n.ensureUpperLocked(ctx); err != nil {
		return nil, err
	}
	if trunc {
		if err := n.emptyLocked(); err != nil {
			return nil, err
		}
		n.attr.MTime = now()
	}
	// The backing file must hold every byte written so far: the kernel
	// reads and writes it directly from now on.
	if err := n.flushTailLocked(false); err != nil {
		return nil, err
	}
	// Read-only whatever the open's mode: the kernel opens the backing
	// file anew with the open's own flags, and a descriptor of ours open
	// for writing would hide a mapping's from openForWrite.
	fd, err := syscall.Open(n.upper, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if modifies {
		if !n.ptTimes {
			// From now on the upper file's mtime is the file's: writes
			// through passthrough move it, and getattr and journal read it.
			if err := n.setUpperMTimeLocked(n.attr.MTime); err != nil {
				syscall.Close(fd)
				return nil, err
			}
			n.ptTimes = true
		}
		n.ptWriters++
		n.ptWritten = true   // never kept after a forget (kept.go)
		n.dropStreamLocked() // its writes are not seen
	}
	n.ptOpens++
	n.opens++
	n.fsys.stats.ptOpens.Add(1)
	return &ptHandle{lf: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), n: n, write: modifies, flags: flags}, nil
}

// setUpperMTimeLocked sets the upper file's mtime (atime untouched). The
// caller holds n.mu.
func (n *node) setUpperMTimeLocked(mtime int64) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, n.upper, ts, 0)
}

// upperMTimeLocked is the upper file's mtime, and whether it could be
// read. The caller holds n.mu.
func (n *node) upperMTimeLocked() (int64, bool) {
	var st unix.Stat_t
	if n.upper == "" || unix.Stat(n.upper, &st) != nil {
		return 0, false
	}
	return st.Mtim.Nano(), true
}

// ptWriting says whether the file is open for writing by passthrough:
// its content may have changed without a request.
func (n *node) ptWriting() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ptWriters > 0
}

// ptUnseen says whether the file may have been written without a
// request: by a passthrough writer or a mapping.
func (n *node) ptUnseen() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ptWriters > 0 || n.mapped
}

var (
	_ fs.FilePassthroughFder = (*ptHandle)(nil)
	_ fs.FileReader          = (*ptHandle)(nil)
	_ fs.FileWriter          = (*ptHandle)(nil)
	_ fs.FileAllocater       = (*ptHandle)(nil)
	_ fs.FileLseeker         = (*ptHandle)(nil)
	_ fs.FileFlusher         = (*ptHandle)(nil)
	_ fs.FileFsyncer         = (*ptHandle)(nil)
	_ fs.FileReleaser        = (*ptHandle)(nil)
)

// ptHandle is an open file served by passthrough to the node's upper
// file. Reads and writes reach it only if the kernel declined
// passthrough (go-fuse then serves them from the same file).
type ptHandle struct {
	lf    *fs.LoopbackFile // on upper, read-only; its fd registers the backing file
	n     *node
	write bool   // opened for writing (or truncating)
	flags uint32 // the open's flags
}

var (
	_ fs.FilePassthroughFder = (*ptHandle)(nil)
	_ fs.FileReader          = (*ptHandle)(nil)
	_ fs.FileWriter          = (*ptHandle)(nil)
	_ fs.FileFlusher         = (*ptHandle)(nil)
	_ fs.FileFsyncer         = (*ptHandle)(nil)
	_ fs.FileReleaser        = (*ptHandle)(nil)
	_ fs.FileLseeker         = (*ptHandle)(nil)
	_ fs.FileAllocater       = (*ptHandle)(nil)
)

func (h *ptHandle) PassthroughFd() (int, bool) { return h.lf.PassthroughFd() }

func (h *ptHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, dest, off)
}

// withWritable runs fn on a descriptor of the upper file open for
// writing (with the open's O_APPEND), closed again at once: one left
// open would look like a mapping to openForWrite.
func (h *ptHandle) withWritable(fn func(fd int) error) syscall.Errno {
	if h.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return syscall.EBADF
	}
	h.n.mu.Lock()
	upper := h.n.upper
	h.n.mu.Unlock()
	fd, err := syscall.Open(upper, syscall.O_WRONLY|syscall.O_CLOEXEC|int(h.flags&syscall.O_APPEND), 0)
	if err != nil {
		return h.n.fsys.errno(err)
	}
	err = fn(fd)
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	return h.n.fsys.errno(err)
}

// Write is reached only if the kernel declined passthrough.
func (h *ptHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = uninterruptible(ctx)
	var w int
	errno := h.withWritable(func(fd int) error {
		var err error
		w, err = syscall.Pwrite(fd, data, off)
		return err
	})
	if w > 0 {
		h.n.changed(ctx)
	}
	return uint32(w), errno
}

func (h *ptHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	ctx = uninterruptible(ctx)
	errno := h.withWritable(func(fd int) error {
		return syscall.Fallocate(fd, mode, int64(off), int64(size))
	})
	if errno == 0 {
		h.n.changed(ctx)
	}
	return errno
}

// Lseek answers SEEK_DATA and SEEK_HOLE from the upper file.
func (h *ptHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

// force marks the content dirty when a passthrough writer may have
// changed it unseen.
func (h *ptHandle) force() {
	if h.write || h.n.ptWriting() {
		h.n.dirty.Store(true)
	}
}

func (h *ptHandle) Flush(ctx context.Context) syscall.Errno {
	ctx = uninterruptible(ctx)
	if h.write {
		h.n.dirty.Store(true)
	}
	return h.n.fsys.errno(h.n.journal(ctx, false))
}

func (h *ptHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx = uninterruptible(ctx)
	h.force()
	return h.n.fsys.errno(h.n.journal(ctx, true))
}

func (h *ptHandle) Release(ctx context.Context) syscall.Errno {
	ctx = uninterruptible(ctx)
	h.lf.Release(ctx)
	n := h.n
	n.mu.Lock()
	n.opens--
	n.ptOpens--
	last := false
	if h.write {
		n.ptWriters--
		last = n.ptWriters == 0
	}
	upper := n.upper
	n.mu.Unlock()
	if h.write {
		n.dirty.Store(true)
	}
	if last && openForWrite(upper) {
		n.fsys.watchMapped(n)
	}
	if !h.write && !n.dirty.Load() {
		n.afterRelease()
		return 0 // a reader's release: nothing to journal, and no commit to force
	}
	err := n.journal(ctx, false)
	n.afterRelease()
	return h.n.fsys.errno(err)
}

// openForWrite says whether anything has the file at path open for
// writing - a shared mapping made through a passthrough open holds such
// a file - by asking for a read lease, which the kernel grants only when
// nothing does (and which is given back at once). When it cannot tell,
// it says yes.
func openForWrite(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return !errors.Is(err, syscall.ENOENT)
	}
	defer unix.Close(fd)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		return true
	}
	unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return false
}

// mappedWatch is how often the watcher looks at mapped nodes.
const mappedWatch = 100 * time.Millisecond

// watchMapped marks n mapped: written through a mapping the daemon cannot
// see, until openForWrite says the mapping is gone.
func (f *FS) watchMapped(n *node) {
	n.mu.Lock()
	n.mapped = true
	n.dropStreamLocked()
	n.mu.Unlock()
	f.mu.Lock()
	f.mappedNodes[n] = struct{}{}
	start := !f.watching
	f.watching = true
	f.mu.Unlock()
	if start {
		f.watchWG.Add(1)
		go f.watch()
	}
}

// watch journals mapped nodes when their mtime moves, and once more when
// nothing has them open for writing any more; it ends when none is left
// or the mount is going (Unmount journals them all).
func (f *FS) watch() {
	defer f.watchWG.Done()
	t := time.NewTicker(mappedWatch)
	defer t.Stop()
	for {
		select {
		case <-f.watchStop:
			return
		case <-t.C:
		}
		f.mu.Lock()
		nodes := make([]*node, 0, len(f.mappedNodes))
		for n := range f.mappedNodes {
			nodes = append(nodes, n)
		}
		f.mu.Unlock()
		for _, n := range nodes {
			n.mu.Lock()
			upper, writers := n.upper, n.ptWriters
			mtime, _ := n.upperMTimeLocked()
			moved := mtime != n.jmtime
			n.mu.Unlock()
			gone := writers > 0 || !openForWrite(upper) // a writer's release looks again
			if gone {
				f.mu.Lock()
				delete(f.mappedNodes, n)
				f.mu.Unlock()
				n.mu.Lock()
				n.mapped = false
				n.mu.Unlock()
			}
			if gone || moved {
				n.dirty.Store(true)
				if err := n.journal(context.Background(), false); err != nil {
					f.logf("journal mapped inode %d: %v", n.ino, err)
				}
			}
			if gone {
				n.afterRelease() // forgotten while mapped: its copy can go now
			}
		}
		f.mu.Lock()
		if len(f.mappedNodes) == 0 {
			f.watching = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

// stopWatch ends the watcher and waits for it.
func (f *FS) stopWatch() {
	f.mu.Lock()
	if !f.watchStopped {
		f.watchStopped = true
		close(f.watchStop)
	}
	f.mu.Unlock()
	f.watchWG.Wait()
}

// probePassthrough says whether the kernel takes backing files from this
// mount's upper directory (root, CONFIG_FUSE_PASSTHROUGH, and an upper
// directory not itself on a stacked filesystem).
func (f *FS) probePassthrough() bool {
	if f.server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return false
	}
	file, err := f.newUpper()
	if err != nil {
		return false
	}
	defer os.Remove(file.Name())
	defer file.Close()
	id, errno := f.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(file.Fd())})
	if errno != 0 {
		return false
	}
	f.server.UnregisterBackingFd(id)
	return true
}
