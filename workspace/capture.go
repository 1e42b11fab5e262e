package workspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// How an import decides each path (docs/architecture.md, "Capture").
//
// The import cache holds, for every path an import brought in, what it
// brought in (kind, permission bits, content) and the host stat it read it
// with. The host changed a path if it differs from that record; the branch
// changed it if the branch differs from it. A stat proves the host
// unchanged only if it is equal and was not racy - taken within the
// timestamp granularity of the entry's last change, when a later change
// can leave it equal; a racy record is kept all the same and the host
// entry is compared by content instead.
//
// In capture mode (before every session) the branch takes the host's
// changes and keeps its own; when both sides changed a path, the host's
// version is taken (the branch's stays in its history), except that an
// edit beats a deletion on either side: a file the agent changed and the
// host deleted is kept, a file the host changed and the agent deleted
// comes back. Each such path is a Conflict in ImportStats.

// racyWindow is the timestamp granularity assumed of host filesystems
// (FAT's 2 s is the coarsest in use), in ns. A variable only for tests,
// which shrink it instead of waiting for files to age.
var racyWindow int64 = 2e9

// maxConflicts bounds the conflicts ImportStats lists; all are counted.
const maxConflicts = 100

// Conflict is a path both the host and the branch changed since the last
// capture, and which side's version the branch now has.
type Conflict struct {
	Path string `json:"path"` // store path: "/ws/main.py"
	Kept string `json:"kept"` // "host" or "branch"
	Why  string `json:"why"`
}

// linked is a multiply-linked host file imported under one of its names.
type linked struct {
	ino int64       // its art inode
	st  unix.Stat_t // the stat its content was read with
}

// place is where a host directory is in the branch. ino is 0 while the
// branch has no directory there (new on the host, or deleted or renamed
// in the branch): ensure creates it when a host change below it must be
// brought in.
type place struct {
	parent  *place
	name    []byte
	host    string // host path
	store   string // store path: "/ws/src"
	st      unix.Stat_t
	ino     int64
	dropped bool // push --replace: the branch's own version of it is dropped (named once, not each path below)
	blocked bool // the branch keeps a non-directory here
	sync    bool // take the host directory's attributes after its children
	lazy    bool // ino not looked up yet: see importer.resolve
}

// ensure makes sure p is a directory in the branch, creating it and its
// parents with the host's attributes; false if the branch has something
// else there.
func (im *importer) ensure(tx *journal.Tx, p *place) (bool, error) {
	if err := im.resolve(tx, p); err != nil {
		return false, err
	}
	if p.ino != 0 {
		return true, nil
	}
	if p.blocked || p.parent == nil {
		return false, nil
	}
	if ok, err := im.ensure(tx, p.parent); err != nil || !ok {
		return false, err
	}
	n, err := tx.Lookup(p.parent.ino, p.name)
	switch {
	case err == nil && n.IsDir():
	case err == nil:
		p.blocked = true
		return false, nil
	case errors.Is(err, os.ErrNotExist):
		a, err := hostAttr(p.host, &p.st)
		if err != nil {
			return false, err
		}
		if n, err = tx.Create(p.parent.ino, p.name, a); err != nil {
			return false, err
		}
		p.sync = true
	default:
		return false, err
	}
	p.ino = n.Ino
	return true, nil
}

func (im *importer) conflict(path, kept, why string) {
	im.stats.Conflicts++
	if len(im.stats.ConflictList) == maxConflicts {
		return // counted; the summary says how many more
	}
	im.stats.ConflictList = append(im.stats.ConflictList, Conflict{Path: path, Kept: kept, Why: why})
	fmt.Fprintf(im.warn, "warning: %s: %s; the branch now has the %s's version (the other stays in history or on the host)\n", termtext.Quote(path), why, kept)
}

// Printable returns a path as it may be printed on a terminal: as it is
// when safe, else quoted with escapes (termtext.Quote: a file name must not
// be able to move the cursor or rewrite the screen).
func Printable(p string) string { return termtext.Quote(p) }

// racy reports whether a stat taken during this import is within the
// timestamp granularity of the entry's last change: a later change within
// it could leave the stat equal. Its mtime is always compared (a write
// within the mtime's tick keeps it); its ctime too unless the filesystem
// gives every change after a stat a new ctime (see fineCtime): a write
// that keeps the size and puts the mtime back (cp -p, touch -d) within
// the ctime's tick would otherwise go unseen.
//
// The mtime rule stays even where change times are fine: write(2) sets a
// file's times before it copies its bytes, so a stat and a read while a
// write is under way can record part of the new bytes with the final
// times, and nothing changes them after; only the window makes the next
// capture read such a file again.
func (im *importer) racy(st *unix.Stat_t) bool {
	cut := im.start.UnixNano() - racyWindow
	if nsOf(st.Mtim) >= cut {
		return true
	}
	return nsOf(st.Ctim) >= cut && !im.fineCtime(st.Dev)
}

// fineCtime is fineCtime for this import, kept per device for the
// import's life (see fineCtime for why no longer).
func (im *importer) fineCtime(dev uint64) bool {
	fine, ok := im.fineDevs[dev]
	if !ok {
		fine = fineCtime(dev, probeDirs(im.db.Path(), im.opts.Dir)...)
		if im.fineDevs == nil {
			im.fineDevs = map[uint64]bool{}
		}
		im.fineDevs[dev] = fine
	}
	return fine
}

func nsOf(t unix.Timespec) int64 { return t.Sec*1e9 + t.Nsec }

func statSame(c journal.StatCache, st *unix.Stat_t) bool {
	return c.Size == st.Size && c.MTime == nsOf(st.Mtim) && c.CTime == nsOf(st.Ctim) && c.Ino == st.Ino
}

// record is the import cache's entry for host content read with stat st.
func (im *importer) record(kind cas.EntryKind, st *unix.Stat_t, content cas.ID) journal.StatCache {
	c := journal.StatCache{Kind: kind, Mode: st.Mode & 0o7777, Ino: st.Ino, Manifest: content}
	if kind == cas.EntryDir {
		return c // a directory's stat changes with its children: not compared
	}
	if kind == cas.EntrySymlink {
		c.Mode = 0o777
	}
	c.Size, c.MTime, c.CTime, c.Racy = st.Size, nsOf(st.Mtim), nsOf(st.Ctim), im.racy(st)
	return c
}

// branchSame reports whether branch node n is what record c says an
// import brought in.
func branchSame(n *journal.Node, c journal.StatCache) bool {
	kind := c.Kind
	if kind == 0 {
		kind = cas.EntryFile
	}
	if n.Kind != kind {
		return false
	}
	if kind != cas.EntrySymlink && c.Mode != journal.ModeUnknown && n.Mode != c.Mode {
		return false
	}
	switch kind {
	case cas.EntryFile:
		return n.Content == c.Manifest
	case cas.EntrySymlink:
		return cas.Sum(n.Link) == c.Manifest
	}
	return true
}

// dirRecord returns the record of a directory at store path p. Stores
// from before directories were recorded have none: a directory with a
// record below it came from an import then.
func dirRecord(tx *journal.Tx, p string, c journal.StatCache, cached bool) (journal.StatCache, bool, error) {
	if cached {
		return c, true, nil
	}
	below, err := tx.HasStatCacheUnder(p)
	if err != nil || !below {
		return c, false, err
	}
	return journal.StatCache{Kind: cas.EntryDir, Mode: journal.ModeUnknown}, true, nil
}

// hostRead is a host entry's content as read now: a file's manifest (its
// bytes stored), a symlink's target.
type hostRead struct {
	id     cas.ID
	size   int64
	st     unix.Stat_t // the stat the content was read with
	target []byte
}

// openHostFile opens a host file to read its content. O_NOFOLLOW and
// O_NONBLOCK: if the name was swapped for a symlink or a fifo since lstat,
// fail or return at once instead of following or blocking; the caller's
// fstat then confirms it is still a regular file.
func openHostFile(hp string) (*os.File, error) {
	f, err := os.OpenFile(hp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) { // O_NOATIME needs ownership
		f, err = os.OpenFile(hp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	}
	return f, err
}

func (im *importer) read(tx *journal.Tx, e *hostEntry, hp string) (*hostRead, error) {
	if e.kind == cas.EntrySymlink {
		target, err := os.Readlink(hp)
		if err != nil {
			return nil, err
		}
		return &hostRead{id: cas.Sum([]byte(target)), size: int64(len(target)), st: e.st, target: []byte(target)}, nil
	}
	p, st := im.pf.take(hp, &e.st)
	if p == nil {
		p, st = im.la.take(hp, &e.st)
	}
	if p != nil {
		// Read, chunked and compressed ahead by a worker (prefetch.go),
		// after the lstat of e, as the read below would be.
		id, fs, err := tx.Objects().PutPrepared(im.ctx, p)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", termtext.Quote(hp), err)
		}
		im.stats.BytesRead += fs.Bytes
		im.stats.BytesStored += fs.NewBytes
		return &hostRead{id: id, size: fs.Size, st: *st}, nil
	}
	f, err := openHostFile(hp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &hostRead{}
	// The stat before the read: a change during it moves the ctime past
	// this import's start, which makes the record racy or unequal.
	if err := unix.Fstat(int(f.Fd()), &r.st); err != nil {
		return nil, err
	}
	if kindOf(r.st.Mode) != cas.EntryFile {
		return nil, fmt.Errorf("%s: changed type while importing", termtext.Quote(hp))
	}
	id, fs, err := tx.Objects().PutSparseFile(im.ctx, f)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", termtext.Quote(hp), err)
	}
	im.stats.BytesRead += fs.Bytes
	im.stats.BytesStored += fs.NewBytes
	r.id, r.size = id, fs.Size
	return r, nil
}

// pathState is one name of a directory as an import decides it: what the
// host has there, what the branch has and what the last import recorded
// of it, and what the import found out so far. The per-entry steps
// (entry, keep, hostDir, hostLeaf, file, symlink, removeCaptured,
// dropRemoved) share it rather than passing each part, and whether it
// exists, as positional arguments.
type pathState struct {
	pl   *place     // the directory it is in (nil below a directory removeCaptured walks)
	name []byte     // its name in that directory
	e    *hostEntry // what the host has there; nil for a path only the branch has
	hp   string     // host path ("" when e is nil)
	sp   string     // store path: "/ws/src/main.go"

	old    journal.Node // the branch's node at the path,
	exists bool         // if the branch has one there

	rec    journal.StatCache // the last import's record of the path,
	cached bool              // if there is one

	// r is the host content when deciding had to read it (a racy
	// record); nil if not read yet.
	r *hostRead
	// same: the branch still has what the record says an import
	// brought in (cached, exists and branchSame).
	same bool
	// branchChanged: in capture mode, the branch changed or made the
	// path since the last import; cleared once a conflict about it has
	// been reported.
	branchChanged bool
}

// entry decides host entry ps.e against the branch's node and the import
// cache's record, and returns the place of a directory to recurse into.
func (im *importer) entry(tx *journal.Tx, ps *pathState) (*place, error) {
	e := ps.e
	if e.kind == cas.EntryDir {
		var err error
		if ps.rec, ps.cached, err = dirRecord(tx, ps.sp, ps.rec, ps.cached); err != nil {
			return nil, err
		}
	}
	hostSame, err := im.hostSame(tx, ps)
	if err != nil {
		return nil, err
	}
	ps.same = ps.cached && ps.exists && branchSame(&ps.old, ps.rec)
	// The branch changed (or made) the path since the last import.
	branchMade := (ps.cached && !ps.same) || (!ps.cached && ps.exists)
	if hostSame && (im.opts.Capture || ps.same) {
		// The branch keeps whatever it did with the path (or, in push -m,
		// is still what was imported).
		return im.keep(tx, ps)
	}
	// The host changed the path. In capture mode the branch may have too.
	ps.branchChanged = im.opts.Capture && branchMade
	if e.kind == cas.EntryDir {
		sub, err := im.hostDir(tx, ps)
		if err == nil && !im.opts.Capture && branchMade && (!ps.exists || !ps.old.IsDir() || ps.old.Mode != e.st.Mode&0o7777) {
			im.drop(ps.pl, ps.sp)
			sub.dropped = true
		}
		return sub, err
	}
	return nil, im.hostLeaf(tx, ps, branchMade)
}

// hostSame reports whether the host has not changed path ps since the last
// import: same kind and mode as recorded and, for a file or symlink, a
// stat equal to the record's that was not racy, or else the same content
// (read now, into ps.r).
func (im *importer) hostSame(tx *journal.Tx, ps *pathState) (bool, error) {
	e, c := ps.e, ps.rec
	mode := e.st.Mode & 0o7777
	if e.kind == cas.EntrySymlink {
		mode = 0o777
	}
	if !ps.cached || c.Kind != e.kind || (c.Mode != journal.ModeUnknown && c.Mode != mode) {
		return false, nil
	}
	switch {
	case e.kind == cas.EntryDir:
		return true, nil
	case !c.Racy && statSame(c, &e.st):
		return true, nil
	}
	r, err := im.read(tx, e, ps.hp)
	if err != nil {
		return false, err
	}
	ps.r = r
	return r.id == c.Manifest && (c.Mode == journal.ModeUnknown || c.Mode == r.st.Mode&0o7777 || e.kind == cas.EntrySymlink), nil
}

// hostLeaf brings in a host file or symlink that the host changed (or
// made) since the last import. branchMade: the branch changed or made the
// path since then too.
func (im *importer) hostLeaf(tx *journal.Tx, ps *pathState, branchMade bool) error {
	e, sp := ps.e, ps.sp
	existed := ps.exists // the branch's node as it was: ps.exists is cleared once it is removed
	switch e.kind {
	case cas.EntryFile:
		im.stats.Files++
	case cas.EntrySymlink:
		im.stats.Symlinks++
	}
	ok, err := im.ensure(tx, ps.pl)
	if err != nil {
		return err
	}
	if !ok {
		im.conflict(sp, "branch", "changed on the host, below a directory the branch replaced")
		return nil
	}
	if ps.exists && (ps.old.Kind != e.kind || (e.kind == cas.EntryFile && e.st.Nlink == 1 && ps.old.Nlink > 1)) {
		if err := im.replaceOld(tx, ps); err != nil {
			return err
		}
	}
	if !ps.exists && ps.cached && im.opts.Capture && ps.branchChanged {
		im.conflict(sp, "host", "changed on the host, deleted or renamed in the branch (an edit beats a deletion)")
		ps.branchChanged = false
	}
	a, err := entryAttr(ps.hp, e)
	if err != nil {
		return err
	}
	var rec journal.StatCache
	if e.kind == cas.EntrySymlink {
		rec, err = im.symlink(tx, ps, a)
	} else {
		rec, err = im.file(tx, ps, a)
	}
	if err != nil {
		return err
	}
	if !im.opts.Capture && branchMade && (!existed || ps.old.Kind != e.kind || nodeContent(&ps.old) != rec.Manifest ||
		(e.kind != cas.EntrySymlink && ps.old.Mode != rec.Mode)) {
		im.drop(ps.pl, sp)
	}
	return tx.SetStatCache(sp, rec)
}

// replaceOld removes the branch's node at path ps, which the host's file or
// symlink replaces (another kind, or a file the branch hard-linked that
// the host has under one name), with its record, reporting a conflict if
// the branch had changed it.
func (im *importer) replaceOld(tx *journal.Tx, ps *pathState) error {
	if ps.branchChanged && ps.old.Kind != ps.e.kind {
		im.conflict(ps.sp, "host", "changed on the host and replaced in the branch")
		ps.branchChanged = false
	} else if im.opts.Capture && ps.old.IsDir() {
		changed, err := changedBelow(tx, ps.sp, &ps.old)
		if err != nil {
			return err
		}
		if changed {
			im.conflict(ps.sp, "host", "replaced on the host, changed below in the branch")
		}
	}
	if err := im.remove(tx, ps.pl.ino, ps.name, &ps.old); err != nil {
		return err
	}
	if err := tx.DeleteStatCache(ps.sp); err != nil {
		return err
	}
	ps.exists = false
	return nil
}

// nodeContent is what an import record holds of branch node n's content:
// a file's manifest, the cas.Sum of a symlink's target.
func nodeContent(n *journal.Node) cas.ID {
	if n.Kind == cas.EntrySymlink {
		return cas.Sum(n.Link)
	}
	return n.Content
}

// drop counts and names a path whose branch version a push -m --replace
// replaced or removed (once for a directory, not each path below it).
func (im *importer) drop(pl *place, sp string) {
	for p := pl; p != nil; p = p.parent {
		if p.dropped {
			return
		}
	}
	im.stats.Dropped++
	if len(im.stats.DroppedList) < maxConflicts {
		im.stats.DroppedList = append(im.stats.DroppedList, sp)
	}
}

// dropRemoved names, in push -m --replace, branch entry ps that the host
// does not have, if the branch made or changed it since the last import.
func (im *importer) dropRemoved(tx *journal.Tx, ps *pathState) error {
	pl, p, n, c, cached := ps.pl, ps.sp, &ps.old, ps.rec, ps.cached
	if n.IsDir() {
		var err error
		if c, cached, err = dirRecord(tx, p, c, cached); err != nil {
			return err
		}
	}
	changed := !cached || !branchSame(n, c)
	if !changed && n.IsDir() {
		var err error
		if changed, err = changedBelow(tx, p, n); err != nil {
			return err
		}
	}
	if changed {
		im.drop(pl, p)
	}
	return nil
}

// keep handles a host entry unchanged since the last import: the branch
// keeps what it has; a racy record read again (ps.r) is brought up to date.
func (im *importer) keep(tx *journal.Tx, ps *pathState) (*place, error) {
	pl, e, hp, sp, c, r, same := ps.pl, ps.e, ps.hp, ps.sp, ps.rec, ps.r, ps.same
	old, exists := &ps.old, ps.exists
	switch e.kind {
	case cas.EntryDir:
		im.stats.Dirs++
		sub := &place{parent: pl, name: e.name, host: hp, store: sp, st: e.st}
		if exists && old.IsDir() {
			sub.ino = old.Ino
		}
		sub.sync = !im.opts.Capture && sub.ino != 0
		im.entryLine("DIR  %s (ino %d)\n", termtext.Quote(sp), sub.ino)
		if c.Mode == journal.ModeUnknown { // a record from before modes were kept
			if err := tx.SetStatCache(sp, im.record(cas.EntryDir, &e.st, cas.ID{})); err != nil {
				return nil, err
			}
		}
		return sub, nil
	case cas.EntryFile:
		im.stats.Files++
		im.stats.Unchanged++
		if exists { // a capture keeps the branch's deletion: no line for it
			im.entryLine("FILE %s (%d bytes, ino %d)\n", termtext.Quote(sp), old.Size, old.Ino) // the branch's, which it keeps
		}
	case cas.EntrySymlink:
		im.stats.Symlinks++
	}
	if r == nil && !im.opts.Capture && same {
		// push -m: the host's owner, mtime and xattrs too.
		a, err := hostAttr(hp, &e.st)
		if err != nil {
			return nil, err
		}
		return nil, im.syncNode(tx, old, a)
	}
	if r == nil {
		return nil, nil
	}
	if same && (!im.opts.Capture || !statSame(c, &r.st)) {
		// Same content and mode, other metadata (mtime, xattrs) may
		// have changed on the host: the branch did not touch the file.
		// (push -m: or the branch changed them, and takes the host's.)
		a, err := hostAttr(hp, &r.st)
		if err != nil {
			return nil, err
		}
		if err := im.syncNode(tx, old, a); err != nil {
			return nil, err
		}
	}
	rec := im.record(e.kind, &r.st, c.Manifest)
	if c.Mode == journal.ModeUnknown && e.kind != cas.EntrySymlink {
		rec.Mode = c.Mode // not known what was imported; the host's is not evidence of it
	}
	if rec != c {
		return nil, tx.SetStatCache(sp, rec)
	}
	return nil, nil
}

// hostDir handles a host directory that is new or changed (its kind or
// mode) since the last import: the branch has it from now on (in capture
// mode, an edit beats the branch's deletion too).
func (im *importer) hostDir(tx *journal.Tx, ps *pathState) (*place, error) {
	pl, e, hp, sp, old := ps.pl, ps.e, ps.hp, ps.sp, &ps.old
	exists, cached, branchChanged := ps.exists, ps.cached, ps.branchChanged
	im.stats.Dirs++
	sub := &place{parent: pl, name: e.name, host: hp, store: sp, st: e.st, sync: true}
	switch {
	case exists && !old.IsDir():
		if branchChanged {
			im.conflict(sp, "host", "a directory on the host, replaced in the branch")
		}
		// The records below stay: what the host has there unchanged
		// since the last capture is still what the branch deleted.
		if err := im.remove(tx, pl.ino, e.name, old); err != nil {
			return nil, err
		}
	case exists:
		sub.ino = old.Ino
		if branchChanged && cached && old.Mode != e.st.Mode&0o7777 {
			im.conflict(sp, "host", "mode changed on the host and in the branch")
		}
	case branchChanged:
		im.conflict(sp, "host", "changed on the host, deleted or renamed in the branch (an edit beats a deletion)")
	}
	ok, err := im.ensure(tx, sub)
	if err != nil {
		return nil, err
	}
	if !ok {
		// The record stays as it was: the host's change is still one the
		// next capture sees.
		im.conflict(sp, "branch", "changed on the host, below a directory the branch replaced")
		return sub, nil
	}
	im.entryLine("DIR  %s (ino %d)\n", termtext.Quote(sp), sub.ino)
	return sub, tx.SetStatCache(sp, im.record(cas.EntryDir, &e.st, cas.ID{}))
}

// symlink brings host symlink ps into the branch, with attributes a, and
// returns its record.
func (im *importer) symlink(tx *journal.Tx, ps *pathState, a journal.Attr) (journal.StatCache, error) {
	dir, e, hp, sp, old, r := ps.pl.ino, ps.e, ps.hp, ps.sp, ps.old, ps.r
	exists, branchChanged := ps.exists, ps.branchChanged
	if r == nil {
		var err error
		if r, err = im.read(tx, e, hp); err != nil {
			return journal.StatCache{}, err
		}
	}
	a.Link = r.target
	if exists && !bytes.Equal(old.Link, a.Link) {
		if branchChanged {
			im.conflict(sp, "host", "symlink changed on the host and in the branch")
		}
		if err := tx.Unlink(dir, e.name); err != nil {
			return journal.StatCache{}, err
		}
		exists = false
	}
	n := old
	var err error
	if !exists {
		if n, err = tx.Create(dir, e.name, a); err != nil {
			return journal.StatCache{}, err
		}
	} else if err := im.syncNode(tx, &n, a); err != nil {
		return journal.StatCache{}, err
	}
	im.entryLine("LINK %s -> %s (ino %d)\n", termtext.Quote(sp), termtext.QuotePath(r.target), n.Ino)
	return im.record(cas.EntrySymlink, &r.st, r.id), nil
}

// file brings host regular file ps into the branch, with attributes a,
// and returns its record.
func (im *importer) file(tx *journal.Tx, ps *pathState, a journal.Attr) (journal.StatCache, error) {
	dir, e, hp, sp, old, r := ps.pl.ino, ps.e, ps.hp, ps.sp, &ps.old, ps.r
	exists, branchChanged := ps.exists, ps.branchChanged
	key := [2]uint64{e.st.Dev, e.st.Ino}
	if e.st.Nlink > 1 {
		if l, ok := im.links[key]; ok {
			// Another name of a file already imported in this push.
			ino := l.ino
			rec, err := tx.Get(ino)
			if err != nil {
				return journal.StatCache{}, err
			}
			if exists && old.Ino == ino {
				im.stats.Unchanged++
			} else {
				if exists {
					if err := tx.Unlink(dir, e.name); err != nil {
						return journal.StatCache{}, err
					}
				}
				if _, err := tx.Link(ino, dir, e.name); err != nil {
					return journal.StatCache{}, err
				}
				im.stats.New++
			}
			// Its content was read under the other name: the record says
			// so only with the stat of that read.
			return im.record(cas.EntryFile, &l.st, rec.Content), nil
		}
	}
	if r == nil {
		var err error
		if r, err = im.read(tx, e, hp); err != nil {
			return journal.StatCache{}, err
		}
	}
	a.Kind, a.Content, a.Size, a.Mode = cas.EntryFile, r.id, r.size, r.st.Mode&0o7777
	var n journal.Node
	var err error
	if exists {
		if old.Content != r.id || old.Size != a.Size {
			if branchChanged {
				why := "changed on the host and in the branch"
				if im.stats.OtherDir {
					// No record says which side changed it (forgetOtherDir).
					why = "differs between this host directory and the branch, whose import records were of another directory of this name"
				}
				im.conflict(sp, "host", why)
			}
			im.stats.Changed++
			if n, err = tx.Write(old.Ino, r.id, a.Size, a.MTime, nil); err != nil {
				return journal.StatCache{}, err
			}
		} else {
			if branchChanged && old.Mode != a.Mode {
				im.conflict(sp, "host", "mode changed on the host and in the branch")
			}
			im.stats.Unchanged++
			n = *old
		}
		if err := im.syncNode(tx, &n, a); err != nil {
			return journal.StatCache{}, err
		}
	} else {
		im.stats.New++
		if n, err = tx.Create(dir, e.name, a); err != nil {
			return journal.StatCache{}, err
		}
	}
	if e.st.Nlink > 1 {
		im.links[key] = linked{ino: n.Ino, st: r.st}
	}
	im.entryLine("FILE %s (%d bytes, ino %d)\n", termtext.Quote(sp), a.Size, n.Ino)
	return im.record(cas.EntryFile, &r.st, r.id), nil
}

// removeCaptured handles, in capture mode, branch entry ps of directory
// inode dir that the host no longer has. What an import brought in and the
// branch has not changed since goes; what the branch created stays; what
// both changed stays (an edit beats a deletion). A directory goes if all
// below it went. It reports whether the entry is gone.
func (im *importer) removeCaptured(tx *journal.Tx, dir int64, ps *pathState) (bool, error) {
	p, name, n, c, cached := ps.sp, ps.name, &ps.old, ps.rec, ps.cached
	var err error
	if n.IsDir() {
		if c, cached, err = dirRecord(tx, p, c, cached); err != nil {
			return false, err
		}
	}
	if !cached {
		return false, nil // created in the branch
	}
	same := branchSame(n, c)
	all := true
	if n.IsDir() && c.Kind == cas.EntryDir {
		// Each path below decides for itself, even if the directory's own
		// mode changed in the branch.
		sub, err := tx.StatCacheDir(p)
		if err != nil {
			return false, err
		}
		kids, err := tx.ReadDir(n.Ino)
		if err != nil {
			return false, err
		}
		for i := range kids {
			kid := &pathState{name: kids[i].Name, sp: p + "/" + string(kids[i].Name), old: kids[i].Node, exists: true}
			kid.rec, kid.cached = sub[string(kids[i].Name)]
			gone, err := im.removeCaptured(tx, n.Ino, kid)
			if err != nil {
				return false, err
			}
			all = all && gone
		}
	}
	// Either way the host no longer has it: what is left in the branch is
	// the branch's own from now on.
	if err := tx.DeleteStatCache(p); err != nil {
		return false, err
	}
	if !same {
		im.conflict(p, "branch", "deleted on the host, changed in the branch (an edit beats a deletion)")
		return false, nil
	}
	if !all {
		return false, nil
	}
	if n.IsDir() {
		return true, tx.Rmdir(dir, name)
	}
	if n.Kind == cas.EntryFile {
		im.stats.Deleted++
	}
	return true, tx.Unlink(dir, name)
}

// RecordPulled makes the import cache of the workspace at host directory
// dir say that the host holds what a pull wrote there (written: the
// records ExportOptions.Written gave, by store path), so that the next
// capture takes none of it for host edits. began is when the pull
// started: a file whose mtime, or on a filesystem with coarse change
// times ctime, is since then is racy (its stat was taken within the
// timestamp granularity of the write) and is compared by content.
func RecordPulled(tx *journal.Tx, dir string, written map[string]journal.StatCache, began time.Time) error {
	name, err := Name(dir)
	if err != nil {
		return err
	}
	if err := tx.ResetStatCache("/" + name); err != nil {
		return err
	}
	// The host is now what the pull wrote, not what the last push -m saw
	// (no mark), and this directory is the one the records describe
	// (its inode: a pull into another directory of the same name must
	// not take what that one lacks for deletions).
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	rec := journal.StatCache{Kind: cas.EntryDir, Mode: st.Mode & 0o7777, Ino: st.Ino}
	if c, ok, err := tx.ImportRecord("/" + name); err != nil {
		return err
	} else if !ok || c != rec {
		if err := tx.SetStatCache("/"+name, rec); err != nil {
			return err
		}
	}
	// The pull's writes set every file's ctime just now: the records are
	// racy by it unless the host's filesystem has fine change times
	// (probed at the first record that needs it).
	var fine, probed bool
	fineHere := func() bool {
		if !probed {
			fine, probed = fineCtime(st.Dev, probeDirs(tx.StorePath(), dir)...), true
		}
		return fine
	}
	for p, sc := range written {
		if !strings.HasPrefix(p, "/"+name+"/") {
			continue
		}
		// Written by the pull just now: racy if its mtime is since the
		// pull began (compared by content next time); a record that is
		// racy already (a pull --merge's of a path it left with the
		// host's content) stays so.
		cut := began.UnixNano() - racyWindow
		sc.Racy = sc.Kind != cas.EntryDir && (sc.Racy || sc.MTime >= cut || (sc.CTime >= cut && !fineHere()))
		if err := tx.SetStatCache(p, sc); err != nil {
			return err
		}
	}
	return nil
}

// A push -m that leaves the branch's workspace equal to the host marks
// the workspace directory's own record (whose size, mtime and ctime a
// directory record does not use otherwise) with the first 16 bytes of the
// tree the branch's workspace then has (in size and ctime) and the time
// the push started (mtime). While the branch's tree is still that one,
// the branch has every host entry as that push left it: with its content
// and mode as recorded, and the owner, mtime and xattrs the push read
// after its start. A host entry whose ctime is more than the racy window
// before that start has not changed since (any change of content, mode,
// owner or xattrs moves the ctime to the present), so the next push -m
// needs neither the branch's listing nor the host's xattrs for it. A
// capture, a pull (RecordPulled) or a push -m with conflicts leaves the
// record unmarked.

// pushMark returns the workspace record rec marked for tree and start.
func pushMark(rec journal.StatCache, tree cas.ID, start int64) journal.StatCache {
	rec.Size = int64(binary.LittleEndian.Uint64(tree[:8]))
	rec.CTime = int64(binary.LittleEndian.Uint64(tree[8:16]))
	rec.MTime = start
	return rec
}

// unmark returns a workspace record without a push mark.
func unmark(rec journal.StatCache) journal.StatCache {
	rec.Size, rec.MTime, rec.CTime = 0, 0, 0
	return rec
}

// pushSettled returns the time before which a host entry's ctime proves
// it as the last push -m left it in the branch (see pushMark), if the
// workspace record at ws is marked and the branch's workspace directory
// wsIno still has the marked tree; else 0.
func pushSettled(tx *journal.Tx, ws string, wsIno int64) (int64, error) {
	c, ok, err := tx.ImportRecord(ws)
	if err != nil || !ok || c.Kind != cas.EntryDir || c.MTime <= 0 {
		return 0, err
	}
	tree, clean, err := tx.DirTree(wsIno)
	if err != nil || !clean {
		return 0, err
	}
	if pushMark(c, tree, c.MTime) != c {
		return 0, nil
	}
	return c.MTime - racyWindow, nil
}

// changedBelow reports whether the branch changed anything below its
// directory n at store path p since the last import.
func changedBelow(tx *journal.Tx, p string, n *journal.Node) (bool, error) {
	recs, err := tx.StatCacheDir(p)
	if err != nil {
		return false, err
	}
	kids, err := tx.ReadDir(n.Ino)
	if err != nil {
		return false, err
	}
	for i := range kids {
		k := &kids[i].Node
		kp := p + "/" + string(kids[i].Name)
		c, ok := recs[string(kids[i].Name)]
		if k.IsDir() {
			if c, ok, err = dirRecord(tx, kp, c, ok); err != nil {
				return false, err
			}
		}
		if !ok || !branchSame(k, c) {
			return true, nil
		}
		if k.IsDir() {
			if changed, err := changedBelow(tx, kp, k); err != nil || changed {
				return changed, err
			}
		}
	}
	return false, nil
}

// entryLine writes one line of ImportOptions.Entries; without a writer it
// formats nothing (a line per entry was measurable in an ingest).
func (im *importer) entryLine(format string, args ...any) {
	if im.out != io.Discard {
		fmt.Fprintf(im.out, format, args...)
	}
}
