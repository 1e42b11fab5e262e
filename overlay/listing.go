package overlay

import (
	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// Directory listings in memory.
//
// A directory's listing (node.listing) maps every name in it to its
// node's number and the node as last read, or no node when the entry must
// be read again (hard-linked files; anything changed since; a directory
// whose children the journal has not loaded, whose link count the
// listing's row lacks). Lookup answers from it
// without SQL: a name it lacks is ENOENT (tar x looks up every name before
// creating it), a cached node builds the inode readdirplus asks for, and
// a number whose node is live answers from that node. Readdir fills it,
// a new directory starts with an empty one, and every change through the
// mount updates the one listing it touches:
//
//   - create, mkdir, symlink, link, unlink, rmdir and rename edit their
//     directories' listings;
//   - a change to a file's attributes or content (stale) voids its entry
//     in its parent's listing: a file with one name knows where that is
//     (node.parent, node.name);
//   - a change to a file with several names, whose other entries it
//     cannot find, voids every listing (FS.gen).
//
// listVer counts a directory's listing edits, so a Readdir racing with
// one does not install what it read before it.
//
// A subdirectory's row is kept as read, not edited: what changes a
// directory (entries made or removed in it: its link count and times;
// its own attributes) happens while the kernel holds it, so its live node
// is current and Lookup answers from that. Once the kernel forgot a
// directory (OnForget counts it in FS.dirsGone), the rows of listings
// read before may be stale, and Lookup asks the journal instead. So
// READDIRPLUS, whose bridge looks every entry up, hands the kernel a
// tree's subdirectories without a query each (find, du, rm -r in a new
// session).

// listingLocked returns the directory's valid listing or nil. The caller
// holds d.mu.
func (d *node) listingLocked() map[string]listEnt {
	if d.listing == nil || d.listingGen != d.fsys.gen.Load() {
		return nil
	}
	return d.listing
}

// listEnt is one name of a listing: its node's number (0: unknown) and,
// when the listing may hand it out, the node as last read.
type listEnt struct {
	ino int64
	jn  *journal.Node
}

// listSet records that name is in d, the node numbered ino (0: unknown);
// jn, when not nil, is that node now.
func (d *node) listSet(name string, ino int64, jn *journal.Node) {
	if jn != nil && jn.IsDir() {
		jn = nil
	}
	d.mu.Lock()
	d.listVer++
	if l := d.listingLocked(); l != nil {
		l[name] = listEnt{ino: ino, jn: jn}
	}
	d.mu.Unlock()
}

// listDel records that name is no longer in d.
func (d *node) listDel(name string) {
	d.mu.Lock()
	d.listVer++
	if l := d.listingLocked(); l != nil {
		delete(l, name)
	}
	d.mu.Unlock()
}

// setName records where the node's one name is (parent 0: unknown, or
// several names).
func (n *node) setName(parent int64, name string) {
	n.mu.Lock()
	n.parent, n.name = parent, name
	n.mu.Unlock()
}

// stale notes that the node's attributes or content changed: listings
// must not hand out what they cached of it.
func (n *node) stale() {
	n.mu.Lock()
	dir, parent, name, nlink := n.attr.Kind == cas.EntryDir, n.parent, n.name, n.nlink
	n.mu.Unlock()
	if dir {
		return // a live directory answers from itself (Lookup)
	}
	if parent == 0 || nlink != 1 {
		n.fsys.gen.Add(1)
		return
	}
	if d := n.fsys.live(parent); d != nil {
		d.mu.Lock()
		d.listVer++
		if l := d.listingLocked(); l != nil {
			if e, ok := l[name]; ok {
				l[name] = listEnt{ino: e.ino}
			}
		}
		d.mu.Unlock()
	}
}
