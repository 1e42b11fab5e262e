package overlay

import (
	"context"
	"syscall"

	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Extended attributes live in the journal with the node (journal.Attr's
// Xattrs), so they are part of every snapshot, diff and push. Only the
// user namespace can be set or removed: the others (security., trusted.,
// system.) would let data decide policy on the host a state is pulled to.

var (
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
)

// isUser says whether name is in the user namespace.
func isUser(name string) bool { return len(name) > 5 && name[:5] == "user." }

// Getxattr reads one attribute from the node's copy of its journal attrs.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	ctx = uninterruptible(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range n.attr.Xattrs {
		if x.Name == attr {
			if len(dest) == 0 {
				return uint32(len(x.Value)), 0
			}
			if len(dest) < len(x.Value) {
				return uint32(len(x.Value)), syscall.ERANGE
			}
			return uint32(copy(dest, x.Value)), 0
		}
	}
	return 0, syscall.ENODATA
}

// Listxattr lists the names, NUL-terminated.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	ctx = uninterruptible(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	var b []byte
	for _, x := range n.attr.Xattrs {
		b = append(append(b, x.Name...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Setxattr journals a user attribute (at most 64 KiB, as ext4 allows).
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	ctx = uninterruptible(ctx)
	if !isUser(attr) {
		return syscall.EOPNOTSUPP
	}
	n.mu.Lock()
	exists := false
	for _, x := range n.attr.Xattrs {
		exists = exists || x.Name == attr
	}
	n.mu.Unlock()
	switch {
	case flags&unix.XATTR_CREATE != 0 && exists:
		return syscall.EEXIST
	case flags&unix.XATTR_REPLACE != 0 && !exists:
		return syscall.ENODATA
	}
	if len(data) > 64<<10 {
		return syscall.E2BIG
	}
	var jn journal.Node
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		if err := tx.SetXattr(n.ino, attr, data); err != nil {
			return err
		}
		var err error
		jn, err = tx.Get(n.ino)
		return err
	})
	if err != nil {
		return n.fsys.errno(err)
	}
	n.mu.Lock()
	n.attr.Xattrs, n.ctime = jn.Xattrs, jn.CTime
	n.mu.Unlock()
	n.stale()
	return 0
}

// Removexattr journals the removal of a user attribute.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	ctx = uninterruptible(ctx)
	if !isUser(attr) {
		return syscall.ENODATA
	}
	var jn journal.Node
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		if err := tx.RemoveXattr(n.ino, attr); err != nil {
			return err
		}
		var err error
		jn, err = tx.Get(n.ino)
		return err
	})
	if err != nil {
		return n.fsys.errno(err)
	}
	n.mu.Lock()
	n.attr.Xattrs, n.ctime = jn.Xattrs, jn.CTime
	n.mu.Unlock()
	n.stale()
	return 0
}
