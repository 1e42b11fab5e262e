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
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// stagingPrefix names Export's private staging directories; Import never
// captures them.
const stagingPrefix = ".art-staging-"

// ImportOptions configure Import.
type ImportOptions struct {
	Dir    string // host workspace directory
	Branch string // default journal.DefaultBranch
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
	// In capture mode, when both sides changed a file since the last
	// import, the host's edit wins if the branch remembers the file's
	// imported state, else the branch's version is kept; either way a
	// warning names the file.
	Capture bool
}

// ImportStats summarizes an import.
type ImportStats struct {
	Files       int              `json:"files"`
	Dirs        int              `json:"dirs"`
	Symlinks    int              `json:"symlinks"`
	New         int              `json:"new"`
	Changed     int              `json:"changed"`
	Deleted     int              `json:"deleted"`
	Unchanged   int              `json:"unchanged"`
	Skipped     int              `json:"skipped"`
	BytesRead   int64            `json:"bytes_read"`
	BytesStored int64            `json:"bytes_stored"`
	Snapshot    journal.Snapshot `json:"snapshot"`
}

// Name returns the workspace name of a host directory: its base name.
func Name(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	name := filepath.Base(abs)
	if name == "/" || name == "." || name == "" {
		return "", fmt.Errorf("workspace %s: the root directory cannot be a workspace", dir)
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
	links map[[2]uint64]int64
	start time.Time
	out   io.Writer
	warn  io.Writer
	skip  map[string]bool // host paths never captured: the store's own files
}

// Import captures opts.Dir into the branch under /<name>/ and ends with a
// snapshot. It returns what it did. On error the branch keeps every
// directory committed so far (each directory is one transaction); the next
// Import continues from there.
func Import(ctx context.Context, db *journal.DB, opts ImportOptions) (ImportStats, error) {
	if opts.Branch == "" {
		opts.Branch = journal.DefaultBranch
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
		return ImportStats{}, fmt.Errorf("workspace %s: not a directory", opts.Dir)
	}
	abs, _ := filepath.Abs(opts.Dir)
	op, err := db.BeginOp(ctx, opts.Branch, "import", "push "+abs)
	if err != nil {
		return ImportStats{}, err
	}
	im := &importer{ctx: ctx, db: db, op: op, opts: opts, name: name, links: map[[2]uint64]int64{},
		start: time.Now(), out: orDiscard(opts.Entries), warn: orDiscard(opts.Warn), skip: map[string]bool{},
		// Directories share transactions, 64 at a time: statements stay
		// prepared and commits are amortized, while other writers of the
		// store wait at most one group.
		batch: op.NewBatch(0, 64)}
	for _, f := range StoreFiles(db.Path()) {
		im.skip[f] = true
	}
	err = im.run(abs)
	if cerr := im.batch.Commit(); err == nil {
		err = cerr
	}
	status := 0
	if err != nil {
		status = 1
	}
	if endErr := op.End(ctx, &status); err == nil {
		err = endErr
	}
	return im.stats, err
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func (im *importer) run(abs string) error {
	var wsIno int64
	err := im.batch.Update(im.ctx, func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvBegin, Text: "push " + abs}); err != nil {
			return err
		}
		a, err := hostAttr(abs, nil)
		if err != nil {
			return err
		}
		n, err := tx.Lookup(journal.RootIno, []byte(im.name))
		switch {
		case err == nil && n.IsDir():
		case err == nil:
			if err := tx.RemoveAll(journal.RootIno, []byte(im.name)); err != nil {
				return err
			}
			fallthrough
		case errors.Is(err, os.ErrNotExist):
			if n, err = tx.Create(journal.RootIno, []byte(im.name), a); err != nil {
				return err
			}
		default:
			return err
		}
		wsIno = n.Ino
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(im.out, "Workspace name: %s\nFiles will be stored under: /%s/\n", im.name, im.name)
	if err := im.dir(abs, "/"+im.name, wsIno); err != nil {
		return err
	}
	return im.batch.Update(im.ctx, func(tx *journal.Tx) error {
		// The workspace directory's own attributes last: importing its
		// children does not touch them.
		a, err := hostAttr(abs, nil)
		if err != nil {
			return err
		}
		if err := im.syncAttr(tx, wsIno, a); err != nil {
			return err
		}
		msg := im.opts.Message
		if msg == "" {
			msg = "push " + abs
		}
		if err := tx.Record(journal.Event{Kind: journal.EvEnd, Text: msg}); err != nil {
			return err
		}
		im.stats.Snapshot, err = tx.Snapshot(msg)
		return err
	})
}

// hostEntry is one lstat'ed name in a host directory.
type hostEntry struct {
	name []byte
	st   unix.Stat_t
	kind cas.EntryKind // 0: unsupported
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

func readHostDir(path string) ([]hostEntry, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", path, err)
	}
	sort.Strings(names)
	out := make([]hostEntry, 0, len(names))
	for _, n := range names {
		e := hostEntry{name: []byte(n)}
		if err := unix.Fstatat(fd, n, &e.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed while we looked
			}
			return nil, &os.PathError{Op: "lstat", Path: filepath.Join(path, n), Err: err}
		}
		e.kind = kindOf(e.st.Mode)
		out = append(out, e)
	}
	return out, nil
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

// dir imports one host directory (already present as dirIno) and recurses.
func (im *importer) dir(hostPath, storePath string, dirIno int64) error {
	if err := im.ctx.Err(); err != nil {
		return err
	}
	host, err := readHostDir(hostPath)
	if err != nil {
		return err
	}
	type sub struct {
		host, store string
		ino         int64
		attr        journal.Attr
	}
	var subs []sub
	err = im.batch.Update(im.ctx, func(tx *journal.Tx) error {
		subs = subs[:0]
		have, err := tx.ReadDir(dirIno)
		if err != nil {
			return err
		}
		byName := make(map[string]journal.Node, len(have))
		for _, d := range have {
			byName[string(d.Name)] = d.Node
		}
		cache, err := tx.StatCacheDir(storePath)
		if err != nil {
			return err
		}
		seen := make(map[string]bool, len(host))
		for i := range host {
			e := &host[i]
			hp := filepath.Join(hostPath, string(e.name))
			sp := storePath + "/" + string(e.name)
			if storePath == "/"+im.name && strings.HasPrefix(string(e.name), stagingPrefix) {
				continue // an interrupted pull's staging area
			}
			if im.skip[hp] {
				continue // the store itself, kept inside the workspace
			}
			if e.kind == 0 {
				fmt.Fprintf(im.warn, "warning: skipping %s: %s (only files, directories and symlinks are captured)\n", hp, fileType(e.st.Mode))
				im.stats.Skipped++
				continue
			}
			seen[string(e.name)] = true
			old, exists := byName[string(e.name)]
			if im.opts.Capture {
				skip, err := im.captureSkips(tx, e, sp, old, exists, cache)
				if err != nil {
					return err
				}
				if skip {
					continue
				}
			}
			if exists && (old.Kind != e.kind || (e.kind == cas.EntryFile && e.st.Nlink == 1 && old.Nlink > 1)) {
				if err := im.remove(tx, dirIno, e.name, &old); err != nil {
					return err
				}
				exists = false
			}
			a, err := hostAttr(hp, &e.st)
			if err != nil {
				return err
			}
			switch e.kind {
			case cas.EntryDir:
				im.stats.Dirs++
				n := old
				if !exists {
					// The directory's own attributes are applied after its
					// children; create it with them anyway so the state is
					// complete at every commit.
					if n, err = tx.Create(dirIno, e.name, a); err != nil {
						return err
					}
				}
				fmt.Fprintf(im.out, "DIR  %s (ino %d)\n", sp, n.Ino)
				subs = append(subs, sub{hp, sp, n.Ino, a})
			case cas.EntrySymlink:
				im.stats.Symlinks++
				target, err := os.Readlink(hp)
				if err != nil {
					return err
				}
				a.Link = []byte(target)
				if exists && !bytes.Equal(old.Link, a.Link) {
					if err := tx.Unlink(dirIno, e.name); err != nil {
						return err
					}
					exists = false
				}
				n := old
				if !exists {
					if n, err = tx.Create(dirIno, e.name, a); err != nil {
						return err
					}
				} else if err := im.syncNode(tx, &n, a); err != nil {
					return err
				}
				fmt.Fprintf(im.out, "LINK %s -> %s (ino %d)\n", sp, target, n.Ino)
			case cas.EntryFile:
				im.stats.Files++
				c, cached := cache[string(e.name)]
				ino, err := im.file(tx, dirIno, e, hp, sp, a, old, exists, c, cached)
				if err != nil {
					return err
				}
				fmt.Fprintf(im.out, "FILE %s (%d bytes, ino %d)\n", sp, e.st.Size, ino)
			}
		}
		for _, d := range have {
			if seen[string(d.Name)] {
				continue
			}
			var err error
			if im.opts.Capture {
				_, err = im.removeCaptured(tx, dirIno, storePath, d.Name, &d.Node, cache)
			} else {
				err = im.remove(tx, dirIno, d.Name, &d.Node)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if im.opts.Progress != nil {
		im.opts.Progress(im.stats)
	}
	for _, s := range subs {
		if err := im.dir(s.host, s.store, s.ino); err != nil {
			return err
		}
		// Attributes after children (and re-read: importing must not
		// have changed them, but the host may have).
		a, err := hostAttr(s.host, nil)
		if err != nil {
			return err
		}
		if err := im.batch.Update(im.ctx, func(tx *journal.Tx) error { return im.syncAttr(tx, s.ino, a) }); err != nil {
			return err
		}
	}
	return nil
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

// file imports one regular file, returning its art inode.
func (im *importer) file(tx *journal.Tx, dir int64, e *hostEntry, hp, sp string, a journal.Attr, old journal.Node, exists bool,
	c journal.StatCache, cached bool) (int64, error) {
	key := [2]uint64{e.st.Dev, e.st.Ino}
	if e.st.Nlink > 1 {
		if ino, ok := im.links[key]; ok {
			// Another name of a file already imported in this push.
			if exists && old.Ino == ino {
				im.stats.Unchanged++
				return ino, nil
			}
			if exists {
				if err := tx.Unlink(dir, e.name); err != nil {
					return 0, err
				}
			}
			n, err := tx.Link(ino, dir, e.name)
			if err != nil {
				return 0, err
			}
			im.stats.New++
			return n.Ino, nil
		}
	}
	ino, err := im.content(tx, dir, e, hp, sp, a, old, exists, c, cached)
	if err != nil {
		return 0, err
	}
	if e.st.Nlink > 1 {
		im.links[key] = ino
	}
	return ino, nil
}

func (im *importer) content(tx *journal.Tx, dir int64, e *hostEntry, hp, sp string, a journal.Attr, old journal.Node, exists bool,
	c journal.StatCache, cached bool) (int64, error) {
	ctime := e.st.Ctim.Sec*1e9 + e.st.Ctim.Nsec
	if exists && cached && c.Size == e.st.Size && c.MTime == a.MTime && c.CTime == ctime && c.Ino == e.st.Ino && c.Manifest == old.Content {
		im.stats.Unchanged++
		return old.Ino, im.syncNode(tx, &old, a)
	}
	// O_NOFOLLOW and O_NONBLOCK: if the name was swapped for a symlink or
	// a fifo since lstat, fail or return at once instead of following or
	// blocking; fstat then confirms it is still a regular file.
	f, err := os.OpenFile(hp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) { // O_NOATIME needs ownership
		f, err = os.OpenFile(hp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	if kindOf(st.Mode) != cas.EntryFile {
		return 0, fmt.Errorf("%s: changed type while importing", hp)
	}
	id, fs, err := tx.Objects().PutSparseFile(im.ctx, f)
	if err != nil {
		return 0, fmt.Errorf("import %s: %w", hp, err)
	}
	im.stats.BytesRead += fs.Bytes
	im.stats.BytesStored += fs.NewBytes
	a.Kind, a.Content, a.Size = cas.EntryFile, id, fs.Size
	var n journal.Node
	if exists && im.opts.Capture && !cached && (old.Content != id || old.Size != a.Size) {
		// Both differ and nothing says which changed: keep the branch's
		// (the agent's) version; the host file is still there.
		fmt.Fprintf(im.warn, "warning: %s differs from the branch's %s; keeping the branch's version (art push -m takes the host's)\n", hp, sp)
		im.stats.Unchanged++
		n = old
	} else if exists {
		if im.opts.Capture && cached && old.Content != c.Manifest && old.Content != id {
			fmt.Fprintf(im.warn, "warning: %s changed on the host and in the branch since the last capture; taking the host's version (the branch's is in its history)\n", sp)
		}
		if old.Content != id || old.Size != a.Size {
			im.stats.Changed++
			if n, err = tx.Write(old.Ino, id, a.Size, a.MTime, nil); err != nil {
				return 0, err
			}
		} else {
			im.stats.Unchanged++
			n = old
		}
		if err := im.syncNode(tx, &n, a); err != nil {
			return 0, err
		}
	} else {
		im.stats.New++
		if n, err = tx.Create(dir, e.name, a); err != nil {
			return 0, err
		}
	}
	// A file modified in the last seconds may change again within the
	// timestamp granularity without its stat changing: do not trust the
	// cache for it next time (git's "racy clean" rule).
	if time.Duration(im.start.UnixNano()-a.MTime) > 2*time.Second && st.Ino == e.st.Ino && st.Size == e.st.Size {
		c := journal.StatCache{Size: e.st.Size, MTime: a.MTime, CTime: ctime, Ino: e.st.Ino, Manifest: id}
		if err := tx.SetStatCache(sp, c); err != nil {
			return 0, err
		}
	}
	return n.Ino, nil
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

func nsOf(t unix.Timespec) int64 { return t.Sec*1e9 + t.Nsec }

// captureSkips decides, in capture mode, whether host entry e leaves the
// branch alone: a file unchanged on the host since the last import (the
// branch may have changed or deleted it since), a directory the branch
// deleted or replaced, a symlink the branch has.
func (im *importer) captureSkips(tx *journal.Tx, e *hostEntry, sp string, old journal.Node, exists bool,
	cache map[string]journal.StatCache) (bool, error) {
	switch e.kind {
	case cas.EntryFile:
		c, cached := cache[string(e.name)]
		if cached && c.Size == e.st.Size && c.MTime == nsOf(e.st.Mtim) && c.CTime == nsOf(e.st.Ctim) && c.Ino == e.st.Ino {
			im.stats.Files++
			im.stats.Unchanged++
			return true, nil
		}
		return false, nil
	case cas.EntryDir:
		if exists && old.Kind == cas.EntryDir {
			return false, nil
		}
		// Not a directory in the branch: new on the host, or deleted or
		// replaced in the branch after an import brought it in.
		return tx.HasStatCacheUnder(sp)
	case cas.EntrySymlink:
		return exists, nil
	}
	return false, nil
}

// removeCaptured removes, in capture mode, a branch entry the host no
// longer has - but only what an import brought in and the branch has not
// changed since: files whose content is what was imported, and
// directories left empty by that. It reports whether the entry is gone.
func (im *importer) removeCaptured(tx *journal.Tx, dir int64, dirPath string, name []byte, n *journal.Node,
	cache map[string]journal.StatCache) (bool, error) {
	p := dirPath + "/" + string(name)
	switch {
	case n.Kind == cas.EntryFile:
		c, ok := cache[string(name)]
		if !ok || c.Manifest != n.Content {
			return false, nil // created or changed in the branch
		}
		im.stats.Deleted++
		return true, tx.Unlink(dir, name)
	case n.IsDir():
		imported, err := tx.HasStatCacheUnder(p)
		if err != nil || !imported {
			return false, err
		}
		sub, err := tx.StatCacheDir(p)
		if err != nil {
			return false, err
		}
		kids, err := tx.ReadDir(n.Ino)
		if err != nil {
			return false, err
		}
		all := true
		for i := range kids {
			gone, err := im.removeCaptured(tx, n.Ino, p, kids[i].Name, &kids[i].Node, sub)
			if err != nil {
				return false, err
			}
			all = all && gone
		}
		if !all {
			return false, nil
		}
		return true, tx.Rmdir(dir, name)
	}
	return false, nil
}
