package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// stagingPrefix names Export's private staging directories; Import never
// captures them.
const stagingPrefix = ".art-staging-"

// ImportOptions configure Import.
type ImportOptions struct {
	Dir    string // host workspace directory
	Branch string // required (resolved at the edge)
	// Message for the snapshot that ends the import.
	Message string
	// Entries receives one line per entry in the seed's format
	// ("FILE /ws/main.py (1234 bytes, ino 2)"); nil discards them.
	Entries io.Writer
	// Warn receives warnings (skipped special files); nil discards them.
	Warn io.Writer
	// Progress is called after each directory with running totals.
	Progress func(ImportStats)
	// Capture brings in only what changed on the host since the branch's
	// last import and leaves the branch's own changes alone - an agent's
	// work is never undone by its next session's capture. Without it (art
	// push -m) the branch's workspace is made equal to the host directory.
	// When both sides changed a path since the last import, the host's
	// version is taken and the branch's stays in its history, except that
	// an edit beats a deletion on either side; each such path is counted
	// and named in ImportStats (and warned about). See capture.go.
	Capture bool
	// SkipUnchanged: an import that changes nothing in the branch, on a
	// branch whose head is a snapshot, records no op and no snapshot
	// (ImportStats.NothingChanged, Snapshot the head's). The capture
	// before a session, art push -q: an unchanged workspace leaves
	// art log and main~1 as they were. It may still bring the import
	// records up to date (a racy record read again).
	SkipUnchanged bool

	// SoleWriter says nothing else in this process writes to the store
	// (art push -m): a failed import then gives back the pack bytes its
	// rolled-back transaction appended before it records the failure
	// (journal.DB.TrimPacks), which on a full disk needs that space.
	SoleWriter bool

	// RacyByContent is for Unchanged in capture mode only: a racy
	// record (see capture.go) whose file still has the recorded stat is
	// proved unchanged by reading the file (its content id compared with
	// the record's, cas.SparseFileID) instead of ending the check as
	// changed - what the capture itself would do, without its write. At
	// most racyCheckFiles files and racyCheckBytes bytes are read a call;
	// past that the workspace counts as changed. Nothing is written: the
	// records stay racy until a capture rewrites them. The warm daemon's
	// reuse check sets it: a capture moments after an edit (within the
	// racy window) would otherwise make every check fail and discard the
	// mount until a fresh capture is out of the window.
	RacyByContent bool
}

// InterruptedStatus is the status an import's op records when its context
// was cancelled (a signal): the shell's 128+SIGINT.
const InterruptedStatus = 130

// ImportStats summarizes an import.
type ImportStats struct {
	Files       int   `json:"files"`
	Dirs        int   `json:"dirs"`
	Symlinks    int   `json:"symlinks"`
	New         int   `json:"new"`
	Changed     int   `json:"changed"`
	Deleted     int   `json:"deleted"`
	Unchanged   int   `json:"unchanged"`
	Skipped     int   `json:"skipped"`
	BytesRead   int64 `json:"bytes_read"`
	BytesStored int64 `json:"bytes_stored"`
	// Conflicts counts the paths both the host and the branch changed
	// since the last capture; ConflictList names the first 100 and which
	// side's version the branch kept.
	Conflicts    int        `json:"conflicts"`
	ConflictList []Conflict `json:"conflict_paths,omitempty"`
	// Dropped counts, in a push -m --replace (not a capture), the paths
	// the branch had changed since the last import that the import
	// replaced with the host's version or removed; DroppedList names the
	// first 100 (store paths). They stay in the branch's history.
	Dropped     int              `json:"dropped"`
	DroppedList []string         `json:"dropped_paths,omitempty"`
	Snapshot    journal.Snapshot `json:"snapshot"`
	// First says the workspace had no import records on the branch: its
	// first capture, which read every file (BytesRead is their size).
	First bool `json:"first_capture,omitempty"`
	// OtherDir says the records were of another host directory of the
	// same name (see importer.forgetOtherDir): they were dropped, and
	// the import ran as a first one.
	OtherDir bool `json:"other_directory,omitempty"`
	// NothingChanged says the push found the branch already equal to the
	// host (see Unchanged) and wrote nothing: no op, no new snapshot;
	// Snapshot is the branch's head snapshot.
	NothingChanged bool `json:"nothing_changed,omitempty"`
}

// now is the clock an import's racy window is measured against; tests
// move it to take files out of the window without sleeping.
var now = time.Now

// Name returns the workspace name of a host directory: its base name.
func Name(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	name := filepath.Base(abs)
	if name == "/" || name == "." || name == "" {
		return "", fmt.Errorf("workspace %s: the root directory cannot be a workspace", termtext.Quote(dir))
	}
	return name, nil
}

type importer struct {
	ctx   context.Context
	db    *journal.DB
	op    *journal.Op
	batch *journal.Batch
	opts  ImportOptions
	name  string
	stats ImportStats
	// links maps a host (dev, ino) of a multiply-linked file to the art
	// inode that holds it in this import.
	links map[[2]uint64]linked
	start time.Time
	out   io.Writer
	warn  io.Writer
	skip  map[string]bool // host paths never captured: the store's own files
	// skipDirs holds the directories of the skip paths: only there does
	// a host entry's path need to be looked up in skip.
	skipDirs map[string]bool
	pf       *prefetcher // the current directory's files prepared ahead
	la       *lookahead  // the host tree walked ahead (nil: each directory read in turn)
	// cache holds the import cache of the whole workspace, read in one
	// ordered scan at the start, by directory store path; nil if it was
	// larger than cacheLimit (each directory then reads its own). Each
	// directory's part is dropped once used. It stays true while the
	// import runs: nothing else changes the branch during it (see
	// journal.Batch), and the import itself only rewrites the records of
	// a directory while it handles that directory - the records below a
	// path it deletes are never read again, as the host has no directory
	// there to walk into.
	cache map[string]map[string]journal.StatCache
	// sorted is Unchanged's cache: each directory's records in name order,
	// without content ids; also an import's after a check (held), for the
	// directories it keeps whole.
	sorted map[string][]journal.StatRecord
	// held collects the host listings Unchanged reads (CaptureChecked);
	// changed says it found a change and walks on only to list. In an
	// Import, held holds the listings it takes instead of reading them.
	held    *heldListings
	changed bool
	// settled is set in push -m when the last push -m of this workspace
	// left the branch equal to the host and the branch has not changed
	// since (see pushMark): a host entry whose ctime is before it is
	// unchanged since that push synced the branch to it. 0 otherwise.
	settled int64
	// racyOK, when set (Unchanged with RacyByContent), decides a host
	// entry whose record is racy but whose stat is the recorded one:
	// allKept keeps it if racyOK says its content is the recorded one.
	racyOK func(pl *place, e *hostEntry) bool
	// fineDevs caches fineCtime by host device for racy.
	fineDevs map[uint64]bool
}

// cacheLimit bounds the import cache records an import holds in memory at
// once (a record is about 200 bytes).
var cacheLimit = 1 << 17

// Import captures opts.Dir into the branch under /<name>/ and ends with a
// snapshot. It returns what it did. On error the branch keeps every
// directory committed so far (directories are committed in groups, the
// one an error falls in is rolled back whole); the next Import continues
// from there.
func Import(ctx context.Context, db *journal.DB, opts ImportOptions) (ImportStats, error) {
	return importWith(ctx, db, opts, nil)
}

// importWith is Import, taking the host listings in held (if not nil)
// instead of reading them, with its racy window from held's start.
func importWith(ctx context.Context, db *journal.DB, opts ImportOptions, held *heldListings) (ImportStats, error) {
	if opts.Branch == "" {
		// Resolved once at the edge (the CLI's flags, a request) and passed down.
		return ImportStats{}, fmt.Errorf("import %s: no branch given", opts.Dir)
	}
	name, err := Name(opts.Dir)
	if err != nil {
		return ImportStats{}, err
	}
	st, err := os.Stat(opts.Dir)
	if err != nil {
		return ImportStats{}, fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return ImportStats{}, fmt.Errorf("workspace %s: not a directory", termtext.Quote(opts.Dir))
	}
	abs, _ := filepath.Abs(opts.Dir)
	op, err := db.BeginOp(ctx, opts.Branch, "import", "push "+abs)
	if err != nil {
		return ImportStats{}, err
	}
	// Recorded with the first change: an import that changes nothing
	// appends no event (SkipUnchanged).
	op.SetLead(journal.Event{Kind: journal.EvBegin, Text: "push " + abs})
	im := &importer{ctx: ctx, db: db, op: op, opts: opts, name: name, links: map[[2]uint64]linked{},
		start: now(), out: orDiscard(opts.Entries), warn: orDiscard(opts.Warn),
		// Directories share transactions: statements stay prepared and
		// commits are amortized (each writes the b-trees' hot pages to
		// the WAL again: from 64 to 256 directories a group, an ingest
		// of Go's src/ wrote 10,000 fewer pages), while other writers of
		// the store wait at most one group: 250 ms past its first
		// directory, or 256 directories.
		batch: op.NewBatch(250*time.Millisecond, 256)}
	if held != nil {
		im.held, im.start = held, held.start
	}
	// An import stops at its first error: it needs no savepoint per
	// directory (journal.Batch.Unguarded).
	im.batch.Unguarded()
	im.skipStore()
	err = im.run(abs)
	if cerr := im.batch.Commit(); err == nil {
		err = cerr
	}
	if err == nil && im.stats.NothingChanged {
		gone, derr := op.Discard(ctx)
		if derr != nil || gone {
			return im.stats, derr
		}
		im.stats.NothingChanged = false // it recorded something after all: ended below
	}
	status := 0
	if err != nil {
		status = 1
		if ctx.Err() != nil {
			status = InterruptedStatus
		}
		if opts.SoleWriter {
			db.TrimPacks(context.WithoutCancel(ctx)) // best effort: gc reclaims them otherwise
		}
	}
	// The op is ended even when ctx was cancelled: an interrupted import
	// is recorded as such, not left looking like one still running.
	if endErr := op.End(context.WithoutCancel(ctx), &status); err == nil {
		err = endErr
	}
	return im.stats, err
}

// skipStore sets im.skip to the store's own files.
func (im *importer) skipStore() {
	im.skip, im.skipDirs = map[string]bool{}, map[string]bool{}
	for _, f := range StoreFiles(im.db.Path()) {
		im.skip[f] = true
		im.skipDirs[filepath.Dir(f)] = true
	}
}

// skipped reports whether host entry name of directory dir is one of the
// store's own files (without building its path anywhere else).
func (im *importer) skipped(dir string, name []byte) bool {
	return im.skipDirs[dir] && im.skip[filepath.Join(dir, string(name))]
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// run imports host directory abs, the workspace: its directory in the
// branch (workspaceDir), every directory below it (dir), then the
// workspace directory's own attributes and the snapshot (finish).
func (im *importer) run(abs string) error {
	var wsIno int64
	err := im.batch.Update(im.ctx, func(tx *journal.Tx) error {
		var err error
		wsIno, err = im.workspaceDir(tx, abs)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(im.out, "Workspace name: %s\nFiles will be stored under: %s\n", termtext.Quote(im.name), termtext.Quote("/"+im.name+"/"))
	im.stats.First = im.cache != nil && len(im.cache) == 0
	if im.stats.First {
		// The first import of the workspace (no records: every file is
		// read) walks the host tree ahead (lookahead.go). Later ones read
		// each directory in turn: most directories are then unchanged,
		// and handing each listing across goroutines cost more than it
		// saved (a no-op push -m of Go's src/: 71 ms of CPU, 82 with the
		// walk). The walk owns the import cache from here (importer.cache
		// stays nil; a directory it has no listing for reads its own
		// records).
		im.la = startLookahead(im.ctx, im.db.Objects(), abs, "/"+im.name, im.skip, im.cache)
		im.cache = nil
	}
	err = im.dir(&place{host: abs, store: "/" + im.name, ino: wsIno})
	im.la.finish()
	im.la = nil
	if err != nil {
		return err
	}
	return im.batch.Update(im.ctx, func(tx *journal.Tx) error {
		return im.finish(tx, abs, wsIno)
	})
}

// workspaceDir makes sure the branch has the workspace's directory
// /<name> (replacing anything else there) and returns its inode. It reads
// the push -m mark (settled) and the import records of the whole
// workspace if they are few enough (importer.cache).
func (im *importer) workspaceDir(tx *journal.Tx, abs string) (int64, error) {
	a, err := hostAttr(abs, nil)
	if err != nil {
		return 0, err
	}
	n, err := tx.Lookup(journal.RootIno, []byte(im.name))
	switch {
	case err == nil && n.IsDir():
	case err == nil:
		if err := tx.RemoveAll(journal.RootIno, []byte(im.name)); err != nil {
			return 0, err
		}
		fallthrough
	case errors.Is(err, os.ErrNotExist):
		if n, err = tx.Create(journal.RootIno, []byte(im.name), a); err != nil {
			return 0, err
		}
	default:
		return 0, err
	}
	if err := im.forgetOtherDir(tx, abs); err != nil {
		return 0, err
	}
	if !im.opts.Capture {
		if im.settled, err = pushSettled(tx, "/"+im.name, n.Ino); err != nil {
			return 0, err
		}
	}
	var whole bool
	if im.held != nil {
		// After a check that found a change (CaptureChecked) most
		// directories are kept whole, which needs no content ids: the
		// records without them are cheaper to read (StatCacheStats); a
		// directory not kept whole reads its own in full (decideDir).
		im.sorted, whole, err = tx.StatCacheStats("/"+im.name, cacheLimit)
		if err != nil {
			return 0, err
		}
		if whole && len(im.sorted) > 0 {
			return n.Ino, nil
		}
		im.sorted = nil
	}
	im.cache, whole, err = tx.StatCacheTree("/"+im.name, cacheLimit)
	if !whole {
		im.cache = nil
	}
	return n.Ino, err
}

// forgetOtherDir drops the branch's import records of the workspace if
// they were made of another host directory of the same name (a pull
// into a second checkout, or a clone at another path): the workspace's
// own record holds the inode of the directory the records describe
// (finish, RecordPulled). What this directory lacks is then no deletion
// on the host - taking it for one would silently drop the agent's work
// that the other directory received - so the import runs as a first one:
// it adds and updates, removes nothing the branch has, and names each
// path whose content differs (the host's is taken; the branch's stays in
// history). The inode alone is the identity: a directory removed and
// made again at the same path may get the same number back, and is then
// taken for the same directory, as before this check.
func (im *importer) forgetOtherDir(tx *journal.Tx, abs string) error {
	rec, ok, err := tx.ImportRecord("/" + im.name)
	if err != nil || !ok || rec.Kind != cas.EntryDir {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: abs, Err: err}
	}
	if rec.Ino == st.Ino {
		return nil
	}
	im.stats.OtherDir = true
	// Listings a check read (CaptureChecked) may be of the directory
	// the records were of: this one lists for itself.
	im.held = nil
	return tx.DeleteStatCache("/" + im.name)
}

// finish ends the import of workspace abs (branch directory wsIno): the
// workspace directory's own attributes, the end event and snapshot (none
// when SkipUnchanged finds nothing changed), and the workspace's record,
// with the push -m mark when the branch is now the host's.
func (im *importer) finish(tx *journal.Tx, abs string, wsIno int64) error {
	// The workspace directory's own attributes last: importing its
	// children does not touch them. A capture takes them only if the
	// host changed its mode since the last one.
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: abs, Err: err}
	}
	c, cached, err := tx.ImportRecord("/" + im.name)
	if err != nil {
		return err
	}
	rec := im.record(cas.EntryDir, &st, cas.ID{})
	if !im.opts.Capture || !cached || c.Mode != rec.Mode {
		a, err := hostAttr(abs, &st)
		if err != nil {
			return err
		}
		if err := im.syncAttr(tx, wsIno, a); err != nil {
			return err
		}
	}
	if im.opts.SkipUnchanged && im.op.LeadPending() {
		// Nothing changed in the branch: no end, no snapshot, if the
		// head is one already (else the session needs one to start
		// from).
		snap, ok, err := tx.HeadSnapshot()
		if err != nil {
			return err
		}
		if ok {
			im.stats.Snapshot, im.stats.NothingChanged = snap, true
			if !cached || c != rec {
				return tx.SetStatCache("/"+im.name, rec)
			}
			return nil
		}
	}
	msg := im.opts.Message
	if msg == "" {
		msg = "push " + abs
	}
	if err := tx.Record(journal.Event{Kind: journal.EvEnd, Text: msg}); err != nil {
		return err
	}
	if im.stats.Snapshot, err = tx.Snapshot(msg); err != nil {
		return err
	}
	if !im.opts.Capture && im.stats.Conflicts == 0 {
		// The branch's workspace is now the host's: say so, with the
		// tree it has now, for the next push -m (pushSettled). A
		// capture leaves the mark out: the branch keeps its own.
		tree, clean, err := tx.DirTree(wsIno)
		if err != nil {
			return err
		}
		if clean {
			rec = pushMark(rec, tree, im.start.UnixNano())
		}
	}
	if !cached || c != rec {
		if err := tx.SetStatCache("/"+im.name, rec); err != nil {
			return err
		}
	}
	return nil
}

// hostEntry is one lstat'ed name in a host directory.
type hostEntry struct {
	name []byte
	st   unix.Stat_t
	kind cas.EntryKind // 0: unsupported
	// xattrs are its user.* xattrs when read after st by the lookahead
	// (hasXattrs), so the importer need not list them itself.
	xattrs    []cas.Xattr
	hasXattrs bool
}

func kindOf(mode uint32) cas.EntryKind {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return cas.EntryFile
	case unix.S_IFDIR:
		return cas.EntryDir
	case unix.S_IFLNK:
		return cas.EntrySymlink
	}
	return 0
}

// entryAttr is hostAttr of host entry e, at host path path, with the
// xattrs the lookahead read if it did.
func entryAttr(path string, e *hostEntry) (journal.Attr, error) {
	if !e.hasXattrs || kindOf(e.st.Mode) == cas.EntrySymlink {
		return hostAttr(path, &e.st)
	}
	st := &e.st
	return journal.Attr{Kind: kindOf(st.Mode), Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid,
		MTime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, Xattrs: e.xattrs}, nil
}

// hostAttr reads the metadata of path (lstat) and its user.* xattrs.
func hostAttr(path string, st *unix.Stat_t) (journal.Attr, error) {
	if st == nil {
		st = new(unix.Stat_t)
		if err := unix.Lstat(path, st); err != nil {
			return journal.Attr{}, &os.PathError{Op: "lstat", Path: path, Err: err}
		}
	}
	a := journal.Attr{Kind: kindOf(st.Mode), Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid,
		MTime: st.Mtim.Sec*1e9 + st.Mtim.Nsec}
	if a.Kind == cas.EntrySymlink {
		a.Mode = 0o777
		return a, nil // user.* xattrs are not allowed on symlinks
	}
	xs, err := readXattrs(path)
	if err != nil {
		return journal.Attr{}, err
	}
	a.Xattrs = xs
	return a, nil
}

func readXattrs(path string) ([]cas.Xattr, error) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Llistxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, &os.PathError{Op: "listxattr", Path: path, Err: err}
		}
		var xs []cas.Xattr
		for _, name := range bytes.Split(buf[:n], []byte{0}) {
			if !bytes.HasPrefix(name, []byte("user.")) {
				continue
			}
			v, err := getXattr(path, string(name))
			if errors.Is(err, unix.ENODATA) {
				continue
			}
			if err != nil {
				return nil, err
			}
			xs = append(xs, cas.Xattr{Name: string(name), Value: v})
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
		return xs, nil
	}
}

func getXattr(path, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "getxattr " + name, Path: path, Err: err}
		}
		return append([]byte{}, buf[:n]...), nil
	}
}

// dir imports one host directory, at place pl in the branch, and recurses:
// it lists the host directory (hostListing), decides every entry in one
// step of the batch (decideDir), then imports each subdirectory
// (subdirs).
func (im *importer) dir(pl *place) error {
	if err := im.ctx.Err(); err != nil {
		return err
	}
	host, listed, err := im.hostListing(pl.host)
	if err != nil {
		return err
	}
	var subs []*place
	err = im.batch.Update(im.ctx, func(tx *journal.Tx) error {
		var err error
		subs, err = im.decideDir(tx, pl, host, listed)
		return err
	})
	if err != nil {
		return err
	}
	if im.opts.Progress != nil {
		im.opts.Progress(im.stats)
	}
	return im.subdirs(subs)
}

// hostListing returns the entries of host directory hostPath, sorted by
// name: the lookahead's listing if it walked there, with the import
// records it read of the directory (listed; nil otherwise), or read now.
func (im *importer) hostListing(hostPath string) (host []hostEntry, listed map[string]journal.StatCache, err error) {
	if l := im.la.next(hostPath); l != nil {
		if l.err != nil {
			return nil, nil, l.err
		}
		return l.ents, l.cache, nil
	}
	if im.held != nil {
		if host, ok := im.held.dirs[hostPath]; ok {
			delete(im.held.dirs, hostPath) // taken once, as a listing read now would be
			return host, nil, nil
		}
	}
	host, err = readHostDir(hostPath)
	return host, nil, err
}

// decideDir brings host directory pl's entries (host) into the branch
// and returns its subdirectories to import next.
func (im *importer) decideDir(tx *journal.Tx, pl *place, host []hostEntry, listed map[string]journal.StatCache) ([]*place, error) {
	if listed == nil && im.sorted != nil {
		recs := im.sorted[pl.store]
		delete(im.sorted, pl.store) // read once: see importer.cache
		if im.allKeptSorted(pl, pl.host, host, recs) {
			j := 0 // recs are the recorded entries', in order (allKeptSorted)
			return im.keepAll(tx, pl, host, func(*hostEntry) (journal.StatCache, bool) {
				j++
				return recs[j-1].StatCache, true
			})
		}
		cache, err := tx.StatCacheDir(pl.store)
		if err != nil {
			return nil, err
		}
		return im.changedDir(tx, pl, host, cache)
	}
	cache, err := im.dirRecords(tx, pl, listed)
	if err != nil {
		return nil, err
	}
	if im.allKept(pl, pl.host, host, cache) {
		// Nothing of the host changed here: a capture keeps whatever the
		// branch has, a push -m has it already (allKept), so its listing
		// is not read.
		return im.keepAll(tx, pl, host, func(e *hostEntry) (journal.StatCache, bool) {
			c, ok := cache[string(e.name)]
			return c, ok
		})
	}
	return im.changedDir(tx, pl, host, cache)
}

// dirRecords returns the import records of directory pl by name: the
// lookahead's (listed) if it read them, else from the records of the whole
// workspace read at the start (each directory's part once: see
// importer.cache), else read now.
func (im *importer) dirRecords(tx *journal.Tx, pl *place, listed map[string]journal.StatCache) (map[string]journal.StatCache, error) {
	if listed != nil {
		return listed, nil
	}
	if im.cache == nil {
		return tx.StatCacheDir(pl.store)
	}
	cache := im.cache[pl.store]
	delete(im.cache, pl.store) // read once: see importer.cache
	if cache == nil {
		cache = map[string]journal.StatCache{}
	}
	return cache, nil
}

// keepAll is decideDir for a directory allKept keeps whole: every entry
// is kept (keep), without the branch's listing. record gives each entry's
// import record, called once for each entry not ignored, in order.
func (im *importer) keepAll(tx *journal.Tx, pl *place, host []hostEntry, record func(*hostEntry) (journal.StatCache, bool)) ([]*place, error) {
	var subs []*place
	var ps pathState // one for the directory: keep does not hold on to it
	for i := range host {
		e := &host[i]
		hp := filepath.Join(pl.host, string(e.name))
		if im.ignored(pl, e, hp) {
			continue
		}
		ps = pathState{pl: pl, name: e.name, e: e, hp: hp, sp: pl.store + "/" + string(e.name)}
		ps.rec, ps.cached = record(e)
		sub, err := im.keep(tx, &ps)
		if err != nil {
			return nil, err
		}
		if sub != nil {
			sub.lazy = true // whether the branch has it is looked up if needed
			sub.sync = !im.opts.Capture && nsOf(e.st.Ctim) >= im.settled
			subs = append(subs, sub)
		}
	}
	return subs, nil
}

// changedDir is decideDir for a directory where something may have
// changed: each host entry is decided against the branch's listing
// (hostEntries), what only the branch has is removed or kept
// (branchOnly), and records of paths neither side has are deleted.
func (im *importer) changedDir(tx *journal.Tx, pl *place, host []hostEntry, cache map[string]journal.StatCache) ([]*place, error) {
	if err := im.resolve(tx, pl); err != nil {
		return nil, err
	}
	var have []journal.Dirent
	if pl.ino != 0 {
		var err error
		if have, err = tx.ReadDir(pl.ino); err != nil {
			return nil, err
		}
	}
	byName := make(map[string]journal.Node, len(have))
	for _, d := range have {
		byName[string(d.Name)] = d.Node
	}
	if im.la == nil {
		if cands := im.prefetchable(pl, pl.host, host, cache); len(cands) >= 2 {
			im.pf = startPrefetch(im.ctx, im.db.Objects(), cands)
			defer func() {
				im.pf.finish()
				im.pf = nil
			}()
		}
	}
	subs, seen, err := im.hostEntries(tx, pl, host, byName, cache)
	if err != nil {
		return nil, err
	}
	if err := im.branchOnly(tx, pl, have, seen, cache); err != nil {
		return nil, err
	}
	// What imports recorded of paths neither side has any more.
	for name := range cache {
		if _, ok := byName[name]; !ok && !seen[name] {
			if err := tx.DeleteStatCache(pl.store + "/" + name); err != nil {
				return nil, err
			}
		}
	}
	return subs, nil
}

// hostEntries decides each host entry of directory pl (entry) against
// the branch's node of that name (byName) and its import record (cache).
// It returns the subdirectories to import and the names it decided.
func (im *importer) hostEntries(tx *journal.Tx, pl *place, host []hostEntry, byName map[string]journal.Node,
	cache map[string]journal.StatCache) ([]*place, map[string]bool, error) {
	var subs []*place
	seen := make(map[string]bool, len(host))
	var ps pathState // one for the directory: entry does not hold on to it
	for i := range host {
		e := &host[i]
		hp := filepath.Join(pl.host, string(e.name))
		if im.ignored(pl, e, hp) {
			continue
		}
		seen[string(e.name)] = true
		ps = pathState{pl: pl, name: e.name, e: e, hp: hp, sp: pl.store + "/" + string(e.name)}
		ps.old, ps.exists = byName[string(e.name)]
		ps.rec, ps.cached = cache[string(e.name)]
		sub, err := im.entry(tx, &ps)
		if err != nil {
			return nil, nil, err
		}
		if sub != nil {
			subs = append(subs, sub)
		}
	}
	return subs, seen, nil
}

// branchOnly handles the entries of the branch's directory pl (have) that
// the host does not have (not seen): a capture removes what the branch has
// not changed since the last import (removeCaptured); a push -m removes
// them all, naming what the branch had made or changed (dropRemoved).
func (im *importer) branchOnly(tx *journal.Tx, pl *place, have []journal.Dirent, seen map[string]bool,
	cache map[string]journal.StatCache) error {
	for _, d := range have {
		if seen[string(d.Name)] {
			continue
		}
		ps := pathState{pl: pl, name: d.Name, sp: pl.store + "/" + string(d.Name), old: d.Node, exists: true}
		ps.rec, ps.cached = cache[string(d.Name)]
		if im.opts.Capture {
			if _, err := im.removeCaptured(tx, pl.ino, &ps); err != nil {
				return err
			}
			continue
		}
		if err := im.dropRemoved(tx, &ps); err != nil {
			return err
		}
		if err := im.remove(tx, pl.ino, d.Name, &d.Node); err != nil {
			return err
		}
		if err := tx.DeleteStatCache(ps.sp); err != nil {
			return err
		}
	}
	return nil
}

// subdirs imports each subdirectory decideDir returned (dir), and then
// takes the host directory's attributes where the place says to (sync).
func (im *importer) subdirs(subs []*place) error {
	for _, s := range subs {
		if err := im.dir(s); err != nil {
			return err
		}
		if !s.sync || (!s.lazy && s.ino == 0) {
			continue
		}
		// Attributes after children (and re-read: importing must not
		// have changed them, but the host may have).
		a, err := hostAttr(s.host, nil)
		if err != nil {
			return err
		}
		err = im.batch.Update(im.ctx, func(tx *journal.Tx) error {
			if err := im.resolve(tx, s); err != nil || s.ino == 0 {
				return err
			}
			return im.syncAttr(tx, s.ino, a)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ignored reports whether host entry e of directory pl (at host path
// hp, or "" to have it built only if needed) is left out of the import,
// and warns of a skipped special file.
func (im *importer) ignored(pl *place, e *hostEntry, hp string) bool {
	if pl.parent == nil && strings.HasPrefix(string(e.name), stagingPrefix) {
		return true // an interrupted pull's staging area
	}
	if im.skipped(pl.host, e.name) {
		return true // the store itself, kept inside the workspace
	}
	if e.kind == 0 {
		if hp == "" {
			hp = filepath.Join(pl.host, string(e.name))
		}
		fmt.Fprintf(im.warn, "warning: skipping %s: %s (only files, directories and symlinks are captured)\n", termtext.Quote(hp), fileType(e.st.Mode))
		im.stats.Skipped++
		return true
	}
	return false
}

// allKept reports whether an import of directory pl can keep everything
// without reading the branch's listing: every host entry's record proves
// it unchanged (as entry decides: same kind and mode, and for a file or
// symlink an equal stat that was not racy), every record's path is still
// on the host (nothing to delete), and no entry line names an inode. A
// capture then keeps whatever the branch has. A push -m must also know
// the branch equal to the host: only with a mark of the last push -m
// (im.settled), and for files and symlinks whose ctime is from before
// that push (owner, mode, xattrs and the stat unchanged since it synced
// them; a directory's attributes are synced after its children unless
// its own ctime is that old).
func (im *importer) allKept(pl *place, hostPath string, host []hostEntry, cache map[string]journal.StatCache) bool {
	if (!im.opts.Capture && im.settled == 0) || im.out != io.Discard {
		return false
	}
	kept := 0
	for i := range host {
		e := &host[i]
		if !im.recorded(pl, hostPath, e) {
			continue
		}
		c, cached := cache[string(e.name)]
		if !cached || !im.keptEntry(pl, e, &c) {
			return false // new on the host (or a directory from before records), or changed
		}
		kept++
	}
	// Every record matched a distinct host name: none is of a path the
	// host no longer has.
	return kept == len(cache)
}

// allKeptSorted is allKept with the directory's records in name order
// (journal.StatCacheStats), as host is: one pass over both.
func (im *importer) allKeptSorted(pl *place, hostPath string, host []hostEntry, recs []journal.StatRecord) bool {
	if (!im.opts.Capture && im.settled == 0) || im.out != io.Discard {
		return false
	}
	j := 0
	for i := range host {
		e := &host[i]
		if !im.recorded(pl, hostPath, e) {
			continue
		}
		// A record of a name before e's is of a path the host no longer
		// has (or has as an entry never imported); one after it, a host
		// entry without a record: either way not kept.
		if j == len(recs) || recs[j].Name != string(e.name) || !im.keptEntry(pl, e, &recs[j].StatCache) {
			return false
		}
		j++
	}
	return j == len(recs)
}

// recorded reports whether host entry e of directory pl is one an import
// records (allKept's test; the same entries ignored skips).
func (im *importer) recorded(pl *place, hostPath string, e *hostEntry) bool {
	if pl.parent == nil && strings.HasPrefix(string(e.name), stagingPrefix) {
		return false
	}
	return e.kind != 0 && !im.skipped(hostPath, e.name)
}

// keptEntry reports whether record c proves host entry e unchanged (see
// allKept).
func (im *importer) keptEntry(pl *place, e *hostEntry, c *journal.StatCache) bool {
	mode := e.st.Mode & 0o7777
	if e.kind == cas.EntrySymlink {
		mode = 0o777
	}
	if c.Kind != e.kind || (c.Mode != journal.ModeUnknown && c.Mode != mode) {
		return false
	}
	if e.kind != cas.EntryDir && !statSame(*c, &e.st) {
		return false
	}
	if e.kind != cas.EntryDir && c.Racy && (im.racyOK == nil || !im.racyOK(pl, e)) {
		return false
	}
	if !im.opts.Capture && e.kind != cas.EntryDir && nsOf(e.st.Ctim) >= im.settled {
		return false // push -m: owner, mtime or xattrs may have changed since the branch took them
	}
	return true
}

// resolve looks up, if not done yet, whether the branch has a directory
// at place p (p.ino; 0 if not), as the parent's listing would have said.
func (im *importer) resolve(tx *journal.Tx, p *place) error {
	if !p.lazy {
		return nil
	}
	if err := im.resolve(tx, p.parent); err != nil {
		return err
	}
	p.lazy = false
	if p.parent.ino == 0 {
		return nil
	}
	n, err := tx.Lookup(p.parent.ino, p.name)
	switch {
	case err == nil && n.IsDir():
		p.ino = n.Ino
	case err == nil || errors.Is(err, os.ErrNotExist):
	default:
		p.lazy = true
		return err
	}
	return nil
}

// prefetchable lists the host paths of directory pl whose content the
// import will read (new, changed or racy since the last import; small;
// one name), in the order it will read them.
func (im *importer) prefetchable(pl *place, hostPath string, host []hostEntry, cache map[string]journal.StatCache) []string {
	return prefetchCandidates(pl, hostPath, host, cache, im.skip)
}

// prefetchCandidates is prefetchable with the importer's skipped paths
// given (the lookahead's walk calls it on its own goroutine).
func prefetchCandidates(pl *place, hostPath string, host []hostEntry, cache map[string]journal.StatCache, skip map[string]bool) []string {
	var out []string
	for i := range host {
		e := &host[i]
		if e.kind != cas.EntryFile || e.st.Size > prefetchMaxFile || e.st.Nlink > 1 {
			continue
		}
		if pl.parent == nil && strings.HasPrefix(string(e.name), stagingPrefix) {
			continue
		}
		c, cached := cache[string(e.name)]
		if cached && !c.Racy && c.Kind == e.kind && (c.Mode == journal.ModeUnknown || c.Mode == e.st.Mode&0o7777) && statSame(c, &e.st) {
			continue // unchanged: not read
		}
		hp := filepath.Join(hostPath, string(e.name))
		if skip[hp] {
			continue
		}
		out = append(out, hp)
	}
	return out
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}

// remove deletes a store entry that the host no longer has, counting files.
func (im *importer) remove(tx *journal.Tx, dir int64, name []byte, n *journal.Node) error {
	if n.IsDir() {
		kids, err := tx.ReadDir(n.Ino)
		if err != nil {
			return err
		}
		for i := range kids {
			if err := im.remove(tx, n.Ino, kids[i].Name, &kids[i].Node); err != nil {
				return err
			}
		}
		return tx.Rmdir(dir, name)
	}
	if n.Kind == cas.EntryFile {
		im.stats.Deleted++
	}
	return tx.Unlink(dir, name)
}

// syncAttr sets whatever of mode, owner, mtime and xattrs differs.
func (im *importer) syncAttr(tx *journal.Tx, ino int64, a journal.Attr) error {
	n, err := tx.Get(ino)
	if err != nil {
		return err
	}
	return im.syncNode(tx, &n, a)
}

// syncNode is syncAttr for a node the caller has just read.
func (im *importer) syncNode(tx *journal.Tx, n *journal.Node, a journal.Attr) error {
	var mask uint32
	if n.Mode != a.Mode && n.Kind != cas.EntrySymlink {
		mask |= journal.SetMode
	}
	if n.UID != a.UID {
		mask |= journal.SetUID
	}
	if n.GID != a.GID {
		mask |= journal.SetGID
	}
	if n.MTime != a.MTime {
		mask |= journal.SetMTime
	}
	if !sameXattrs(n.Xattrs, a.Xattrs) {
		mask |= journal.SetXattrs
	}
	if mask == 0 {
		return nil
	}
	_, err := tx.SetAttr(n.Ino, mask, a)
	return err
}

func sameXattrs(a, b []cas.Xattr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}
