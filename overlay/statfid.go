package overlay

import (
	"context"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Stat fidelity: what git's index compares (st_ino, ctime, mtime, size,
// uid, gid) stays valid between the host and the mount for files nobody
// changed, so a repository captured from the host is not re-read by its
// first git status in a session (docs/architecture.md, "Stat fidelity").
//
// Node ids stay art inode numbers (fs.Options.ExternalNodeID: readdir and
// the failure path find nodes by them); only the st_ino a node reports
// differs. A node whose content is exactly what an import took from the
// host (its record in the branch's import cache, not racy) reports the
// host file's inode number, and, if its size, mtime and mode are also the
// record's, the host file's ctime: git then finds the entry as its index
// has it, and rightly, because the content is the one the host had at
// that stat. Every other node reports synthBase plus its art inode
// number, a range host inode numbers are never taken from, so no two
// live nodes report one number (claims settles a host number two nodes'
// records name: a hostile or stale store).

// synthBase is where the inode numbers of nodes without a host one
// begin. Host numbers are used only below it. 2^52 keeps every reported
// number exact in a float64 (JavaScript's fs.Stat.ino is one: numbers
// above 2^53 would make different files look the same to Node tools).
const synthBase = 1 << 52

// syntheticIno is what node ino reports without a host inode number.
func syntheticIno(ino int64) uint64 {
	if ino == journal.RootIno {
		return 1 // the mount's root, as before
	}
	if ino > 0 && ino < synthBase {
		return synthBase + uint64(ino)
	}
	// Only a hostile store holds such a node: its number is reported
	// as it is. It identifies nothing in the overlay (node ids do).
	return uint64(ino)
}

// hostInoOK reports whether a recorded host inode number may be
// reported: a store is hostile, and 0, the root's 1 and the synthetic
// range are never taken from it.
func hostInoOK(h uint64) bool { return h >= 2 && h < synthBase }

// recordFits reports whether node attributes a are what record c says an
// import brought in from the host (content, kind; mode where recorded),
// and whether its size and mtime are also the host's (then its ctime is).
func recordFits(a *journal.Attr, c *journal.StatCache) (ino, ctime bool) {
	if c.Racy || !hostInoOK(c.Ino) {
		// A racy stat may belong to content written after the one
		// imported: reporting it could hide a change from git.
		return false, false
	}
	kind := c.Kind
	if kind == 0 {
		kind = cas.EntryFile
	}
	if a.Kind != kind {
		return false, false
	}
	switch kind {
	case cas.EntryFile:
		if a.Content != c.Manifest {
			return false, false
		}
		if c.Mode != journal.ModeUnknown && a.Mode&0o7777 != c.Mode {
			return true, false
		}
		return true, a.Size == c.Size && a.MTime == c.MTime
	case cas.EntrySymlink:
		if cas.Sum(a.Link) != c.Manifest {
			return false, false
		}
		return true, int64(len(a.Link)) == c.Size && a.MTime == c.MTime
	}
	return false, false // directories and the rest: git indexes neither
}

// dirRecords are the import records of a directory's children by name,
// and the directory's node path they were read for ("ws/src", "" for the
// root): a child's open knows from it whether they are its path's.
type dirRecords struct {
	path string
	recs map[string]journal.StatCache
	// noneBelow: the import cache holds nothing at any depth below
	// path, as of FS.dirMoves == moves (no directory renamed since).
	// Subdirectories made from the branch then take an empty set for
	// their own paths instead of a query each (childRecords).
	noneBelow bool
	moves     uint64
}

// records returns the import records of directory d's children, read
// once per live directory (the branch's import cache does not change while
// it is mounted: the session holds the branch). On a failure it has none:
// the children then report synthetic numbers, nothing worse.
func (d *node) records(ctx context.Context) *dirRecords {
	d.mu.Lock()
	if d.recsRead {
		r := d.recs
		d.mu.Unlock()
		return r
	}
	d.mu.Unlock()
	moves := d.fsys.dirMoves.Load() // before the path: a rename since voids noneBelow
	p := strings.TrimSuffix(d.Path(nil), "/")
	var recs map[string]journal.StatCache
	noneBelow := false
	if t := d.fsys.recordTree(ctx); t.covers(storeDir(p)) {
		recs, noneBelow = t.dirs[storeDir(p)], !t.below[storeDir(p)]
	} else {
		d.fsys.stats.recordQueries.Add(1)
		err := d.fsys.tx(ctx, func(tx *journal.Tx) error {
			var err error
			if recs, err = tx.StatCacheDir(storeDir(p)); err != nil || len(recs) > 0 {
				return err
			}
			any, err := tx.HasStatCacheUnder(storeDir(p))
			noneBelow = !any
			return err
		})
		if err != nil {
			recs, noneBelow = nil, false
		}
		keepReportable(recs)
	}
	r := &dirRecords{path: p, noneBelow: noneBelow, moves: moves}
	if len(recs) > 0 {
		r.recs = recs
	}
	d.mu.Lock()
	if !d.recsRead {
		d.recs, d.recsRead = r, true
	}
	r = d.recs
	d.mu.Unlock()
	return r
}

// keepReportable drops from recs the records that could never be
// reported (racy ones, an inode number no host file has, kinds other than
// files and links): a tree of directories costs no memory.
func keepReportable(recs map[string]journal.StatCache) {
	for name, c := range recs {
		if c.Racy || !hostInoOK(c.Ino) || (c.Kind != 0 && c.Kind != cas.EntryFile && c.Kind != cas.EntrySymlink) {
			delete(recs, name)
		}
	}
}

// recordTreeMax bounds the import records a mount reads in one scan
// (about 150 bytes each in memory): a larger workspace's directories read
// their own.
const recordTreeMax = 100_000

// recordTree is the lower workspace's whole import cache, by store
// directory. Read directory by directory, each query is a range scan of
// everything below that directory (SQLite drops the deeper rows), so a
// tree costs its records times their depth: Go's repository, 1,937
// directories, took 0.14-0.16 s of a cold listing's 0.49 s of daemon CPU
// that way. One ordered scan reads each record once. The import cache does
// not change while the branch is mounted (the session holds the branch).
type recordTree struct {
	root  string                                  // the workspace's store directory ("/ws")
	dirs  map[string]map[string]journal.StatCache // reportable records by directory, then name
	below map[string]bool                         // directories with any record at any depth below
}

// covers reports whether t answers for store directory dir (false for a
// nil t).
func (t *recordTree) covers(dir string) bool {
	return t != nil && (dir == t.root || strings.HasPrefix(dir, t.root) && dir[len(t.root)] == '/')
}

// recordTree reads the lower workspace's import records the first time a
// directory's are needed; nil when there is no lower workspace, it holds
// more than recordTreeMax records, or the read failed (directories then
// read their own, as a failure there leaves them none).
func (f *FS) recordTree(ctx context.Context) *recordTree {
	f.recTreeOnce.Do(func() { f.recTree = f.readRecordTree(ctx) })
	return f.recTree
}

func (f *FS) readRecordTree(ctx context.Context) *recordTree {
	if f.lowerPfx == "" {
		return nil
	}
	root := "/" + strings.TrimSuffix(f.lowerPfx, "/")
	var all map[string]map[string]journal.StatCache
	whole := false
	f.stats.recordQueries.Add(1)
	err := f.tx(ctx, func(tx *journal.Tx) error {
		var err error
		all, whole, err = tx.StatCacheTree(root, recordTreeMax)
		return err
	})
	if err != nil || !whole {
		return nil
	}
	t := &recordTree{root: root, dirs: make(map[string]map[string]journal.StatCache, len(all)), below: map[string]bool{}}
	for dir, recs := range all {
		// Any record counts for below, reportable or not (as
		// HasStatCacheUnder): dir and its ancestors up to the root.
		for a := dir; !t.below[a]; {
			t.below[a] = true
			i := strings.LastIndexByte(a, '/')
			if i <= 0 || a == root {
				break
			}
			a = a[:i]
		}
		keepReportable(recs)
		if len(recs) > 0 {
			t.dirs[dir] = recs
		}
	}
	return t
}

// get returns the record of child name (none for a nil r).
func (r *dirRecords) get(name string) (journal.StatCache, bool) {
	if r == nil {
		return journal.StatCache{}, false
	}
	c, ok := r.recs[name]
	return c, ok
}

// storeDir is the import cache's name of the directory at node path p
// ("ws/src" -> "/ws/src"; the root, "", is "").
func storeDir(p string) string {
	if p == "" {
		return ""
	}
	return "/" + p
}

// childRecords gives subdirectory c, named name in d and made from the
// branch, an empty set of records without a query when d's records say
// nothing is recorded below d and no directory was renamed since they
// were read (node_modules written by an earlier session: one records
// query per directory before). c is not shared yet.
func (d *node) childRecords(c *node, name string) {
	d.mu.Lock()
	r := d.recs
	d.mu.Unlock()
	if r == nil || !r.noneBelow || r.moves != d.fsys.dirMoves.Load() {
		return
	}
	p := name
	if r.path != "" {
		p = r.path + "/" + name
	}
	c.recs, c.recsRead = &dirRecords{path: p, noneBelow: true, moves: r.moves}, true
}

// noRecords marks a directory made in the session: its children were
// made here too, none is looked up in the import cache.
func (d *node) noRecords() {
	d.mu.Lock()
	if !d.recsRead {
		d.recs, d.recsRead = nil, true
	}
	d.mu.Unlock()
}

// present settles what new live node c, named name in d, reports: the
// host's inode number and ctime when its record fits and no other live
// node claimed that number. fromBranch is false for a node made in the
// session (it is never the host's file). The caller holds no locks.
func (d *node) present(ctx context.Context, c *node, name string, fromBranch bool) {
	c.pino = syntheticIno(c.ino)
	if !fromBranch {
		c.madeHere = true // c is not shared yet
		return
	}
	if c.ino == journal.RootIno {
		return
	}
	recs := d.records(ctx)
	if c.fsys.lower != "" && c.attr.Kind == cas.EntryFile {
		c.lowerDir = recs // c is not shared yet
	}
	rec, ok := recs.get(name)
	if !ok {
		return
	}
	c.mu.Lock()
	ino, ctime := recordFits(&c.attr, &rec)
	c.mu.Unlock()
	if !ino || !c.fsys.claim(rec.Ino, c.ino) {
		return
	}
	c.pino = rec.Ino
	if ctime {
		c.mu.Lock()
		c.ctime = rec.CTime
		c.mu.Unlock()
	}
}

// claim records that node ino reports host inode number h, unless another
// live node does.
func (f *FS) claim(h uint64, ino int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if owner, ok := f.claims[h]; ok && owner != ino {
		return false
	}
	f.claims[h] = ino
	return true
}

// unclaimLocked lets go of node n's host inode number; the caller holds
// f.mu and has just dropped n from f.nodes.
func (f *FS) unclaimLocked(n *node) {
	if n.pino < synthBase && n.pino >= 2 && f.claims[n.pino] == n.ino {
		delete(f.claims, n.pino)
	}
}

// stIno is what node id id (an art inode number) reports as st_ino.
func (f *FS) stIno(id uint64) uint64 {
	if n := f.live(int64(id)); n != nil {
		return n.pino
	}
	return syntheticIno(int64(id))
}

// entIno is the d_ino a listing of directory d reports for its entry name
// of node jn: a live node's number, else the one a lookup would settle.
func (d *node) entIno(ctx context.Context, name string, jn *journal.Node) uint64 {
	if c := d.fsys.live(jn.Ino); c != nil {
		return c.pino
	}
	if jn.Ino == journal.RootIno {
		return 1
	}
	if rec, ok := d.records(ctx).get(name); ok {
		if ino, _ := recordFits(&jn.Attr, &rec); ino {
			d.fsys.mu.Lock()
			owner, claimed := d.fsys.claims[rec.Ino]
			d.fsys.mu.Unlock()
			if !claimed || owner == jn.Ino {
				return rec.Ino
			}
		}
	}
	return syntheticIno(jn.Ino)
}

// inoFS is go-fuse's bridge with each reply's st_ino the node's own (the
// bridge reports node ids). rawFS serves the kernel through it, so its own
// replies (READDIRPLUS entries) pass here too.
type inoFS struct {
	fuse.RawFileSystem
	f *FS
}

func (r *inoFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	st := r.RawFileSystem.Lookup(cancel, h, name, out)
	r.entry(st, out)
	return st
}

func (r *inoFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := r.RawFileSystem.GetAttr(cancel, in, out)
	if st.Ok() {
		out.Ino = r.f.stIno(in.NodeId)
	}
	return st
}

func (r *inoFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := r.RawFileSystem.SetAttr(cancel, in, out)
	if st.Ok() {
		out.Ino = r.f.stIno(in.NodeId)
	}
	return st
}

// Statx reaches art only for what GETATTR lacks (btime); an open host
// file answers it (the lower handle's LoopbackFile).
func (r *inoFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	st := r.RawFileSystem.Statx(cancel, in, out)
	if st.Ok() {
		out.Ino = r.f.stIno(in.NodeId)
	}
	return st
}

// Rename lets records that say nothing is below a directory's path
// (dirRecords.noneBelow) stop vouching for paths below a renamed one:
// counted after the bridge moved the node, so a records read that took
// the old path took the old count too.
func (r *inoFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	st := r.RawFileSystem.Rename(cancel, in, oldName, newName)
	r.f.dirMoves.Add(1)
	return st
}

func (r *inoFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	st := r.RawFileSystem.Tmpfile(cancel, in, out)
	r.entry(st, &out.EntryOut)
	return st
}

func (r *inoFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	st := r.RawFileSystem.Mkdir(cancel, in, name, out)
	r.entry(st, out)
	return st
}

func (r *inoFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	st := r.RawFileSystem.Mknod(cancel, in, name, out)
	r.entry(st, out)
	return st
}

func (r *inoFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := r.RawFileSystem.Create(cancel, in, name, out)
	r.entry(st, &out.EntryOut)
	return st
}

func (r *inoFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	st := r.RawFileSystem.Link(cancel, in, name, out)
	r.entry(st, out)
	return st
}

func (r *inoFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	st := r.RawFileSystem.Symlink(cancel, h, target, name, out)
	r.entry(st, out)
	return st
}

func (r *inoFS) entry(st fuse.Status, out *fuse.EntryOut) {
	if st.Ok() && out.NodeId != 0 {
		out.Attr.Ino = r.f.stIno(out.NodeId)
	}
}
