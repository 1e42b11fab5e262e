package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// errChanged ends Unchanged's walk at the first thing an Import would
// have to write.
var errChanged = errors.New("workspace changed")

// Unchanged reports whether an Import of opts.Dir into opts.Branch (a
// capture, art push -m; or a push -m --replace, without Capture) would
// change nothing, deciding it without
// writing to the store: db may be opened ReadOnly, and a push that finds
// nothing changed then leaves the store file untouched (no op, no
// snapshot, no commit). If so it returns the stats that Import would
// have returned, with Snapshot the branch's head snapshot (the state the
// workspace still has) and NothingChanged set; warnings of skipped
// special files go to opts.Warn only then. If not, or when it cannot
// tell (options that need the full import: Entries, Message; a
// store in a state it does not read without writing), it returns false
// and the caller runs Import, which decides everything again.
//
// A capture changes nothing where every host entry's import record proves
// it unchanged (allKept: an equal stat that was not racy, same kind and
// mode; no record of a path the host no longer has), the workspace
// directory's mode is the recorded one, and the branch's head is a
// snapshot. Without Capture it proves "unchanged" exactly where Import's
// skip does (allKept: the mark of the last push -m, see pushMark), for every directory of the
// workspace, and adds what Import would otherwise write even then: every
// directory's attributes (its ctime is from before the mark, as a file's
// must be), the workspace directory's own (its ctime, and its node in the
// branch compared with the host's attributes and xattrs, since the mark
// covers only the tree below it), and the snapshot that ends an import
// (the branch's head must be a snapshot). The racy window is the mark's:
// an entry whose ctime is within it of that push's start is read by
// Import, never taken as unchanged here.
func Unchanged(ctx context.Context, db *journal.DB, opts ImportOptions) (ImportStats, bool, error) {
	st, same, _, err := unchanged(ctx, db, opts, false)
	return st, same, err
}

// CaptureChecked is the capture before a session (opts.Capture): it asks
// Unchanged first and runs Import only when that cannot prove every entry
// unchanged (a racy record, any change, any error of the check). It
// reports whether the workspace was unchanged. The check ignores
// opts.Message and opts.Progress (they are the import's: no snapshot is
// made when nothing changed).
//
// When the check finds a change it lists the rest of the host tree
// without comparing (on the reader's goroutines, as before), and the
// import takes those listings instead of listing and lstat'ing every
// directory again; its racy window then starts when the check started,
// before any of those lstats (an earlier start only makes more stats
// racy). The import's decisions are those it would make had it listed the
// tree itself at that time: an import is not atomic, and a host change
// after a listing is seen by the next capture either way. At most
// cacheLimit entries are held; past that the import lists for itself.
func CaptureChecked(ctx context.Context, db *journal.DB, opts ImportOptions) (ImportStats, bool, error) {
	check := opts
	check.Message, check.Progress = "", nil
	st, same, held, err := unchanged(ctx, db, check, opts.Capture)
	if err == nil && same {
		return st, true, nil
	}
	st, err = importWith(ctx, db, opts, held)
	return st, false, err
}

// heldListings are the host listings an Unchanged that found a change
// read, by host path, for the import that follows (CaptureChecked).
type heldListings struct {
	start time.Time // the check's start: before every listing's lstats
	dirs  map[string][]hostEntry
	n     int // entries in dirs
}

// unchanged is Unchanged; with hold (a capture), a change found does not
// end the walk: the rest of the tree is listed and returned.
func unchanged(ctx context.Context, db *journal.DB, opts ImportOptions, hold bool) (ImportStats, bool, *heldListings, error) {
	if opts.Entries != nil || opts.Message != "" {
		return ImportStats{}, false, nil, nil
	}
	if opts.Branch == "" {
		return ImportStats{}, false, nil, fmt.Errorf("check %s: no branch given", opts.Dir)
	}
	name, err := Name(opts.Dir)
	if err != nil {
		return ImportStats{}, false, nil, err
	}
	abs, _ := filepath.Abs(opts.Dir)
	var warn bytes.Buffer
	// A host entry changed since the mark's racy window ends the check
	// as soon as any goroutine lists it, also while the import records
	// are still being read (the query is interrupted): a push that
	// changes something then pays little for having checked first.
	var settled atomic.Int64
	var recent atomic.Bool
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	im := &importer{ctx: vctx, db: db, opts: opts, name: name, start: now(), out: io.Discard, warn: &warn}
	im.skipStore()
	if hold {
		im.held = &heldListings{start: im.start, dirs: map[string][]hostEntry{}}
	}
	seen := func(dir string, host []hostEntry) {
		s := settled.Load()
		if s == 0 {
			return // not known yet: the walker's allKept checks these
		}
		for i := range host {
			e := &host[i]
			if e.kind == 0 || (dir == abs && strings.HasPrefix(string(e.name), stagingPrefix)) || im.skipped(dir, e.name) {
				continue // never imported (as ignored says)
			}
			if nsOf(e.st.Ctim) >= s {
				recent.Store(true)
				cancel()
				return
			}
		}
	}
	// The host tree is listed on other goroutines from now on, while
	// the store is read.
	r, top := startTreeReader(abs, im.skip, seen)
	defer r.Close()
	err = db.View(vctx, opts.Branch, func(tx *journal.Tx) error {
		snap, ok, err := tx.HeadSnapshot()
		if err != nil || !ok {
			return orChanged(err)
		}
		im.stats.Snapshot = snap
		if opts.RacyByContent && opts.Capture {
			im.racyOK = im.racyByContent(tx)
		}
		n, err := tx.Lookup(journal.RootIno, []byte(name))
		if errors.Is(err, os.ErrNotExist) || (err == nil && !n.IsDir()) {
			return errChanged
		}
		if err != nil {
			return err
		}
		if err := im.unchangedWorkspace(tx, abs, &n, &settled); err != nil {
			return err
		}
		var whole bool
		if im.sorted, whole, err = tx.StatCacheStats("/"+name, cacheLimit); err != nil {
			return err
		}
		if !whole {
			im.sorted = nil
		}
		return im.unchangedDir(tx, r, top, &place{host: abs, store: "/" + name, ino: n.Ino})
	})
	if recent.Load() && ctx.Err() == nil {
		return ImportStats{}, false, nil, nil // whatever the interrupted View returned
	}
	if err == nil && im.changed {
		return ImportStats{}, false, im.held, nil // im.held is the whole tree's listings
	}
	if errors.Is(err, errChanged) {
		return ImportStats{}, false, nil, nil
	}
	if err != nil {
		return ImportStats{}, false, nil, fmt.Errorf("push %s: %w", abs, err)
	}
	io.Copy(orDiscard(opts.Warn), &warn)
	im.stats.NothingChanged = true
	return im.stats, true, nil, nil
}

// unchangedWorkspace fails with errChanged where an Import would write
// to the workspace directory abs itself (branch node n): a capture whose
// record of it is missing or of another mode; a push -m without the mark
// of the last push -m (whose settled time it stores) or that would take
// the directory's attributes again.
func (im *importer) unchangedWorkspace(tx *journal.Tx, abs string, n *journal.Node, settled *atomic.Int64) error {
	var st unix.Stat_t
	if im.opts.Capture {
		// A capture keeps whatever the branch has wherever the host
		// is unchanged (no mark needed), and takes the workspace
		// directory's attributes only if its mode changed.
		if err := unix.Lstat(abs, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: abs, Err: err}
		}
		c, ok, err := tx.ImportRecord("/" + im.name)
		if err != nil || !ok {
			return orChanged(err)
		}
		// Another directory than the records' (its inode): Import drops
		// them (forgetOtherDir), so it is not unchanged.
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || c.Kind != cas.EntryDir || c.Mode != st.Mode&0o7777 || c.Ino != st.Ino {
			return errChanged
		}
	} else {
		var err error
		if im.settled, err = pushSettled(tx, "/"+im.name, n.Ino); err != nil || im.settled == 0 {
			return orChanged(err)
		}
		settled.Store(im.settled)
		// The workspace directory: Import takes its host attributes at
		// the end and rewrites its record if its inode or mode moved.
		if err := unix.Lstat(abs, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: abs, Err: err}
		}
		if err := im.unchangedTop(tx, abs, im.name, &st, n); err != nil {
			return err
		}
	}
	return nil
}

// unchangedTop fails with errChanged where a push -m (not a capture)
// would write to the workspace directory's own node or record.
func (im *importer) unchangedTop(tx *journal.Tx, abs, name string, st *unix.Stat_t, n *journal.Node) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || nsOf(st.Ctim) >= im.settled {
		return errChanged
	}
	c, ok, err := tx.ImportRecord("/" + name)
	if err != nil || !ok {
		return orChanged(err)
	}
	if rec := im.record(cas.EntryDir, st, cas.ID{}); rec != unmark(c) {
		return errChanged
	}
	a, err := hostAttr(abs, st)
	if err != nil {
		return err
	}
	if !sameAttr(n, a) {
		return errChanged
	}
	return nil
}

func orChanged(err error) error {
	if err != nil {
		return err
	}
	return errChanged
}

// sameAttr reports whether branch node n has attributes a (what syncNode
// would leave as it is).
func sameAttr(n *journal.Node, a journal.Attr) bool {
	return (n.Mode == a.Mode || n.Kind == cas.EntrySymlink) && n.UID == a.UID && n.GID == a.GID &&
		n.MTime == a.MTime && sameXattrs(n.Xattrs, a.Xattrs)
}

// unchangedDir is Import's dir for a directory that allKept keeps, and
// fails with errChanged where Import would write: a directory not kept
// whole, a directory record without a mode (rewritten), a subdirectory
// whose attributes Import would take again (ctime since the mark).
func (im *importer) unchangedDir(tx *journal.Tx, r *treeReader, l *listing, pl *place) error {
	if err := im.ctx.Err(); err != nil {
		return err
	}
	host, err := r.take(l)
	if err != nil {
		return err
	}
	if im.held != nil {
		if im.held.n += len(host); im.held.n > cacheLimit {
			im.held = nil // the import lists for itself
		} else {
			im.held.dirs[pl.host] = host
		}
	}
	if im.changed && im.held == nil {
		return errChanged
	}
	var recs []journal.StatRecord
	if !im.changed {
		if im.sorted != nil {
			recs = im.sorted[pl.store]
			delete(im.sorted, pl.store)
		} else if recs, err = statCacheDirSorted(tx, pl.store); err != nil {
			return err
		}
		if !im.allKeptSorted(pl, pl.host, host, recs) {
			if err := im.change(); err != nil {
				return err
			}
		}
	}
	var subs []*place
	var lists []*listing
	j := 0 // recs[j] is the record of the next recorded entry (allKeptSorted)
	for i := range host {
		e := &host[i]
		if im.ignored(pl, e, "") {
			continue
		}
		var c *journal.StatCache
		if !im.changed {
			c = &recs[j].StatCache
			j++
		}
		switch e.kind {
		case cas.EntryFile:
			im.stats.Files++
			im.stats.Unchanged++
		case cas.EntrySymlink:
			im.stats.Symlinks++
		case cas.EntryDir:
			if c != nil && (c.Mode == journal.ModeUnknown || (!im.opts.Capture && nsOf(e.st.Ctim) >= im.settled)) {
				if err := im.change(); err != nil {
					return err
				}
			}
			im.stats.Dirs++
			subs = append(subs, &place{parent: pl, name: e.name, host: filepath.Join(pl.host, string(e.name)),
				store: pl.store + "/" + string(e.name), st: e.st})
			lists = append(lists, r.kid(l, e.name))
		}
	}
	if im.opts.Progress != nil {
		im.opts.Progress(im.stats)
	}
	for i, s := range subs {
		if err := im.unchangedDir(tx, r, lists[i], s); err != nil {
			return err
		}
	}
	return nil
}

// change notes that an import would write: the check's answer is "changed".
// Without held listings that ends the walk (errChanged); with them the
// walk goes on, listing without comparing, for the import that follows.
func (im *importer) change() error {
	if im.held == nil {
		return errChanged
	}
	im.changed = true
	return nil
}

// statCacheDirSorted is tx.StatCacheDir in name order (a workspace with
// more records than cacheLimit reads each directory's own).
func statCacheDirSorted(tx *journal.Tx, dir string) ([]journal.StatRecord, error) {
	m, err := tx.StatCacheDir(dir)
	if err != nil {
		return nil, err
	}
	recs := make([]journal.StatRecord, 0, len(m))
	for name, c := range m {
		recs = append(recs, journal.StatRecord{Name: name, StatCache: c})
	}
	slices.SortFunc(recs, func(a, b journal.StatRecord) int { return strings.Compare(a.Name, b.Name) })
	return recs, nil
}

// racyCheckFiles and racyCheckBytes bound the reading one Unchanged with
// RacyByContent does: past them, reading is a capture's work, and the
// check says changed (the caller captures, which rewrites the records).
const (
	racyCheckFiles = 256
	racyCheckBytes = 64 << 20
)

// racyByContent is Unchanged's racyOK under RacyByContent: a racy record
// of a file or symlink whose host stat is still the recorded one holds if
// the host's content is the recorded content, read now - the decision a
// capture makes for it (hostSame), without storing anything.
func (im *importer) racyByContent(tx *journal.Tx) func(*place, *hostEntry) bool {
	files, size := 0, int64(0)
	return func(pl *place, e *hostEntry) bool {
		files++
		size += e.st.Size
		if files > racyCheckFiles || size > racyCheckBytes {
			return false
		}
		// The whole record: the directory's listing (im.cache,
		// StatCacheDir) may hold only what a stat is compared with.
		c, ok, err := tx.ImportRecord(pl.store + "/" + string(e.name))
		if err != nil || !ok || c.Kind != e.kind || !statSame(c, &e.st) {
			return false
		}
		hp := filepath.Join(pl.host, string(e.name))
		switch e.kind {
		case cas.EntrySymlink:
			target, err := os.Readlink(hp)
			var st unix.Stat_t
			return err == nil && cas.Sum([]byte(target)) == c.Manifest && unix.Lstat(hp, &st) == nil && statSame(c, &st)
		case cas.EntryFile:
			f, err := openHostFile(hp)
			if err != nil {
				return false
			}
			defer f.Close()
			var st unix.Stat_t
			// Only a regular file is read: anything else at the path
			// (swapped in since the lstat) is a change, and reading it
			// would have no end.
			if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !statSame(c, &st) {
				return false
			}
			id, _, err := cas.SparseFileID(im.ctx, f)
			if err != nil || id != c.Manifest {
				return false
			}
			// A write during the read moved the ctime (or, within the
			// timestamp granularity, did not: then the record stays racy
			// and the next check reads the file again).
			return unix.Fstat(int(f.Fd()), &st) == nil && statSame(c, &st)
		}
		return false
	}
}
