package overlay

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is one file, directory, symlink or fifo. Its in-memory attributes
// are authoritative: every change goes through the node and the journal.
type node struct {
	fs.Inode
	fsys *FS
	ino  int64
	// pino is the st_ino the node reports (statfid.go): the host
	// file's inode number or a synthetic one, settled when it went live.
	pino uint64

	jmu sync.Mutex // serializes journaling of this file's content

	mu    sync.Mutex
	attr  journal.Attr
	ctime int64
	nlink int
	upper string // private copy holding the current content
	// upperSum is the manifest upper held when the daemon last wrote it
	// from the store or hashed it to journal it; while the node is not
	// dirty (and !ptWritten) upper still holds exactly that (kept.go).
	upperSum  cas.ID
	ptWritten bool // upper was open for writing by passthrough: it may hold writes never seen
	// forgotten: the kernel sent FORGET while the node still had opens
	// (the kernel may send a RELEASE after the FORGET): the last release
	// lets go of upper instead (afterRelease).
	forgotten bool
	// lowerDir, for a file made from the branch, is its parent's import
	// records (statfid.go), where its first read-only open finds its own
	// (file.go openLowerLocked) without a query.
	lowerDir *dirRecords
	// madeHere: the file was made in this session (statfid.go present),
	// so it is never the host's file and its opens ask for no import
	// record - each was a query, and a transaction, at the first
	// read-only open of every build-cache entry a same-session no-op go
	// install opened. Kept across renames: the content is still the
	// session's.
	madeHere bool
	// lowerStat caches the import's record of the host file (file.go
	// openLowerLocked); nil until the first read-only open.
	lowerStat *lowerStat
	inMem     bool   // else the current content is mem (no private copy yet)
	mem       []byte // contiguous from offset 0, at most memMax bytes
	// tail holds written bytes at tailOff that upper does not have yet
	// (tail.go); only with upper set, nil when not gathering.
	tail    []byte
	tailOff int64
	// Neither upper nor inMem: the content is attr.Content, read from the
	// store by readStore through layout (its manifest, cached) until
	// storeRead bytes reach storeReadMax.
	layout    *cas.Layout
	storeRead int64
	opens     int
	// Of opens, how many are served by FUSE passthrough (passthrough.go):
	// to the host file (lowerOpens), or to upper (ptOpens, ptWriters of
	// them open for writing). The kernel refuses to mix passthrough and
	// daemon-served opens of one inode, or two backing files.
	lowerOpens int
	ptOpens    int
	ptWriters  int
	// releases counts RELEASEs of the node's files in flight, from
	// before its handle's Release until go-fuse's bridge has finished
	// with it (rawFS.Release): see openPassthroughLocked.
	releases  int
	lowerUsed bool  // a host file was a backing file: never upper (passthrough.go)
	ptTimes   bool  // upper's mtime is the file's (passthrough writers write it)
	mapped    bool  // a mapping may write upper unseen (passthrough.go)
	jmtime    int64 // the mtime the journal holds for the file
	atime     int64 // set by utimensat; kept in memory only (the store does not version atime); 0 = mtime

	// Where the node's one name is, for stale (parent 0: unknown).
	parent int64
	name   string

	// The directory's listing (listing.go): valid while listingGen ==
	// fsys.gen; listVer counts its edits. Its directory rows hold while
	// listingGone == fsys.dirsGone.
	listing     map[string]listEnt
	listingGen  uint64
	listingGone uint64
	listVer     uint64
	// loaded: a directory whose children the journal has loaded (it
	// stays so): listAhead lists only such (an empty result then means
	// no entries, not "not loaded").
	loaded bool
	misses int                 // lookups by query since the listing was last valid
	snaps  [snapsKept]*dirSnap // listings served to READDIR, newest first (readdir.go)
	// recs are the import records of the directory's children that may
	// report host stats (statfid.go), read once: recsRead.
	recs     *dirRecords
	recsRead bool

	dirty   atomic.Bool // upper or mem differs from attr.Content
	pending uint32      // attributes (journal.SetMode...) changed in attr since the last journal; only while dirty

	// appending: since the content was last emptied, every change was a
	// daemon-served write at its end, which is now seqEnd; stream follows
	// such a file into the store (stream.go). Cleared by any other change
	// and by journal. Guarded by mu.
	appending bool
	seqEnd    int64
	stream    *fileStream
}

var (
	_ fs.NodeLookuper      = (*node)(nil)
	_ fs.NodeGetattrer     = (*node)(nil)
	_ fs.NodeSetattrer     = (*node)(nil)
	_ fs.NodeReaddirer     = (*node)(nil)
	_ fs.NodeMkdirer       = (*node)(nil)
	_ fs.NodeCreater       = (*node)(nil)
	_ fs.NodeOpener        = (*node)(nil)
	_ fs.NodeUnlinker      = (*node)(nil)
	_ fs.NodeRmdirer       = (*node)(nil)
	_ fs.NodeRenamer       = (*node)(nil)
	_ fs.NodeSymlinker     = (*node)(nil)
	_ fs.NodeReadlinker    = (*node)(nil)
	_ fs.NodeLinker        = (*node)(nil)
	_ fs.NodeMknoder       = (*node)(nil)
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
	_ fs.NodeStatfser      = (*node)(nil)
	_ fs.NodeOnForgetter   = (*node)(nil)
)

func (f *FS) newNode(jn journal.Node) *node {
	n := &node{fsys: f, ino: jn.Ino, pino: syntheticIno(jn.Ino), loaded: jn.NlinkKnown()}
	n.load(jn)
	if jn.IsDir() {
		f.mu.Lock()
		if m, ok := f.dirMTimes[jn.Ino]; ok {
			n.attr.MTime = m // a forgotten node's, still being journaled (OnForget)
		}
		f.mu.Unlock()
	}
	return n
}

func (n *node) load(jn journal.Node) {
	n.attr, n.ctime, n.nlink = jn.Attr, jn.CTime, jn.Nlink
	n.jmtime = jn.MTime
}

func typeBits(k cas.EntryKind) uint32 {
	switch k {
	case cas.EntryDir:
		return syscall.S_IFDIR
	case cas.EntrySymlink:
		return syscall.S_IFLNK
	case cas.EntryFifo:
		return syscall.S_IFIFO
	case cas.EntrySocket:
		return syscall.S_IFSOCK
	}
	return syscall.S_IFREG
}

// child returns the live inode for journal node jn, called name in n,
// creating it if needed.
// fromBranch is false for a node just made in the session.
func (n *node) child(ctx context.Context, name string, jn journal.Node, fromBranch bool) *fs.Inode {
	if existing := n.fsys.relive(jn.Ino); existing != nil {
		return &existing.Inode
	}
	c := n.fsys.newNode(jn)
	if jn.Nlink == 1 {
		c.parent, c.name = n.ino, name
	}
	n.present(ctx, c, name, fromBranch)
	if !fromBranch && jn.IsDir() {
		c.noRecords()
	} else if jn.IsDir() {
		n.childRecords(c, name)
	}
	in := n.NewInode(ctx, c, fs.StableAttr{Mode: typeBits(jn.Kind), Ino: uint64(jn.Ino)})
	if got, ok := in.Operations().(*node); ok && got == c {
		n.fsys.mu.Lock()
		n.fsys.nodes[jn.Ino] = c
		n.fsys.mu.Unlock()
	}
	return in
}

// relive returns the live node numbered ino, which a lookup is handing
// to the kernel again, or nil. We are the only writer: its state is
// current.
func (f *FS) relive(ino int64) *node {
	c := f.live(ino)
	if c != nil {
		c.mu.Lock()
		c.forgotten = false // the kernel knows it again
		c.mu.Unlock()
	}
	return c
}

var _ fs.NodeOnForgetter = (*node)(nil)

func (n *node) OnForget() {
	f := n.fsys
	n.mu.Lock()
	mtime := n.attr.MTime
	keep := n.dirty.Load() || n.mapped // its upper holds what the journal does not (yet)
	// A removed directory (Rmdir set its count to 0) is in no listing:
	// its forget voids no rows (rm -r forgets every directory it removes).
	dir := n.attr.Kind == cas.EntryDir && n.nlink > 0
	n.mu.Unlock()
	f.mu.Lock()
	_, touched := f.touched[n]
	delete(f.touched, n)
	if f.nodes[n.ino] == n && !keep {
		if dir {
			// Before it stops being live: a lookup that finds it not
			// live must also find the listings' rows of directories
			// void (listing.go), since this one may have changed while
			// live.
			f.dirsGone.Add(1)
		}
		delete(f.nodes, n.ino)
		f.unclaimLocked(n)
	}
	if touched {
		// Its mtime lives only in this node until journaled below; a
		// lookup racing with that must not build the journal's old one
		// (newNode takes it from here).
		f.dirMTimes[n.ino] = mtime
	}
	f.mu.Unlock()
	if touched {
		n.journalMTime(context.Background())
		f.mu.Lock()
		if f.dirMTimes[n.ino] == mtime {
			delete(f.dirMTimes, n.ino)
		}
		f.mu.Unlock()
	}
	// Not while the content is being journaled (Flush, the watcher):
	// journal clears dirty while it reads upper, which must stay this
	// node's until it is done.
	n.jmu.Lock()
	defer n.jmu.Unlock()
	n.mu.Lock()
	n.forgotten = true
	n.layout = nil // a big file's manifest: read again if the kernel asks again
	n.dropUpperLocked()
	n.dropMemLocked()
	n.mu.Unlock()
}

// dropUpperLocked lets go of the private copy of a forgotten node that
// nothing has open and that holds nothing the journal lacks: kept for a
// later open of the same content, or removed if passthrough may have
// written it unseen, or if the file has no name left. A deleted file's
// copy is rarely opened again, and keeping it cost a writeback of all of
// it (a 1 GiB download deleted after use wrote 1 GiB more to the disk in
// the background). The caller holds n.jmu and n.mu.
func (n *node) dropUpperLocked() {
	if n.opens == 0 && n.upper != "" && !n.dirty.Load() && !n.mapped && n.tail == nil {
		if n.ptWritten || n.ptWriters > 0 || n.nlink <= 0 {
			os.Remove(n.upper)
		} else {
			n.fsys.kept.put(n.upperSum, n.upper) // removes it unless kept
		}
		n.upper, n.upperSum = "", cas.ID{}
	}
}

// afterRelease finishes what OnForget could not when the kernel's RELEASE
// of the last open arrives after its FORGET (they travel on different
// queues): without it the private copy would stay until unmount.
func (n *node) afterRelease() {
	n.mu.Lock()
	forgotten := n.forgotten
	n.mu.Unlock()
	if !forgotten {
		return
	}
	n.jmu.Lock()
	defer n.jmu.Unlock()
	n.mu.Lock()
	if n.forgotten {
		n.dropUpperLocked()
	}
	n.mu.Unlock()
}

// fill writes the node's attributes; the caller holds n.mu.
func (n *node) fillLocked(out *fuse.Attr) {
	out.Ino = uint64(n.ino)
	out.Mode = typeBits(n.attr.Kind) | n.attr.Mode
	out.Uid, out.Gid = n.attr.UID, n.attr.GID
	if o := n.fsys.owner; o != nil {
		out.Uid, out.Gid = o.UID, o.GID
	}
	out.Nlink = uint32(n.nlink)
	out.Size = uint64(n.attr.Size)
	if n.attr.Kind == cas.EntrySymlink {
		out.Size = uint64(len(n.attr.Link))
	}
	out.Blocks = (out.Size + 4095) / 4096 * 8 // as ext4 counts a file without holes
	switch {
	case n.upper != "":
		var st unix.Stat_t
		if unix.Stat(n.upper, &st) == nil {
			out.Size, out.Blocks = uint64(st.Size), uint64(st.Blocks)
			if end := n.tailOff + int64(len(n.tail)); len(n.tail) > 0 && end > st.Size {
				// Gathered bytes past the private copy's end (tail.go),
				// counted as ext4 would once written.
				out.Size, out.Blocks = uint64(end), out.Blocks+uint64((end-st.Size+4095)/4096*8)
			}
		}
	case n.inMem: // as ext4 would count it: 4 KiB blocks
		out.Size, out.Blocks = uint64(len(n.mem)), uint64((len(n.mem)+4095)/4096*8)
	}
	if n.attr.Kind == cas.EntryDir {
		out.Size, out.Blocks = 4096, 8
	}
	out.Blksize = 4096
	mtime, ctime := n.attr.MTime, n.ctime
	if n.ptTimes {
		if t, ok := n.upperMTimeLocked(); ok {
			// Written by passthrough: a write moved both times.
			mtime, ctime = t, max(ctime, t)
		}
	}
	out.Mtime, out.Mtimensec = uint64(mtime/1e9), uint32(mtime%1e9)
	out.Atime, out.Atimensec = out.Mtime, out.Mtimensec
	if n.atime != 0 {
		out.Atime, out.Atimensec = uint64(n.atime/1e9), uint32(n.atime%1e9)
	}
	out.Ctime, out.Ctimensec = uint64(ctime/1e9), uint32(ctime%1e9)
}

func (n *node) fillEntry(out *fuse.EntryOut) {
	n.mu.Lock()
	n.fillLocked(&out.Attr)
	n.mu.Unlock()
}

var _ fs.NodeGetattrer = (*node)(nil)

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterruptible(ctx)
	n.mu.Lock()
	n.fillLocked(&out.Attr)
	n.mu.Unlock()
	return 0
}

var _ fs.NodeLookuper = (*node)(nil)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterruptible(ctx)
	if len(name) > 255 { // FUSE passes names up to 1024 bytes; NAME_MAX is ours to enforce
		return nil, syscall.ENAMETOOLONG
	}
	n.mu.Lock()
	l := n.listingLocked()
	if l == nil {
		n.misses++
		switch {
		case n.misses >= lookupsBeforeListing:
			n.misses = 0
			n.mu.Unlock()
			n.list(ctx) // on failure, one lookup at a time as before
			n.mu.Lock()
			l = n.listingLocked()
		case n.misses == 1:
			// A small directory is listed at once: its listing costs
			// about what the query for this one name does.
			n.mu.Unlock()
			n.listUpTo(ctx, smallListing) // too big, or failed: a query
			n.mu.Lock()
			l = n.listingLocked()
		}
	}
	var e listEnt
	gone := n.listingGone
	if l != nil {
		var listed bool
		if e, listed = l[name]; !listed {
			n.mu.Unlock()
			return nil, syscall.ENOENT
		}
	}
	n.mu.Unlock()
	cached := e.jn
	if cached != nil && cached.IsDir() {
		// A directory's row is its state at the listing's read; a live
		// node of it is current, and once that was dropped the row is
		// not to be trusted (it may have changed while live). Checked
		// in that order: OnForget moves dirsGone before it drops the
		// node.
		if c := n.fsys.relive(e.ino); c != nil {
			c.fillEntry(out)
			return &c.Inode, 0
		}
		if gone != n.fsys.dirsGone.Load() {
			cached = nil
		}
	}
	if cached == nil && e.ino != 0 {
		// A listed name the listing holds no node for (a directory, a
		// hard link, a changed file) whose node is live: its state is
		// current, so the query would only find its number, which the
		// listing has. The kernel looks a directory up again at every
		// mkdir of its name (it revalidates the dentry for O_EXCL
		// semantics): npm's mkdir -p before each file, 24,000 queries in
		// an npm ci.
		if c := n.fsys.relive(e.ino); c != nil {
			c.fillEntry(out)
			return &c.Inode, 0
		}
	}
	var jn journal.Node
	if cached != nil {
		jn = *cached
	} else {
		n.fsys.stats.lookupQueries.Add(1)
		err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
			var err error
			jn, err = tx.Lookup(n.ino, []byte(name))
			return err
		})
		if err != nil {
			return nil, n.fsys.errno(err)
		}
	}
	in := n.child(ctx, name, jn, true)
	in.Operations().(*node).fillEntry(out)
	return in, 0
}

// smallListing is the most entries a directory may hold to be listed at
// the first name looked up in it. Listing it costs one query and a row per
// entry; a query for the one name, one query: so a small directory is
// listed at once (git status, find, a new session's cold stats: Go's tree
// holds 4.5 files per directory, node_modules 7), while a path walked
// through a big one reads at most smallListing+1 names of it before the
// query (docs/architecture.md, "Listings").
const smallListing = 64

// lookupsBeforeListing is how many names Lookup finds by a query each in
// a directory without a listing before it reads the whole listing
// instead: in a new session (or after the kernel forgot a directory) a
// stat of each of its files then costs one read of it, not a query per
// name. The second name looked up lists it: a path walked through a
// directory looks up one name there, git status every name, and most
// directories of a source tree hold fewer than 16 (Go's: 4.5 files on
// average), so with 16 nearly every lookup of a first git status was a
// query (docs/architecture.md, "Listings", has the measurements).
const lookupsBeforeListing = 2

var _ fs.NodeReaddirer = (*node)(nil)

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx = uninterruptible(ctx)
	des, err := n.list(ctx)
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	return fs.NewListDirStream(n.dirEntries(ctx, des)), 0
}

// dirEntries is directory n's listing as FUSE directory entries.
func (n *node) dirEntries(ctx context.Context, des []journal.Dirent) []fuse.DirEntry {
	out := make([]fuse.DirEntry, len(des))
	for i := range des {
		d := &des[i]
		out[i] = fuse.DirEntry{Name: string(d.Name), Mode: typeBits(d.Node.Kind), Ino: n.entIno(ctx, string(d.Name), &d.Node)}
	}
	return out
}

// list reads the directory and makes what it read its listing.
func (n *node) list(ctx context.Context) ([]journal.Dirent, error) {
	des, _, err := n.listUpTo(ctx, 0)
	return des, err
}

// listUpTo is list for a directory of at most max entries (max > 0);
// a bigger one is not listed (ok false). max 0: any size.
func (n *node) listUpTo(ctx context.Context, max int) (des []journal.Dirent, ok bool, err error) {
	// Before reading: an edit during the read keeps what it read out.
	gen, gone := n.fsys.gen.Load(), n.fsys.dirsGone.Load()
	n.mu.Lock()
	ver := n.listVer
	n.mu.Unlock()
	n.fsys.stats.listQueries.Add(1)
	err = n.fsys.tx(ctx, func(tx *journal.Tx) error {
		var err error
		if max > 0 {
			des, ok, err = tx.ReadDirUpTo(n.ino, max)
		} else {
			ok = true
			des, err = tx.ReadDir(n.ino)
		}
		return err
	})
	if err != nil || !ok {
		return nil, false, err
	}
	listing := listingOf(des)
	n.mu.Lock()
	if n.listVer == ver {
		n.listing, n.listingGen, n.listingGone = listing, gen, gone
	}
	n.loaded = true // the read loaded its children
	n.mu.Unlock()
	return des, true, nil
}

// listingOf is a listing of entries des as the journal gave them.
func listingOf(des []journal.Dirent) map[string]listEnt {
	listing := make(map[string]listEnt, len(des))
	for i := range des {
		d := &des[i]
		if d.Node.IsDir() && !d.Node.NlinkKnown() || !d.Node.IsDir() && d.Node.Nlink != 1 {
			listing[string(d.Name)] = listEnt{ino: d.Node.Ino}
		} else {
			listing[string(d.Name)] = listEnt{ino: d.Node.Ino, jn: &d.Node}
		}
	}
	return listing
}

// aheadMax is the most entries listAhead reads for a directory's
// subdirectories in all: an ls of a directory whose subdirectories hold
// much more than the kernel then asks for pays at most this many rows.
const aheadMax = 2048

// listAhead lists live subdirectories subs of d that have no listing, in
// one query, as READDIRPLUS has just handed them to the kernel: a program
// that lists a tree (find, du, rm -r, a listing walk) reads each of them
// next. Each listing is installed as list would (unless an edit came
// first); best effort: on a failure or too many entries each is listed
// on its own when read.
func (d *node) listAhead(ctx context.Context, subs []*node) {
	gen, gone := d.fsys.gen.Load(), d.fsys.dirsGone.Load()
	vers := make([]uint64, len(subs))
	inos := make([]int64, len(subs))
	for i, c := range subs {
		c.mu.Lock()
		vers[i], inos[i] = c.listVer, c.ino
		c.mu.Unlock()
	}
	d.fsys.stats.listQueries.Add(1)
	d.fsys.stats.aheadQueries.Add(1)
	var lists map[int64][]journal.Dirent
	var ok bool
	err := d.fsys.tx(ctx, func(tx *journal.Tx) error {
		var err error
		lists, ok, err = tx.ReadSubdirs(inos, aheadMax)
		return err
	})
	if err != nil || !ok {
		return
	}
	for i, c := range subs {
		listing := listingOf(lists[c.ino]) // none: a loaded directory with no entries
		c.mu.Lock()
		if c.listVer == vers[i] && c.listingLocked() == nil {
			c.listing, c.listingGen, c.listingGone = listing, gen, gone
		}
		c.mu.Unlock()
	}
}

func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

func now() int64 { return time.Now().UnixNano() }

// create makes a child in one transaction and returns its live inode.
func (n *node) create(ctx context.Context, name string, a journal.Attr, out *fuse.EntryOut) (*node, *fs.Inode, syscall.Errno) {
	a.UID, a.GID = caller(ctx)
	if o := n.fsys.recordOwner; o != nil {
		a.UID, a.GID = o.UID, o.GID
	}
	if n.attr.Mode&syscall.S_ISGID != 0 { // BSD group semantics under a setgid directory
		a.GID = n.attr.GID
		if a.Kind == cas.EntryDir {
			a.Mode |= syscall.S_ISGID
		}
	}
	a.MTime = now()
	var jn journal.Node
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		if a.Kind == cas.EntryFile {
			m, err := n.fsys.emptyManifest(tx, ctx)
			if err != nil {
				return err
			}
			a.Content = m
		}
		var err error
		jn, err = tx.Create(n.ino, []byte(name), a)
		return err
	})
	if err != nil {
		return nil, nil, n.fsys.errno(err)
	}
	n.touchDir()
	n.listSet(name, jn.Ino, &jn)
	in := n.child(ctx, name, jn, false)
	c := in.Operations().(*node)
	if a.Kind == cas.EntryDir {
		c.mu.Lock()
		if c.listing == nil && c.listVer == 0 { // new and empty
			c.listing, c.listingGen = map[string]listEnt{}, c.fsys.gen.Load()
		}
		c.mu.Unlock()
	}
	c.fillEntry(out)
	return c, in, 0
}

// journalMTime records a directory's in-memory mtime.
func (n *node) journalMTime(ctx context.Context) error {
	n.mu.Lock()
	mtime := n.attr.MTime
	n.mu.Unlock()
	return n.fsys.tx(ctx, func(tx *journal.Tx) error {
		_, err := tx.SetAttr(n.ino, journal.SetMTime, journal.Attr{MTime: mtime})
		if errors.Is(err, syscall.ENOENT) {
			return nil // removed since
		}
		return err
	})
}

// touchDir records that the directory's entries changed now.
func (n *node) touchDir() {
	n.mu.Lock()
	n.attr.MTime, n.ctime = now(), now()
	n.mu.Unlock()
	n.fsys.mu.Lock()
	n.fsys.touched[n] = struct{}{}
	n.fsys.mu.Unlock()
}

var _ fs.NodeMkdirer = (*node)(nil)

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterruptible(ctx)
	_, in, errno := n.create(ctx, name, journal.Attr{Kind: cas.EntryDir, Mode: mode & 0o7777}, out)
	if errno == 0 {
		n.mu.Lock()
		n.nlink++
		n.mu.Unlock()
	}
	return in, errno
}

var _ fs.NodeSymlinker = (*node)(nil)

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterruptible(ctx)
	_, in, errno := n.create(ctx, name, journal.Attr{Kind: cas.EntrySymlink, Mode: 0o777, Link: []byte(target)}, out)
	return in, errno
}

var _ fs.NodeMknoder = (*node)(nil)

func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterruptible(ctx)
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		_, in, errno := n.create(ctx, name, journal.Attr{Kind: cas.EntryFifo, Mode: mode & 0o7777}, out)
		return in, errno
	case syscall.S_IFREG, 0:
		_, in, errno := n.create(ctx, name, journal.Attr{Kind: cas.EntryFile, Mode: mode & 0o7777}, out)
		return in, errno
	case syscall.S_IFSOCK:
		// bind(2) of a UNIX socket: the kernel keeps the bound socket with
		// its inode; the journal keeps the name for the mount's lifetime
		// and never puts it in a snapshot (cas.EntrySocket).
		_, in, errno := n.create(ctx, name, journal.Attr{Kind: cas.EntrySocket, Mode: mode & 0o7777}, out)
		return in, errno
	}
	return nil, syscall.EPERM // devices have no place in a workspace (docs/security.md)
}

var _ fs.NodeCreater = (*node)(nil)

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterruptible(ctx)
	c, in, errno := n.create(ctx, name, journal.Attr{Kind: cas.EntryFile, Mode: mode & 0o7777}, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// The new file is empty: O_TRUNC has nothing to do, and must not bump
	// the mtime the kernel just cached from this reply.
	fh, fuseFlags, errno := c.open(ctx, flags&^(syscall.O_CREAT|syscall.O_EXCL|syscall.O_TRUNC))
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// Its close commits the create, even from a read-only open.
	return in, fh, fuseFlags &^ fuse.FOPEN_NOFLUSH, 0
}

var _ fs.NodeLinker = (*node)(nil)

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterruptible(ctx)
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	var jn journal.Node
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		var err error
		jn, err = tx.Link(t.ino, n.ino, []byte(name))
		return err
	})
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	n.touchDir()
	n.listSet(name, t.ino, nil)
	t.mu.Lock()
	t.nlink, t.ctime = jn.Nlink, jn.CTime
	t.parent, t.name = 0, "" // several names now
	t.mu.Unlock()
	t.stale()
	t.fillEntry(out)
	return &t.Inode, 0
}

// removeChild looks name up and removes it with remove, in one
// transaction, and returns the removed node if it is still live (open
// somewhere) so the caller can correct its link count.
func (n *node) removeChild(ctx context.Context, name string, remove func(tx *journal.Tx, parent int64, name []byte) error) (*node, syscall.Errno) {
	var ino int64
	nlink, dir := 0, false
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		c, err := tx.Lookup(n.ino, []byte(name))
		if err != nil {
			return err
		}
		ino, nlink, dir = c.Ino, c.Nlink, c.IsDir()
		return remove(tx, n.ino, []byte(name))
	})
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	n.touchDir()
	n.listDel(name)
	if nlink > 1 && !dir {
		// A file's other names hold the old link count. A directory's
		// count of 2 or more is no other name: voiding every listing
		// there made rm -r read every directory it emptied again.
		n.fsys.gen.Add(1)
	}
	return n.fsys.live(ino), 0
}

var _ fs.NodeUnlinker = (*node)(nil)

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = uninterruptible(ctx)
	if n.unlinkBehind(ctx, name) {
		return 0
	}
	c, errno := n.removeChild(ctx, name, (*journal.Tx).Unlink)
	if c != nil {
		c.lostName()
	}
	return errno
}

// lostName updates a live (open) node that one of its names was unlinked
// from: fstat must show the new link count and ctime.
func (c *node) lostName() {
	c.mu.Lock()
	c.nlink--
	c.ctime = now()
	c.mu.Unlock()
}

// unlinkBehind unlinks name without waiting for the journal (behind.go)
// when the listing knows it as a file with one link; false when the
// journal must decide.
func (n *node) unlinkBehind(ctx context.Context, name string) bool {
	f := n.fsys
	if f.behind == nil {
		return false
	}
	pid := callerPid(ctx)
	parent, bname := n.ino, []byte(name)
	// The file: its live node (whose state is current) or, without one,
	// what the listing cached of it.
	var ino int64
	if in := n.GetChild(name); in == nil {
	} else if c, ok := in.Operations().(*node); ok {
		c.mu.Lock()
		if c.attr.Kind != cas.EntryDir && c.nlink == 1 {
			ino = c.ino
		}
		c.mu.Unlock()
	}
	n.mu.Lock()
	l := n.listingLocked()
	e, listed := l[name]
	if ino == 0 && e.jn != nil && !e.jn.IsDir() {
		ino = e.jn.Ino
	}
	// Queued under n.mu, so the queue's order is the listing's.
	if !listed || ino == 0 || !f.behind.push(pid, func(tx *journal.Tx) error { return tx.Unlink(parent, bname) }) {
		n.mu.Unlock()
		return false
	}
	delete(l, name)
	n.listVer++
	n.mu.Unlock()
	f.changed.Store(true)
	f.stats.unlinksBehind.Add(1)
	n.touchDir()
	if c := f.live(ino); c != nil {
		c.lostName()
	}
	f.noteCaller(ctx, pid)
	return true
}

var _ fs.NodeRmdirer = (*node)(nil)

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = uninterruptible(ctx)
	c, errno := n.removeChild(ctx, name, (*journal.Tx).Rmdir)
	if errno != 0 {
		return errno
	}
	n.mu.Lock()
	n.nlink--
	n.mu.Unlock()
	if c != nil { // still open somewhere: fstat must say it is gone
		c.mu.Lock()
		c.nlink, c.ctime = 0, now()
		c.mu.Unlock()
	}
	return 0
}

var _ fs.NodeRenamer = (*node)(nil)

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = uninterruptible(ctx)
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	var moved, replaced journal.Node
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		var err error
		if moved, err = tx.Lookup(n.ino, []byte(name)); err != nil {
			return err
		}
		replaced, _ = tx.Lookup(np.ino, []byte(newName))
		return tx.Rename(n.ino, []byte(name), np.ino, []byte(newName), flags)
	})
	if err != nil {
		return n.fsys.errno(err)
	}
	n.touchDir()
	np.touchDir()
	if flags&journal.RenameExchange != 0 {
		n.listSet(name, replaced.Ino, nil)
		if c := n.fsys.live(replaced.Ino); c != nil && replaced.Nlink == 1 {
			c.setName(n.ino, name)
		}
	} else {
		n.listDel(name)
	}
	np.listSet(newName, moved.Ino, nil)
	if c := n.fsys.live(moved.Ino); c != nil && moved.Nlink == 1 {
		c.setName(np.ino, newName)
	}
	if replaced.Nlink > 1 {
		n.fsys.gen.Add(1) // its other entries hold the old link count
	}
	// Refresh link counts the rename changed (directories moving between
	// parents, a replaced target).
	return n.refresh(ctx, n.ino, np.ino, moved.Ino, replaced.Ino)
}

// refresh reloads the in-memory state of live nodes from the journal.
func (n *node) refresh(ctx context.Context, inos ...int64) syscall.Errno {
	type state struct {
		c     *node
		jn    journal.Node
		found bool
	}
	var states []state
	for _, ino := range inos {
		n.fsys.mu.Lock()
		c := n.fsys.nodes[ino]
		n.fsys.mu.Unlock()
		if ino != 0 && c != nil {
			states = append(states, state{c: c})
		}
	}
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		for i := range states {
			jn, err := tx.Get(states[i].c.ino)
			switch {
			case err == nil:
				states[i].jn, states[i].found = jn, true
			case !errors.Is(err, syscall.ENOENT):
				return err
			}
		}
		return nil
	})
	if err != nil {
		return n.fsys.errno(err)
	}
	for _, s := range states { // node locks only outside the journal lock
		s.c.mu.Lock()
		if s.found {
			s.c.nlink, s.c.ctime = s.jn.Nlink, s.jn.CTime
		} else {
			s.c.nlink = 0
		}
		s.c.mu.Unlock()
	}
	return 0
}

var _ fs.NodeReadlinker = (*node)(nil)

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = uninterruptible(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.attr.Kind != cas.EntrySymlink {
		return nil, syscall.EINVAL
	}
	return append([]byte(nil), n.attr.Link...), 0
}

var _ fs.NodeSetattrer = (*node)(nil)

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterruptible(ctx)
	if sz, ok := in.GetSize(); ok {
		if errno := n.truncate(ctx, int64(sz)); errno != 0 {
			return errno
		}
	}
	var mask uint32
	var a journal.Attr
	if m, ok := in.GetMode(); ok {
		mask, a.Mode = mask|journal.SetMode, m&0o7777
	}
	if u, ok := in.GetUID(); ok {
		mask, a.UID = mask|journal.SetUID, u
	}
	if g, ok := in.GetGID(); ok {
		mask, a.GID = mask|journal.SetGID, g
	}
	if mt, ok := in.GetMTime(); ok {
		mask, a.MTime = mask|journal.SetMTime, mt.UnixNano()
	}
	if at, ok := in.GetATime(); ok {
		n.mu.Lock()
		n.atime = at.UnixNano()
		n.mu.Unlock()
	}
	if mask&(journal.SetUID|journal.SetGID) != 0 && mask&journal.SetMode == 0 {
		// chown clears setuid/setgid on files, as the kernel would.
		n.mu.Lock()
		if n.attr.Kind == cas.EntryFile && n.attr.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			mask, a.Mode = mask|journal.SetMode, n.attr.Mode&^(syscall.S_ISUID|syscall.S_ISGID)
		}
		n.mu.Unlock()
	}
	if mask != 0 && mask&^(journal.SetMode|journal.SetUID|journal.SetGID|journal.SetMTime) == 0 && n.setAttrDirty(mask, a) {
		mask = 0
	}
	if mask != 0 {
		var jn journal.Node
		err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
			var err error
			jn, err = tx.SetAttr(n.ino, mask, a)
			return err
		})
		if err != nil {
			return n.fsys.errno(err)
		}
		// Only what was set: a directory's mtime and a file being
		// written live in memory ahead of the journal.
		n.mu.Lock()
		if mask&journal.SetMode != 0 {
			n.attr.Mode = jn.Mode
		}
		if mask&journal.SetUID != 0 {
			n.attr.UID = jn.UID
		}
		if mask&journal.SetGID != 0 {
			n.attr.GID = jn.GID
		}
		if mask&journal.SetMTime != 0 {
			n.attr.MTime, n.jmtime = jn.MTime, jn.MTime
			if n.ptTimes {
				n.setUpperMTimeLocked(jn.MTime)
			}
		}
		n.ctime = jn.CTime
		n.mu.Unlock()
	}
	n.stale()
	return n.Getattr(ctx, f, out)
}

// setAttrDirty applies mode, owner and mtime changes to a file whose
// content is not journaled yet in memory only, and reports whether it
// did: they are journaled with the content (journal). tar x sets every
// file's mtime, owner and mode between its last write and its close;
// a transaction each cost a fifth of the daemon's CPU. Holding jmu
// orders it with journal, which takes the pending changes.
func (n *node) setAttrDirty(mask uint32, a journal.Attr) bool {
	n.jmu.Lock()
	defer n.jmu.Unlock()
	n.mu.Lock()
	if !n.dirty.Load() {
		if n.ptWriters == 0 && !n.mapped {
			n.mu.Unlock()
			return false
		}
		// Written unseen: the content is journaled again at the writer's
		// release or by the watcher anyway.
		n.dirty.Store(true)
	}
	if mask&journal.SetMode != 0 {
		n.attr.Mode = a.Mode & 0o7777
	}
	if mask&journal.SetUID != 0 {
		n.attr.UID = a.UID
	}
	if mask&journal.SetGID != 0 {
		n.attr.GID = a.GID
	}
	if mask&journal.SetMTime != 0 {
		n.attr.MTime = a.MTime
		if n.ptTimes {
			n.setUpperMTimeLocked(a.MTime) // read back by getattr and journal
		}
	}
	n.pending |= mask &^ journal.SetMTime // the content's event carries the mtime
	n.ctime = now()
	n.mu.Unlock()
	return true
}

// truncate sets a file's size and journals it at once.
func (n *node) truncate(ctx context.Context, size int64) syscall.Errno {
	n.mu.Lock()
	if n.attr.Kind == cas.EntryDir {
		n.mu.Unlock()
		return syscall.EISDIR
	}
	if n.attr.Kind != cas.EntryFile {
		n.mu.Unlock()
		return syscall.EINVAL
	}
	var err error
	if size != 0 {
		n.dropStreamLocked()
	}
	switch {
	case size == 0:
		err = n.emptyLocked()
	case n.inMem && size <= int64(len(n.mem)):
		n.mem = n.mem[:size] // shrinking leaves no hole
	default:
		err = n.truncateUpperLocked(ctx, size)
	}
	n.attr.MTime = now()
	n.mu.Unlock()
	if err != nil {
		return n.fsys.errno(err)
	}
	n.dirty.Store(true)
	err = n.journal(ctx, false)
	n.mu.Lock()
	n.dropMemLocked()
	n.mu.Unlock()
	return n.fsys.errno(err)
}

// dropMemLocked lets go of in-memory content the store holds now (no
// handle open, journaled). The caller holds n.mu.
func (n *node) dropMemLocked() {
	if n.opens == 0 && n.inMem && !n.dirty.Load() {
		n.inMem, n.mem = false, nil
	}
}

// truncateUpperLocked sets the size of the private copy, making one if
// needed. The caller holds n.mu.
func (n *node) truncateUpperLocked(ctx context.Context, size int64) error {
	if err := n.ensureUpperLocked(ctx); err != nil {
		return err
	}
	if err := n.flushTailLocked(false); err != nil {
		return err
	}
	if n.fsys.quota.Load() > 0 {
		var st unix.Stat_t
		if unix.Stat(n.upper, &st) == nil && size > st.Size && n.fsys.reserve(size-st.Size) < size-st.Size {
			return syscall.ENOSPC
		}
	}
	return os.Truncate(n.upper, size)
}

// Fsync of a directory (FSYNCDIR, and fsync on a node without a handle)
// makes every change so far durable.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(fs.FileFsyncer); ok {
		return h.Fsync(ctx, flags)
	}
	return n.fsys.errno(n.fsys.sync())
}

var _ fs.NodeFsyncer = (*node)(nil)

var _ fs.NodeStatfser = (*node)(nil)

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx = uninterruptible(ctx)
	return n.fsys.statfs(out)
}

// Extended attributes: user.* are stored; other namespaces hold nothing
// (reads say ENODATA) and cannot be set (EOPNOTSUPP).
