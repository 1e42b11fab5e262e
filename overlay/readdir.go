package overlay

import (
	"context"
	"slices"
	"strings"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Directories are read without OPENDIR.
//
// With default_permissions the kernel checks access to a directory itself,
// so an OPENDIR would only cost two round trips (OPENDIR, RELEASEDIR) per
// opendir(3). Answering the first one ENOSYS makes the kernel stop sending
// them (no_opendir, Linux 5.1+): it then opens directories on its own, with
// FOPEN_KEEP_CACHE|FOPEN_CACHE_DIR, so a listing stays in its page cache
// until an entry changes through the mount. git status, which opens every
// directory of the work tree, then never reaches the daemon at all.
//
// Without an open handle a READDIR carries only the directory and an
// offset, so the daemon keeps what it served: a numbered snapshot of the
// listing per directory (node.snaps). An entry's offset (d_off) is
// snapshot<<32 | position+1; a READDIR resumes in the snapshot it names, so
// entries removed while a program reads a directory (rm's "read, unlink,
// read on") neither shift nor hide the ones after them. A new read from
// offset 0 reuses the newest snapshot while the directory is unchanged.

// rawFS is go-fuse's node bridge with the directory requests answered
// here. Node ids are art inode numbers (fs.Options.ExternalNodeID), so a
// READDIR finds its directory in FS.nodes.
type rawFS struct {
	fuse.RawFileSystem
	f      *FS
	server *fuse.Server
}

func (r *rawFS) Init(s *fuse.Server) {
	r.server = s
	r.RawFileSystem.Init(s)
}

// asked counts a request for the priming walk's quiet rule (prime.go)
// unless the walk sent it, and reports whether it counted.
func (r *rawFS) asked(h *fuse.InHeader) bool {
	if int32(h.Pid) == r.f.primeTid.Load() {
		return false
	}
	r.f.noteAsked()
	return true
}

// Lookup counts the kernel's LOOKUPs (Stats.Lookups): the round trips a
// primed mount saves (prime.go).
func (r *rawFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if r.asked(header) {
		r.f.stats.lookups.Add(1)
	}
	return r.RawFileSystem.Lookup(cancel, header, name, out)
}

// GetAttr counts the kernel's GETATTRs but the walk's (Stats.GetAttrs).
func (r *rawFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if r.asked(&in.InHeader) {
		r.f.stats.getattrs.Add(1)
	}
	return r.RawFileSystem.GetAttr(cancel, in, out)
}

func (r *rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if r.server.KernelSettings().Flags64()&fuse.CAP_NO_OPENDIR_SUPPORT != 0 {
		return fuse.ENOSYS
	}
	// An older kernel: the bridge opens it (node.OpendirHandle).
	return r.RawFileSystem.OpenDir(cancel, in, out)
}

func (r *rawFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	r.asked(&in.InHeader)
	if in.Fh != 0 {
		return r.RawFileSystem.ReadDir(cancel, in, out)
	}
	return r.readDir(cancel, in, out, false)
}

func (r *rawFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	r.asked(&in.InHeader)
	if in.Fh != 0 {
		return r.RawFileSystem.ReadDirPlus(cancel, in, out)
	}
	return r.readDir(cancel, in, out, true)
}

func (r *rawFS) readDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	d := r.f.live(int64(in.NodeId))
	if d == nil {
		// The kernel holds the directory, so we do: never expected.
		return fuse.EIO
	}
	r.f.stats.readdirs.Add(1)
	ctx := uninterruptible(&fuse.Context{Caller: in.Caller, Cancel: cancel})
	ents, errno := d.entriesFrom(ctx, in.Offset)
	if errno != 0 {
		return fuse.Status(errno)
	}
	var subs []*node // subdirectories handed to the kernel, without a listing
	for _, e := range ents {
		if !plus {
			if !out.AddDirEntry(e) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			break
		}
		// The bridge's LOOKUP hands the kernel the entry and counts the
		// reference, as its own READDIRPLUS does. An entry gone since the
		// snapshot keeps node id 0: the kernel then takes the name alone.
		hdr := fuse.InHeader{NodeId: in.NodeId, Caller: in.Caller}
		if st := r.RawFileSystem.Lookup(cancel, &hdr, e.Name, eo); !st.Ok() {
			*eo = fuse.EntryOut{}
			continue
		}
		if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if c := r.f.live(int64(eo.NodeId)); c != nil && c.wantsListing() {
				subs = append(subs, c)
			}
		}
	}
	if len(subs) > 0 {
		d.listAhead(ctx, subs)
	}
	return fuse.OK
}

// wantsListing reports whether directory c could take a listing read
// ahead: its children are loaded and it has no valid listing.
func (c *node) wantsListing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded && c.attr.Kind == cas.EntryDir && c.listingLocked() == nil
}

// dirSnap is a directory's listing as served to READDIR.
type dirSnap struct {
	id   uint64 // offset<<32 of its entries
	ver  uint64 // the directory's listVer when read
	gen  uint64 // FS.gen when read
	ents []fuse.DirEntry
}

// snapsKept is how many snapshots a directory keeps for readers still
// in the middle of an older one. A reader resuming in a snapshot dropped
// since - more than snapsKept listings of the directory, each after a
// change to it, were served meanwhile - continues at the same position in
// a fresh one, which can skip or repeat entries; the kernel's own cache
// keeps most readers off this path (it serves a stream it filled itself).
const snapsKept = 4

// entriesFrom returns the directory's entries after offset off.
func (d *node) entriesFrom(ctx context.Context, off uint64) ([]fuse.DirEntry, syscall.Errno) {
	id, pos := off&^(1<<32-1), off&(1<<32-1)
	d.mu.Lock()
	var snap *dirSnap
	for _, s := range d.snaps {
		if s == nil {
			continue
		}
		if off == 0 {
			if s.ver == d.listVer && s.gen == d.fsys.gen.Load() {
				snap = s
			}
			break // only the newest can be current
		}
		if s.id == id {
			snap = s
			break
		}
	}
	d.mu.Unlock()
	if snap == nil {
		// A new read, or one resuming in a snapshot dropped since (then
		// the position is a best effort in the fresh one).
		var errno syscall.Errno
		if snap, errno = d.snapshot(ctx); errno != 0 {
			return nil, errno
		}
	}
	if pos >= uint64(len(snap.ents)) {
		return nil, 0
	}
	return snap.ents[pos:], 0
}

// snapshot reads the listing and makes it the directory's newest
// snapshot.
func (d *node) snapshot(ctx context.Context) (*dirSnap, syscall.Errno) {
	d.mu.Lock()
	ver := d.listVer // before reading: an edit during the read makes it stale
	d.mu.Unlock()
	gen := d.fsys.gen.Load()
	// Offsets are signed to the kernel (loff_t): ids stay in 31 bits, never 0.
	s := &dirSnap{id: ((d.fsys.snapIDs.Add(1)-1)%(1<<31-1) + 1) << 32, ver: ver, gen: gen}
	ents, ok := d.listedEntries(ctx)
	if !ok {
		des, err := d.list(ctx)
		if err != nil {
			return nil, d.fsys.errno(err)
		}
		ents = d.dirEntries(ctx, des)
	}
	for i := range ents {
		ents[i].Off = s.id | uint64(i+1)
	}
	s.ents = ents
	d.mu.Lock()
	copy(d.snaps[1:], d.snaps[:snapsKept-1])
	d.snaps[0] = s
	d.mu.Unlock()
	return s, 0
}

// listedEntries builds the entries from the directory's listing in memory,
// in the journal's order (bytewise by name), when it is valid and every
// name in it is known: cached there, or a live inode (directories, which
// the listing does not cache). rm -rf lists every directory it empties;
// read by SQL that was 15% of its daemon CPU.
func (d *node) listedEntries(ctx context.Context) ([]fuse.DirEntry, bool) {
	d.mu.Lock()
	l := d.listingLocked()
	if l == nil {
		d.mu.Unlock()
		return nil, false
	}
	ents := make([]fuse.DirEntry, 0, len(l))
	var unknown []int                     // entries the listing holds no node for
	known := make([]journal.Node, len(l)) // by entry: the listing's node
	for name, e := range l {
		jn := e.jn
		if jn == nil {
			unknown = append(unknown, len(ents))
			ents = append(ents, fuse.DirEntry{Name: name})
			continue
		}
		known[len(ents)] = *jn
		ents = append(ents, fuse.DirEntry{Name: name, Mode: typeBits(jn.Kind)})
	}
	d.mu.Unlock()
	// The reported numbers need the import records, read under d.mu.
	// An entry the listing holds a node for has its type (never 0)
	// already; the others are live nodes, below.
	for i := range ents {
		if ents[i].Mode != 0 {
			ents[i].Ino = d.entIno(ctx, ents[i].Name, &known[i])
		}
	}
	for _, i := range unknown {
		in := d.GetChild(ents[i].Name)
		if in == nil {
			return nil, false
		}
		c, ok := in.Operations().(*node)
		if !ok {
			return nil, false
		}
		c.mu.Lock()
		ents[i].Mode, ents[i].Ino = typeBits(c.attr.Kind), c.pino
		c.mu.Unlock()
	}
	slices.SortFunc(ents, func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return ents, true
}
