package overlay

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"syscall"

	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A commit failure is never silent (docs/architecture.md, "Commit
// failure").
//
// The mount fails once it cannot journal: its Batch lost a transaction (a
// commit failed - a full disk, a failed fdatasync - SQLite failed under an
// update, or an update met a broken pack: journal.Batch.Failed), the
// store's fsync failed, an unlink already answered could not be journaled
// (behind.go), or the unmount could not journal what was still dirty.
// From then on:
//
//   - every request that would change the tree fails with the failure's
//     errno (ENOSPC stays ENOSPC) before it does anything: create, mkdir,
//     mknod, symlink, link, unlink, rmdir, rename, setattr, setxattr,
//     removexattr, write, fallocate, copy_file_range, and an open for
//     writing or with O_TRUNC;
//   - a close (FLUSH) or fsync fails the same way: it journals and
//     commits, and the Batch refuses both. Each close and fsync commits
//     before it returns, so one that returned 0 had committed; the
//     changes lost are those answered in the lost transaction's last few
//     milliseconds (namespace changes, writes of files not yet closed),
//     and their closes fail;
//   - reads keep working from what the store holds (the Batch runs
//     reads in transactions it rolls back), and from the kernel's caches;
//   - Unmount returns a *FailedError naming the paths whose changes the
//     store does not hold and counting the requests refused.
//
// The mount does not recover when space returns: the lost transaction
// held changes the kernel was told succeeded, which a retry could not put
// back in order with what followed. Failing closed keeps the rule simple:
// what a close or fsync acknowledged is in the store, and everything else
// is named.

// FailedError is Unmount's error for a mount that failed (see above).
type FailedError struct {
	Err error // the first failure
	// NotKept names paths the sandbox changed that the store does not
	// hold as it saw them (relative to the mount; the first maxNamed),
	// MoreNotKept counts the others.
	NotKept     []string
	MoreNotKept int
	// Refused counts the requests refused after the failure;
	// RefusedPaths names the first maxNamed of their paths.
	Refused      int64
	RefusedPaths []string
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("the store could not keep the mount's changes: %v", e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }

// Reason says in a few words why the mount failed and what it cost, for
// the record of its operation: "no space left on device; 3 paths not
// kept, 2 changes refused".
func (e *FailedError) Reason() string {
	why := e.Err.Error()
	if errno := failErrno(e.Err); errno != syscall.EIO || errors.Is(e.Err, syscall.EIO) {
		why = errno.Error()
	}
	n := len(e.NotKept) + e.MoreNotKept
	why += fmt.Sprintf("; %d %s not kept", n, plural(n, "path", "paths"))
	if e.Refused > 0 {
		why += fmt.Sprintf(", %d %s refused", e.Refused, plural(int(e.Refused), "change", "changes"))
	}
	return why
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// failErrno is the errno a failed mount answers with: the failure's own
// (ENOSPC stays ENOSPC), SQLite's mapped (journal.StorageErrno), else EIO.
// Unlike toErrno it logs nothing: every refused request would.
func failErrno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if e, ok := journal.StorageErrno(err); ok {
		return e
	}
	return syscall.EIO
}

// maxNamed bounds the paths a FailedError names.
const maxNamed = 100

// failures is what a failed mount could not keep and refused.
type failures struct {
	mu      sync.Mutex
	notKept journalPaths
	refused journalPaths
	nRefuse int64
}

// journalPaths is a set of paths in the order first seen, the first
// maxNamed kept and the rest counted (up to maxCounted: a sandbox
// creating files in a loop after the failure must not grow it forever).
type journalPaths struct {
	seen  map[string]bool
	paths []string
}

// maxCounted bounds the distinct paths a journalPaths counts.
const maxCounted = 1 << 16

func (p *journalPaths) add(s string) {
	if p.seen[s] || len(p.seen) >= maxCounted {
		return
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[s] = true
	if len(p.paths) < maxNamed {
		p.paths = append(p.paths, s)
	}
}

// more is how many paths were counted beyond those named.
func (p *journalPaths) more() int { return len(p.seen) - len(p.paths) }

// failure returns the mount's failure, or nil while it journals.
func (f *FS) failure() error {
	if f.batch == nil {
		return nil
	}
	return f.batch.Failed()
}

// fail makes the mount fail with err (no-op once failed).
func (f *FS) fail(err error) {
	if f.failure() == nil {
		f.batch.Fail(err)
	}
}

// notKept records that the change of p (a path in the mount) is not in
// the store.
func (f *FS) notKept(p string) {
	f.failures.mu.Lock()
	f.failures.notKept.add(p)
	f.failures.mu.Unlock()
}

// nodePath is n's path in the mount for messages: as the kernel last
// named it, else its inode.
func (n *node) nodePath() string {
	if p := n.Path(nil); p != "" || n.ino == journal.RootIno {
		return p
	}
	return fmt.Sprintf("(inode %d)", n.ino)
}

// failedError is the report of a failed mount, nil if it did not fail.
func (f *FS) failedError() error {
	err := f.failure()
	if err == nil {
		return nil
	}
	lost, more := f.batch.Lost()
	f.failures.mu.Lock()
	defer f.failures.mu.Unlock()
	all := journalPaths{}
	for _, p := range lost {
		all.add(p)
	}
	for _, p := range f.failures.notKept.paths {
		all.add(p)
	}
	for p := range f.failures.notKept.seen { // those not named: counted
		all.add(p)
	}
	return &FailedError{Err: err, NotKept: all.paths, MoreNotKept: all.more() + more,
		Refused: f.failures.nRefuse, RefusedPaths: append([]string(nil), f.failures.refused.paths...)}
}

// refuse returns the errno of the mount's failure for a request that would
// change the tree at name in directory dir (name "": dir itself), and
// counts it; OK while the mount journals. Every such request keeps the
// priming walk waiting (prime.go).
func (r *rawFS) refuse(dir uint64, name string) fuse.Status {
	r.f.noteAsked()
	err := r.f.failure()
	if err == nil {
		return fuse.OK
	}
	p := name
	if n := r.f.live(int64(dir)); n != nil {
		p = path.Join(n.nodePath(), name)
	}
	fs := &r.f.failures
	fs.mu.Lock()
	fs.nRefuse++
	fs.refused.add(p)
	fs.mu.Unlock()
	return fuse.Status(failErrno(err))
}

// The requests that change the tree, refused once the mount failed.

func (r *rawFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	const changes = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE | fuse.FATTR_MTIME | fuse.FATTR_MTIME_NOW
	if in.Valid&changes != 0 { // atime lives in memory only
		if st := r.refuse(in.NodeId, ""); !st.Ok() {
			return st
		}
	}
	return r.RawFileSystem.SetAttr(cancel, in, out)
}

func (r *rawFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Mknod(cancel, in, name, out)
}

func (r *rawFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (r *rawFS) Unlink(cancel <-chan struct{}, in *fuse.InHeader, name string) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Unlink(cancel, in, name)
}

func (r *rawFS) Rmdir(cancel <-chan struct{}, in *fuse.InHeader, name string) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Rmdir(cancel, in, name)
}

func (r *rawFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if st := r.refuse(in.NodeId, oldName); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (r *rawFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Link(cancel, in, name, out)
}

func (r *rawFS) Symlink(cancel <-chan struct{}, in *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Symlink(cancel, in, target, name, out)
}

func (r *rawFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if st := r.refuse(in.NodeId, ""); !st.Ok() {
		return st
	}
	return r.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (r *rawFS) RemoveXAttr(cancel <-chan struct{}, in *fuse.InHeader, attr string) fuse.Status {
	if st := r.refuse(in.NodeId, ""); !st.Ok() {
		return st
	}
	return r.RawFileSystem.RemoveXAttr(cancel, in, attr)
}

func (r *rawFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if st := r.refuse(in.NodeId, name); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Create(cancel, in, name, out)
	if st.Ok() {
		r.f.noteOpen(out.NodeId)
	}
	return st
}

func (r *rawFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if st := r.refuse(in.NodeId, ""); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Tmpfile(cancel, in, out)
}

func (r *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	r.asked(&in.InHeader)
	if in.Flags&(syscall.O_ACCMODE|syscall.O_TRUNC) != syscall.O_RDONLY {
		if st := r.refuse(in.NodeId, ""); !st.Ok() {
			return st
		}
	}
	st := r.RawFileSystem.Open(cancel, in, out)
	if st.Ok() {
		r.f.noteOpen(in.NodeId)
		if out.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 && r.f.ptOK.Load() {
			r.f.declined(in.NodeId)
		}
	}
	return st
}

// declined notes an open of node id that the bridge answered without
// passthrough. If the node has passthrough opens (to its private copy or
// its host file), this one was meant to be one too (the daemon never
// answers otherwise beside them): the bridge could not register its
// backing file - say a host file on a filesystem the kernel does not
// stack on - and go-fuse then registers none for the rest of the mount.
// So neither does the daemon count on passthrough from now on: its opens
// are all served by the daemon, which the kernel takes side by side.
func (f *FS) declined(id uint64) {
	n := f.live(int64(id))
	if n == nil {
		return
	}
	n.mu.Lock()
	meant := n.ptOpens > 0 || n.lowerOpens > 0
	n.mu.Unlock()
	if meant && f.ptOK.Swap(false) {
		f.logf("passthrough off for the rest of the mount: an open of inode %d was answered without it (its backing file could not be registered)", id)
	}
}

func (r *rawFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if st := r.refuse(in.NodeId, ""); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.Write(cancel, in, data)
}

func (r *rawFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if st := r.refuse(in.NodeId, ""); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.Writev(cancel, in, data)
}

func (r *rawFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if st := r.refuse(in.NodeIdOut, ""); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.CopyFileRange(cancel, in)
}

func (r *rawFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if st := r.refuse(in.NodeId, ""); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Fallocate(cancel, in)
}
