package overlay

import (
	"fmt"
	"sync"
	"syscall"
)

// A file written in small write calls past the in-memory limit (memMax)
// cost one pwrite to its private copy per FUSE WRITE: a third of the
// daemon's CPU per 4 KiB write, on the path the writer waits for. Small
// contiguous writes are gathered instead in the node's tail (node.tail at
// node.tailOff) and written to the private copy in one pwrite when the
// tail is full, when a write does not continue it, and before anything
// else looks at or changes the private copy: a read, lseek, fallocate,
// truncation, passthrough open, and the journal at flush, fsync and
// release. So every byte is journaled exactly as before; only the
// private copy, which nothing else reads, lags behind by at most tailMax
// bytes. A failed pwrite keeps the tail and fails the request that
// needed it (the next read, or the close, which returns the error
// instead of journaling).
//
// Not gathered: writes of a handle opened O_SYNC, O_DSYNC or O_APPEND,
// large writes, and writes while the node has passthrough opens or a
// mapping, or its private copy's mtime is the file's (ptTimes).
const (
	tailMax    = 1 << 20  // a node's tail buffer
	tailBudget = 64 << 20 // all nodes' tail buffers together
	tailWrite  = 64 << 10 // larger writes go to the private copy at once
)

var tailBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, tailMax)
	return &b
}}

// gatherLocked adds a write at off to the node's tail if it can, and
// reports whether it did. When it did not, the private copy holds every
// earlier write (the tail is written out first), so the caller's own
// pwrite lands in order. The caller holds n.mu and has upper open.
func (n *node) gatherLocked(h *handle, data []byte, off int64) (bool, error) {
	if len(data) > tailWrite || h.flags&(syscall.O_DSYNC|syscall.O_APPEND) != 0 ||
		n.ptOpens > 0 || n.mapped || n.ptTimes || n.upper == "" {
		return false, n.flushTailLocked(false)
	}
	if n.tail != nil && off == n.tailOff+int64(len(n.tail)) && len(n.tail)+len(data) <= cap(n.tail) {
		n.tail = append(n.tail, data...)
		return true, nil
	}
	// Not a continuation, or the tail is full: write it out, and start
	// again at off.
	if err := n.flushTailLocked(true); err != nil {
		return false, err
	}
	if n.tail == nil {
		if n.fsys.tailBytes.Add(tailMax) > tailBudget {
			n.fsys.tailBytes.Add(-tailMax)
			return false, nil // the private copy directly, as before
		}
		n.tail = (*tailBufs.Get().(*[]byte))[:0]
	}
	n.tailOff = off
	n.tail = append(n.tail, data...)
	return true, nil
}

// flushTailLocked writes the tail to the private copy. With keep, the
// emptied buffer stays with the node for the next writes; else it is
// given back. On error the tail is kept, unwritten. The caller holds n.mu.
func (n *node) flushTailLocked(keep bool) error {
	if n.tail == nil {
		return nil
	}
	if len(n.tail) > 0 {
		fd, err := syscall.Open(n.upper, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("write gathered bytes of inode %d: %w", n.ino, err)
		}
		b, off := n.tail, n.tailOff
		for len(b) > 0 && err == nil {
			var w int
			w, err = syscall.Pwrite(fd, b, off)
			if err == syscall.EINTR {
				err = nil
				continue
			}
			if err == nil && w == 0 {
				err = syscall.EIO
			}
			b, off = b[max(w, 0):], off+int64(max(w, 0))
		}
		if cerr := syscall.Close(fd); err == nil {
			err = cerr
		}
		if err != nil {
			// What was written stays written; the rest is retried.
			n.tail, n.tailOff = append(n.tail[:0], b...), off
			return fmt.Errorf("write gathered bytes of inode %d: %w", n.ino, err)
		}
		n.tail = n.tail[:0]
	}
	if !keep {
		n.dropTailLocked()
	}
	return nil
}

// dropTailLocked discards the tail and gives its buffer back (a
// truncation to zero voids it). The caller holds n.mu.
func (n *node) dropTailLocked() {
	if n.tail == nil {
		return
	}
	b := n.tail[:0]
	n.tail, n.tailOff = nil, 0
	tailBufs.Put(&b)
	n.fsys.tailBytes.Add(-tailMax)
}
