package overlay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// memMax bounds a file's content held in memory (node.mem): a new or
// truncated file stays there until it grows past it, so the common small
// file never costs a private copy on disk (whose inode allocation was a
// fifth of tar x's daemon CPU).
const memMax = 128 << 10

// ensureUpperLocked gives the file a private copy of its content on disk:
// its in-memory content, or else a copy out of the store. The caller
// holds n.mu.
func (n *node) ensureUpperLocked(ctx context.Context) error {
	if n.upper != "" {
		return nil
	}
	if !n.inMem && n.takeKeptLocked() {
		return nil
	}
	f, err := n.fsys.newUpper()
	if err != nil {
		return err
	}
	defer f.Close()
	if n.inMem {
		// Written contiguously from offset 0 (see handle.Write), so it is
		// all data on ext4 too: no holes to preserve.
		if _, err := f.Write(n.mem); err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("spill inode %d: %w", n.ino, err)
		}
		n.upper, n.inMem, n.mem, n.upperSum = f.Name(), false, nil, cas.ID{}
		return nil
	}
	// Read through the shared transaction: the content may have been
	// journaled moments ago and not be committed yet.
	content := n.attr.Content
	err = n.fsys.tx(ctx, func(tx *journal.Tx) error { return tx.Objects().WriteSparse(ctx, content, f) })
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("open inode %d: %w", n.ino, err)
	}
	n.upper, n.upperSum = f.Name(), content
	n.fsys.stats.copies.Add(1)
	return nil
}

// takeKeptLocked makes a forgotten file's kept copy of this very content
// (kept.go) the file's private copy, if there is one. The caller holds
// n.mu, and the file has no private copy and no content in memory.
func (n *node) takeKeptLocked() bool {
	p := n.fsys.kept.take(n.attr.Content)
	if p == "" {
		return false
	}
	n.upper, n.upperSum = p, n.attr.Content
	n.fsys.stats.reuses.Add(1)
	return true
}

// emptyLocked makes the file's content empty, in memory when it is not on
// disk already. The caller holds n.mu.
func (n *node) emptyLocked() error {
	n.dropStreamLocked()
	if n.upper != "" {
		n.dropTailLocked() // gathered bytes the truncation voids
		if err := os.Truncate(n.upper, 0); err != nil {
			return err
		}
	} else {
		n.inMem, n.mem = true, n.mem[:0]
	}
	n.appending, n.seqEnd = true, 0 // appends from here may stream (stream.go)
	return nil
}

var _ fs.NodeOpener = (*node)(nil)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterruptible(ctx)
	return n.open(ctx, flags)
}

// lowerWait bounds how long an open that the kernel would refuse beside a
// passthrough open of the host file waits for that open's RELEASE (node.open);
// lowerPoll is how often it looks.
const (
	lowerWait = 500 * time.Millisecond
	lowerPoll = time.Millisecond
)

func (n *node) open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.attr.Kind != cas.EntryFile {
		return nil, 0, syscall.EINVAL
	}
	if n.fsys.readOnly && flags&(syscall.O_ACCMODE|syscall.O_TRUNC) != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	modifies := flags&(syscall.O_ACCMODE|syscall.O_TRUNC) != syscall.O_RDONLY
	// The kernel's page cache stays valid across opens: every change to
	// the file passes through it. A read-only open has nothing to journal
	// at close, so its close sends no FLUSH (a round trip per header a
	// compiler reads, per .git file git status opens).
	openFlags := uint32(fuse.FOPEN_KEEP_CACHE)
	if !modifies {
		openFlags |= fuse.FOPEN_NOFLUSH
	}
	var pt *ptHandle
	for waited := time.Duration(0); ; waited += lowerPoll {
		// Not while a file of the node is being released unless the host
		// file is open already: see openPassthroughLocked.
		if !modifies && n.upper == "" && !n.inMem && n.cachedOpensLocked() == 0 && n.ptOpens == 0 && (n.lowerOpens > 0 || n.releases == 0) {
			if fd := n.openLowerLocked(ctx); fd >= 0 {
				n.opens++
				n.lowerOpens++
				n.lowerUsed = true
				n.fsys.stats.lowerOpens.Add(1)
				// A plain loopback handle: go-fuse registers it as the inode's
				// passthrough backing file (passthrough.go).
				return &lowerHandle{LoopbackFile: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), n: n}, openFlags, 0
			}
		}
		var err error
		if pt, err = n.openPassthroughLocked(ctx, flags, modifies); err != nil {
			return nil, 0, n.fsys.errno(err)
		}
		if pt != nil || n.lowerOpens == 0 || !n.fsys.ptOK.Load() {
			break // (without passthrough the host file's opens are the daemon's too)
		}
		// The host file is open by passthrough as far as the daemon
		// knows, and this open would be served by the daemon, which the
		// kernel refuses beside it (EIO). Answered anyway, the open would
		// have changed the file first (an O_TRUNC empties it, journaled
		// at the release the refusal sends) and its release would drop
		// the host file's backing reference (go-fuse: passthrough.go), failing every
		// later open until that reader closes. A reader that was closed
		// but whose RELEASE is still on its way (an editor reads a file,
		// closes it and opens it for writing) is waited for; one still
		// open makes this open fail with nothing changed.
		if waited >= lowerWait {
			n.fsys.logf("open of inode %d (flags %#x) refused: its host file is open by passthrough", n.ino, flags)
			return nil, 0, syscall.ETXTBSY
		}
		n.mu.Unlock()
		time.Sleep(lowerPoll)
		n.mu.Lock()
	}
	if pt != nil {
		if modifies {
			n.dirty.Store(true) // until journaled with no writer left
		}
		// go-fuse turns FOPEN_KEEP_CACHE off when the kernel takes the
		// backing file; if it does not, the page cache stays valid as
		// for the daemon's own handles.
		return pt, openFlags, 0
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := n.emptyLocked(); err != nil {
			return nil, 0, n.fsys.errno(err)
		}
		n.dirty.Store(true)
		n.attr.MTime = now()
	}
	n.opens++
	// The content is fetched at the handle's first read or write (a new
	// or truncated file lives in memory until it grows).
	h := &handle{n: n, flags: flags &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOCTTY | syscall.O_DIRECT | syscall.O_TRUNC)}
	return h, openFlags, 0
}

// openLowerLocked opens the host file this node was imported from, if the
// node still holds exactly what the import recorded and the host file is
// unchanged since; otherwise it returns -1. The caller holds n.mu.
func (n *node) openLowerLocked(ctx context.Context) int {
	f := n.fsys
	if f.lower == "" || n.madeHere {
		return -1
	}
	p := n.Path(nil)
	if !strings.HasPrefix(p, f.lowerPfx) {
		return -1
	}
	host := filepath.Join(f.lower, p[len(f.lowerPfx):])
	content := n.attr.Content
	c := n.lowerStat
	if c == nil || c.path != p {
		// Once per node and path, found or not: the branch's import cache
		// does not change while it is mounted (the session holds the
		// branch). A file the agent wrote in an earlier session has no
		// record, and a no-op go install opens each of its build cache's
		// entries again at every run: a query each time was 3,260 of a
		// same-session no-op's 8,068 transactions.
		sc, ok, known := n.parentRecord(p)
		if !known {
			err := f.tx(ctx, func(tx *journal.Tx) error {
				var err error
				sc, ok, err = tx.StatCache("/" + p)
				return err
			})
			if err != nil {
				return -1 // asked again at the next open
			}
			f.stats.lowerChecks.Add(1)
		}
		c = &lowerStat{path: p, StatCache: sc, none: !ok}
		n.lowerStat = c
	}
	if c.none || c.Manifest != content {
		return -1
	}
	fd, err := syscall.Open(host, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size != c.Size ||
		st.Mtim.Nano() != c.MTime || st.Ctim.Nano() != c.CTime || st.Ino != c.Ino {
		syscall.Close(fd)
		return -1
	}
	return fd
}

// parentRecord finds the import record of the node's host file at node
// path p among its parent's records, which a file made from the branch
// took when it went live (present): its first open then asks for no
// record of its own - one query for each file a next session's no-op go
// install opened (4,068), each a transaction on the batch. known is false
// when they cannot say: a node made in the session, one with several
// names, or one at another directory since. As the single query
// (journal.Tx.StatCache) it finds regular files' records only (kind 0 is
// an old row of unknown kind); the parent's map also leaves out records
// that cannot prove a host file (racy ones, and those naming an inode
// number no host file has, which only a hostile store holds): such a file
// is read from the store. The caller holds n.mu.
func (n *node) parentRecord(p string) (rec journal.StatCache, found, known bool) {
	r := n.lowerDir
	if r == nil || n.name == "" {
		return journal.StatCache{}, false, false
	}
	// p is r.path + "/" + n.name (or n.name at the root), without
	// building that string at every first open.
	if r.path == "" {
		if p != n.name {
			return journal.StatCache{}, false, false
		}
	} else if len(p) != len(r.path)+1+len(n.name) || !strings.HasPrefix(p, r.path) || p[len(r.path)] != '/' || !strings.HasSuffix(p, n.name) {
		return journal.StatCache{}, false, false
	}
	rec, found = r.get(n.name)
	if found && rec.Kind != cas.EntryFile {
		return journal.StatCache{}, false, true
	}
	return rec, found, true
}

// lowerStat is what the import recorded of a node's host file.
type lowerStat struct {
	path string // the node's path it was read for
	none bool   // the import recorded no host file there
	journal.StatCache
}

// lowerHandle reads an unmodified host file. It never writes (the open
// was read-only), so nothing is journaled.
type lowerHandle struct {
	*fs.LoopbackFile
	n *node
}

// The embedded LoopbackFile serves the rest; Release is art's own, and
// passthrough of the host file must reach the kernel.
var (
	_ fs.FileReleaser        = (*lowerHandle)(nil)
	_ fs.FilePassthroughFder = (*lowerHandle)(nil)
)

// PassthroughFd hands the bridge the host file to register as the
// inode's backing file (unless a test plays a host filesystem the kernel
// does not stack on).
func (h *lowerHandle) PassthroughFd() (int, bool) {
	if hooks.noLowerBacking.Load() {
		return -1, false
	}
	return h.LoopbackFile.PassthroughFd()
}

func (h *lowerHandle) Release(ctx context.Context) syscall.Errno {
	ctx = uninterruptible(ctx)
	errno := h.LoopbackFile.Release(ctx)
	h.n.mu.Lock()
	h.n.opens--
	h.n.lowerOpens--
	h.n.mu.Unlock()
	return errno
}

// journal records the file's current content if it changed. With durable,
// it returns only once that (and everything before it) is on disk. Three
// steps: take what to store under the node's lock (journalTake), store it
// in one transaction (store), then bring the node up to date (settle).
func (n *node) journal(ctx context.Context, durable bool) error {
	n.jmu.Lock()
	defer n.jmu.Unlock()
	if err := n.fsys.failure(); err != nil && n.dirty.Load() {
		return err // not stored in vain: nothing is kept any more (failed.go)
	}
	if !n.dirty.Swap(false) {
		if durable {
			return n.fsys.sync()
		}
		return n.fsys.persist()
	}
	t, err := n.take()
	if err != nil {
		return err
	}
	if t.stream != nil {
		if !t.stream.halt() {
			t.streamOK = false
		}
		defer t.stream.close()
	}
	if !t.inMem {
		if t.f, err = os.Open(t.upper); err != nil {
			n.failed(t.pending)
			return err
		}
		defer t.f.Close()
	}
	jn, id, gone, err := n.store(ctx, t)
	if err != nil {
		n.failed(t.pending)
		return err
	}
	n.settle(t, jn, id, gone)
	if durable {
		return n.fsys.sync()
	}
	return n.fsys.persist()
}

// journalTake is what one journal of a file stores: its content (the
// upper file, a copy of the in-memory bytes, or what a stream already
// stored) and the attributes changed since the last journal.
type journalTake struct {
	upper         string
	f             *os.File // upper, opened after the lock is let go
	inMem         bool
	data          []byte
	mtime, jmtime int64
	pending       uint32
	attr          journal.Attr
	stream        *fileStream
	streamOK      bool
}

// take reads the node's state to journal under its lock; the pending
// attributes are handed over (failed puts them back).
func (n *node) take() (journalTake, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.flushTailLocked(false); err != nil {
		n.dirty.Store(true)
		return journalTake{}, err
	}
	t := journalTake{upper: n.upper, mtime: n.attr.MTime, inMem: n.inMem,
		pending: n.pending, attr: n.attr, jmtime: n.jmtime}
	if n.ptTimes {
		if m, ok := n.upperMTimeLocked(); ok {
			t.mtime = m
		}
	}
	n.pending = 0
	if t.inMem {
		t.data = bytes.Clone(n.mem) // writes may go on while it is stored
	}
	t.stream, t.streamOK = n.takeStreamLocked()
	return t, nil
}

// store records t in one transaction: the content, then the pending
// attributes and the write. gone: the file was unlinked while open, and
// there is nothing left to record. id is what the content was read to hold.
func (n *node) store(ctx context.Context, t journalTake) (jn journal.Node, id cas.ID, gone bool, err error) {
	err = n.fsys.tx(ctx, func(tx *journal.Tx) error {
		var st cas.FileStats
		var err error
		streamed := false
		if t.streamOK {
			if id, st, streamed, err = t.stream.finish(ctx, tx); err != nil {
				return err
			}
		}
		switch {
		case streamed:
		case t.inMem:
			id, st, err = tx.Objects().PutFile(ctx, bytes.NewReader(t.data))
		default:
			id, st, err = tx.Objects().PutSparseFile(ctx, t.f)
		}
		if err != nil {
			return err
		}
		if t.pending == 0 && id == t.attr.Content && t.mtime == t.jmtime {
			// Unchanged (a passthrough writer that wrote nothing, say).
			jn, err = tx.Get(n.ino)
		} else {
			if t.pending != 0 {
				_, err = tx.SetAttr(n.ino, t.pending, t.attr)
			}
			if err == nil {
				jn, err = tx.Write(n.ino, id, st.Size, t.mtime, nil)
			}
		}
		if errors.Is(err, syscall.ENOENT) {
			gone, err = true, nil // unlinked while open: nothing left to record
		}
		return err
	})
	return jn, id, gone, err
}

// settle brings the node up to what store recorded.
func (n *node) settle(t journalTake, jn journal.Node, id cas.ID, gone bool) {
	if !t.inMem {
		// A write since the read above set dirty again; upper changes
		// only at a forget, which takes dirty nodes' copies nowhere.
		n.mu.Lock()
		if n.upper == t.upper {
			n.upperSum = id
		}
		n.mu.Unlock()
	}
	if gone {
		return
	}
	n.mu.Lock()
	n.attr.Content, n.attr.Size, n.ctime, n.jmtime = jn.Content, jn.Size, jn.CTime, jn.MTime
	if n.ptTimes && n.ptWriters == 0 && !n.mapped {
		// No passthrough writer left: the mtime lives in memory again.
		if m, ok := n.upperMTimeLocked(); ok {
			n.attr.MTime = m
		}
		n.ptTimes = false
	}
	n.mu.Unlock()
	n.stale()
}

// failed puts back what a journal that failed took: the content is still
// dirty, the attributes still pending.
func (n *node) failed(pending uint32) {
	n.mu.Lock()
	n.pending |= pending
	n.mu.Unlock()
	n.dirty.Store(true)
}

// handle is an open file. Its content is the node's: in memory (a new or
// truncated small file), or a private copy on disk that the handle opens
// with its own flags (O_APPEND, O_SYNC...) at the first request that needs
// it. Content changes are journaled at flush, fsync and release.
type handle struct {
	n     *node
	flags uint32 // open flags for the private copy

	lf fs.FileHandle // on the private copy; nil until needed. Guarded by n.mu
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// lockContent locks n.mu and returns the handle's file on the private
// copy, or nil when the content is in n.mem; disk, when set, spills
// in-memory content to a private copy first. The private copy then holds
// every byte written, unless gather is set (Write: the node's tail may
// stay in memory, tail.go). On error n.mu is not held.
func (h *handle) lockContent(ctx context.Context, disk, gather bool) (fs.FileHandle, syscall.Errno) {
	n := h.n
	n.mu.Lock()
	if !disk && n.upper == "" && !n.inMem && n.attr.Size == 0 {
		n.inMem = true // empty: nothing to fetch
		n.dropStreamLocked()
		n.appending, n.seqEnd = true, 0
	}
	if n.inMem && !disk {
		return nil, 0
	}
	if !gather {
		if err := n.flushTailLocked(false); err != nil {
			n.mu.Unlock()
			return nil, h.n.fsys.errno(err)
		}
	}
	if h.lf != nil {
		return h.lf, 0
	}
	if err := n.ensureUpperLocked(ctx); err != nil {
		n.mu.Unlock()
		return nil, h.n.fsys.errno(err)
	}
	// A raw fd: go-fuse's loopback handle owns and closes it (an
	// *os.File would close it a second time from its finalizer, by then
	// possibly another file's descriptor).
	fd, err := syscall.Open(n.upper, int(h.flags)|syscall.O_CLOEXEC, 0)
	if err != nil {
		n.mu.Unlock()
		return nil, h.n.fsys.errno(err)
	}
	h.lf = fs.NewLoopbackFile(fd)
	return h.lf, 0
}

var _ fs.FileReader = (*handle)(nil)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = uninterruptible(ctx)
	if res, ok, errno := h.n.readStore(ctx, dest, off); ok {
		return res, errno
	}
	lf, errno := h.lockContent(ctx, false, false)
	if errno != 0 {
		return nil, errno
	}
	if lf == nil {
		n := 0
		if off < int64(len(h.n.mem)) {
			n = copy(dest, h.n.mem[off:])
		}
		h.n.mu.Unlock()
		return fuse.ReadResultData(dest[:n]), 0
	}
	h.n.mu.Unlock()
	return lf.(fs.FileReader).Read(ctx, dest, off)
}

var _ fs.FileWriter = (*handle)(nil)

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = uninterruptible(ctx)
	if fit := h.n.fsys.reserve(int64(len(data))); fit < int64(len(data)) {
		if fit == 0 {
			return 0, syscall.ENOSPC
		}
		data = data[:fit] // a short write; the next one gets ENOSPC
	}
	lf, errno := h.lockContent(ctx, false, true)
	if errno != 0 {
		return 0, errno
	}
	if lf == nil {
		n := h.n
		if h.flags&syscall.O_APPEND != 0 {
			off = int64(len(n.mem))
		}
		// Only contiguous writes stay in memory: a write past the end
		// leaves a gap that ext4 would keep as a hole.
		if end := off + int64(len(data)); off <= int64(len(n.mem)) && end <= memMax {
			if end > int64(len(n.mem)) {
				n.mem = append(n.mem, make([]byte, end-int64(len(n.mem)))...)
			}
			copy(n.mem[off:], data)
			n.appendedLocked(off, len(data))
			n.mu.Unlock()
			return uint32(len(data)), h.n.fsys.errno(h.wrote(ctx, data, off))
		}
		n.mu.Unlock()
		if lf, errno = h.lockContent(ctx, true, true); errno != 0 {
			return 0, errno
		}
	}
	n := h.n
	gathered, err := n.gatherLocked(h, data, off)
	if gathered {
		n.appendedLocked(off, len(data))
	}
	n.mu.Unlock()
	if err != nil {
		return 0, h.n.fsys.errno(err)
	}
	if gathered {
		return uint32(len(data)), h.n.fsys.errno(h.wrote(ctx, data, off))
	}
	w, errno := lf.(fs.FileWriter).Write(ctx, data, off)
	if w > 0 {
		h.n.mu.Lock()
		h.n.appendedLocked(off, int(w))
		h.n.mu.Unlock()
		if err := h.wrote(ctx, data[:w], off); err != nil {
			return w, h.n.fsys.errno(err)
		}
	}
	return w, errno
}

// storeReadMax is how many bytes a file serves to reads straight from
// the store (readStore) before its next read copies it out whole: what
// reads a part of a file (go's look at an installed binary's build ID, a
// linker's at an archive's index) never pays for the rest; a file read
// in full is copied out once, and later opens pass through to the copy.
var storeReadMax int64 = 8 << 20 // a variable only for tests (CopyOnRead)

// readStore serves a read of a file whose content is only in the store
// (no private copy, not in memory) from the chunks the range touches,
// each verified, without copying the file out; ok is false when the
// caller must read the private copy or memory instead (there is one,
// or the file has served storeReadMax bytes so). The kernel keeps what
// it read in its page cache (FOPEN_KEEP_CACHE), so a warm re-read costs
// nothing here. A write racing with the read is ordered by the kernel's
// page locks, as for any FUSE read.
func (n *node) readStore(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, bool, syscall.Errno) {
	n.mu.Lock()
	if n.upper != "" || n.inMem || n.attr.Kind != cas.EntryFile || n.storeRead >= storeReadMax {
		n.mu.Unlock()
		return nil, false, 0
	}
	content, size, l := n.attr.Content, n.attr.Size, n.layout
	if l != nil && l.ID != content {
		l = nil
	}
	if off >= size {
		n.mu.Unlock()
		return fuse.ReadResultData(nil), true, 0
	}
	want := min(int64(len(dest)), size-off)
	n.storeRead += want
	n.mu.Unlock()
	var got int
	// Through the shared transaction: the content may have been
	// journaled moments ago and not be committed yet.
	err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
		objs := tx.Objects()
		if l == nil {
			m, err := objs.GetManifest(ctx, content)
			if err != nil {
				return err
			}
			l = cas.NewLayout(content, m)
		}
		var err error
		got, err = objs.ReadAt(ctx, l, dest[:want], off)
		return err
	})
	if err != nil {
		return nil, true, n.fsys.errno(fmt.Errorf("read inode %d: %w", n.ino, err))
	}
	n.mu.Lock()
	if n.attr.Content == content {
		n.layout = l
	}
	n.mu.Unlock()
	n.fsys.stats.storeReads.Add(1)
	return fuse.ReadResultData(dest[:got]), true, 0
}

// wrote notes that data was written at off.
func (h *handle) wrote(ctx context.Context, data []byte, off int64) error {
	h.n.changed(ctx)
	if h.n.fsys.journalWrites {
		return h.n.recordWrite(ctx, data, off)
	}
	return nil
}

// recordWrite journals one write request (forensic mode). With O_APPEND
// the kernel's offset may not be where the bytes landed; the range is the
// request as the kernel sent it.
func (n *node) recordWrite(ctx context.Context, data []byte, off int64) error {
	pid := int64(0)
	if c, ok := fuse.FromContext(ctx); ok {
		pid = int64(c.Pid)
	}
	return n.fsys.tx(ctx, func(tx *journal.Tx) error {
		path, err := tx.Path(n.ino)
		if err != nil {
			return nil // unlinked: the write has no name to record
		}
		m, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(data))
		if err != nil {
			return err
		}
		return tx.Record(journal.Event{Kind: journal.EvWriteData, PID: pid, Path: path,
			Ranges: []journal.Range{{Off: off, Len: int64(len(data))}}, Attr: journal.Attr{Kind: cas.EntryFile, Content: m, Size: int64(len(data))}})
	})
}

// changed notes a content change now. Under HANDLE_KILLPRIV_V2 the
// filesystem clears setuid/setgid when an unprivileged caller writes (the
// kernel's rule is "lacks CAP_FSETID"; uid 0 stands in for it here).
func (n *node) changed(ctx context.Context) {
	if !n.dirty.Swap(true) {
		// The first change since the content was journaled voids the
		// listing entry; the journal's own stale() follows it.
		defer n.stale() // after the mode change below
	}
	n.mu.Lock()
	n.attr.MTime = now()
	n.ctime = n.attr.MTime
	kill := n.attr.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0
	mode := n.attr.Mode &^ (syscall.S_ISUID | syscall.S_ISGID)
	n.mu.Unlock()
	if uid, _ := caller(ctx); kill && uid != 0 {
		var jn journal.Node
		err := n.fsys.tx(ctx, func(tx *journal.Tx) error {
			var err error
			jn, err = tx.SetAttr(n.ino, journal.SetMode, journal.Attr{Mode: mode})
			return err
		})
		if err == nil {
			n.mu.Lock()
			n.attr.Mode = jn.Mode
			n.mu.Unlock()
		}
	}
}

var _ fs.FileAllocater = (*handle)(nil)

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	ctx = uninterruptible(ctx)
	if h.n.fsys.quota.Load() > 0 && mode&unix.FALLOC_FL_PUNCH_HOLE == 0 && h.n.fsys.reserve(int64(size)) < int64(size) {
		return syscall.ENOSPC
	}
	lf, errno := h.lockContent(ctx, true, false)
	if errno != 0 {
		return errno
	}
	h.n.dropStreamLocked()
	h.n.mu.Unlock()
	errno = lf.(fs.FileAllocater).Allocate(ctx, off, size, mode)
	if errno == 0 {
		h.n.changed(ctx)
	}
	return errno
}

var _ fs.FileLseeker = (*handle)(nil)

// Lseek answers SEEK_DATA and SEEK_HOLE (the kernel handles the others)
// from the private copy, whose holes are the file's.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	ctx = uninterruptible(ctx)
	lf, errno := h.lockContent(ctx, true, false)
	if errno != 0 {
		return 0, errno
	}
	h.n.mu.Unlock()
	return lf.(fs.FileLseeker).Lseek(ctx, off, whence)
}

var _ fs.FileFlusher = (*handle)(nil)

func (h *handle) Flush(ctx context.Context) syscall.Errno {
	ctx = uninterruptible(ctx)
	h.n.mu.Lock()
	lf := h.lf
	h.n.mu.Unlock()
	if lf != nil {
		if errno := lf.(fs.FileFlusher).Flush(ctx); errno != 0 {
			return errno
		}
	}
	return h.n.fsys.errno(h.n.journal(ctx, false))
}

var _ fs.FileFsyncer = (*handle)(nil)

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx = uninterruptible(ctx)
	return h.n.fsys.errno(h.n.journal(ctx, true))
}

var _ fs.FileReleaser = (*handle)(nil)

func (h *handle) Release(ctx context.Context) syscall.Errno {
	ctx = uninterruptible(ctx)
	n := h.n
	n.mu.Lock()
	lf := h.lf
	h.lf = nil
	n.mu.Unlock()
	if lf != nil {
		lf.(fs.FileReleaser).Release(ctx)
	}
	// Every close flushed (journaled and committed) already; what is left
	// is content written since, through a mapping. Nothing else needs a
	// commit here: an idle release must not cut the batch short.
	var err error
	if n.dirty.Load() {
		err = n.journal(ctx, false)
	}
	n.mu.Lock()
	n.opens--
	n.dropMemLocked()
	n.mu.Unlock()
	n.afterRelease()
	if fn := hooks.handleReleased.Load(); fn != nil {
		(*fn)(n.ino)
	}
	return h.n.fsys.errno(err)
}
