package overlay

import (
	"container/list"
	"os"
	"sync"

	"github.com/artrt/art/cas"
	"golang.org/x/sys/unix"
)

// Private copies kept across a kernel forget.
//
// When the kernel forgets a file (drop_caches, memory pressure, many
// files opened), its node goes and, before, its private copy with it: the
// next open copied the whole file out of the store again (decompress and
// verify every chunk), which made a cold re-read of a large file a
// quarter of the disk's speed. A clean private copy - one known to hold
// exactly the content of a manifest - is now kept instead, by that
// manifest's id, and a later open of a file with that content takes it
// over as its own private copy (and is served by passthrough from it).
//
// A copy is known clean (node.upperSum) when the daemon wrote it from the
// store (verified chunk by chunk) or read and hashed it to journal it,
// and no write could have reached it unseen since: every write through
// the daemon marks the node dirty, and a node whose copy was ever open
// for writing by passthrough (node.ptWritten) - written by the kernel
// directly, or by a shared mapping that outlives its open - is never
// kept. A kept copy has one owner at a time: the cache, or the one node
// that took it (take removes it), so no open of one file can reach
// another file's content. Two forgotten files with the same content keep
// one copy; the other is removed.
//
// The cache is bounded by the copies' disk usage (least recently kept
// first out) and emptied at unmount, with the upper directory.

// defaultKeptMax bounds the kept copies when Options.KeepCopies is 0; a
// quarter of the upper directory's free space at mount, if less. A kept
// copy takes no more space than the file took while it was open, and a
// copy the cache turns away costs a whole copy-out at the next open: at
// 1 GiB, a 2 GiB file written and read again in one session (the kernel
// forgot it between) was read at a quarter of the disk's speed.
const defaultKeptMax = 8 << 30

// keptCopies is the cache. Its zero value keeps nothing.
type keptCopies struct {
	mu    sync.Mutex
	max   int64 // bytes on disk; <= 0: keep nothing
	bytes int64
	byID  map[cas.ID]*list.Element
	lru   list.List // of *keptCopy, most recently kept at the front
}

type keptCopy struct {
	id   cas.ID
	path string
	size int64 // on disk (allocated blocks, at least one)
}

// keptMax is the bound for a mount: opt as Options.KeepCopies says.
func keptMax(opt int64, upperDir string) int64 {
	if opt != 0 {
		return opt
	}
	m := int64(defaultKeptMax)
	var st unix.Statfs_t
	if unix.Statfs(upperDir, &st) == nil {
		m = min(m, int64(st.Bavail)*st.Bsize/4)
	}
	return m
}

// put hands the private copy at path, holding exactly manifest id, to
// the cache, which removes it when it does not keep it.
func (k *keptCopies) put(id cas.ID, path string) {
	var st unix.Stat_t
	if id.IsZero() || unix.Stat(path, &st) != nil {
		os.Remove(path)
		return
	}
	// At least a block: a copy all holes still costs an inode.
	c := &keptCopy{id: id, path: path, size: max(st.Blocks*512, 4096)}
	var drop []string
	k.mu.Lock()
	if _, dup := k.byID[id]; dup || k.max <= 0 || c.size > k.max {
		drop = append(drop, path)
	} else {
		if k.byID == nil {
			k.byID = map[cas.ID]*list.Element{}
		}
		k.byID[id] = k.lru.PushFront(c)
		k.bytes += c.size
		for k.bytes > k.max {
			old := k.lru.Remove(k.lru.Back()).(*keptCopy)
			delete(k.byID, old.id)
			k.bytes -= old.size
			drop = append(drop, old.path)
		}
	}
	k.mu.Unlock()
	for _, p := range drop {
		os.Remove(p)
	}
}

// take returns the path of a kept copy of manifest id, which is the
// caller's from now on, or "" when none is kept.
func (k *keptCopies) take(id cas.ID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.byID[id]
	if !ok {
		return ""
	}
	c := k.lru.Remove(e).(*keptCopy)
	delete(k.byID, id)
	k.bytes -= c.size
	return c.path
}

// clear removes every kept copy (at unmount) and keeps nothing more.
func (k *keptCopies) clear() {
	k.mu.Lock()
	var drop []string
	for e := k.lru.Front(); e != nil; e = e.Next() {
		drop = append(drop, e.Value.(*keptCopy).path)
	}
	k.lru.Init()
	k.byID, k.bytes, k.max = nil, 0, 0
	k.mu.Unlock()
	for _, p := range drop {
		os.Remove(p)
	}
}

// usage reports how many copies are kept and their bytes on disk.
func (k *keptCopies) usage() (int, int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lru.Len(), k.bytes
}
