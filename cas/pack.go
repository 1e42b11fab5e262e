package cas

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/artrt/art/internal/errclass"
)

// Packs is the directory of pack files beside a store (STORE.packs): the
// stored bytes of large chunks, appended one after another, while the
// objects table keeps each one's (pack, offset, length). SQLite stays the
// only index and the only commit point: bytes are appended (and, by
// Sync, made durable) before the transaction naming them commits, so a
// crash leaves at most unreferenced bytes at a pack's tail, which gc
// reclaims. docs/store-format.md, "Pack files", has the reasons and the
// figures.
//
// Each Packs writes to at most one pack, created on its first append
// under a random name and locked (flock) until Close; no pack is ever
// appended to by anyone but its creator. gc may therefore delete, or punch
// the unreferenced ranges out of, any pack it can lock: its writer is
// gone and every row naming it is committed or rolled back.
//
// A Packs is safe for concurrent use.
type Packs struct {
	dir      string
	readOnly bool

	mu      sync.Mutex
	readers map[int64]*os.File // open for reading, by pack number
	w       *packWriter
	closed  bool
}

// packWriter is the pack this Packs appends to.
//
// Appends are gathered in an aligned staging buffer and written out a
// whole buffer at a time, with O_DIRECT where the file system supports it:
// a big file's chunks then go from the buffer to the disk without a second
// copy into the page cache, and a Sync before commit has no dirty pages
// left to write (issue 16: the page-cache copy and the writeback at
// fdatasync were the largest costs of storing a new 1 GiB file; figures in
// docs/store-format.md, "Pack files"). The buffer's last partial block is
// written padded with zeros when it must reach the file (Sync, or a read
// of those bytes) and written again, completed, by the next write-out; the
// padding is past every offset a row names.
type packWriter struct {
	f     *os.File
	num   int64
	dirty atomic.Bool // bytes appended since the last fdatasync

	syncMu sync.Mutex // serializes Sync
	mu     sync.Mutex
	next   int64  // the next free offset
	direct int    // the pack opened O_DIRECT|O_WRONLY, or -1: write-outs go through f
	buf    []byte // staging, packBufSize bytes, page aligned (mmap)
	base   int64  // file offset of buf[0]; a multiple of dioAlign when direct
	n      int    // buf[:n] holds the file's bytes base..base+n
	inFile int64  // every byte below it is in the file

	// A full buffer is written by a goroutine while appends fill the
	// other one (spare): the disk's time overlaps the hashing and
	// compressing of the next chunks. flight is closed when that write
	// is done; its bytes end at flightEnd.
	spare     []byte
	flight    chan struct{}
	flightErr error
	flightEnd int64
	// failed is the first error of a write whose buffer is gone: the
	// pack no longer holds bytes offsets were handed out for, so every
	// later append and Sync fails (no transaction may commit a row
	// naming them) until the store is reopened or AbandonFailed.
	failed error
	// synced is the end of the bytes the last successful Sync made
	// durable: no committed row names a byte past it.
	synced int64
}

// packBufSize is the staging buffer of a pack writer: large enough that
// O_DIRECT writes run at the disk's speed (1 MiB direct writes measured
// 2.4-2.7 GB/s on the 2-core VM, 64 KiB ones 0.9 GB/s).
const packBufSize = 4 << 20

// dioAlign is the offset, length and memory alignment of direct writes.
// Packs use O_DIRECT only where the file system's own alignment divides it.
const dioAlign = 4096

// PacksDir is the pack directory of the store file at path.
func PacksDir(path string) string { return path + ".packs" }

// OpenPacks returns the pack directory dir. Nothing is created until the
// first append, and never with readOnly: reading a store that has no
// packs (an older store, a pull source) touches nothing.
func OpenPacks(dir string, readOnly bool) *Packs {
	return &Packs{dir: dir, readOnly: readOnly, readers: map[int64]*os.File{}}
}

// Dir is the pack directory's path.
func (p *Packs) Dir() string { return p.dir }

// ErrPacksNotDir is returned when the pack directory's path is a symbolic
// link or anything but a directory.
var ErrPacksNotDir = errclass.New(errclass.Invalid, "pack directory is not a directory")

// checkDir refuses a pack directory that is a symbolic link (or any
// non-directory) before anything in it is opened, listed or removed: a
// hostile store's STORE.packs -> /elsewhere must not make a read, and
// above all gc's deletions and hole punches, land outside the store.
// The final components are opened with O_NOFOLLOW.
func (p *Packs) checkDir() error {
	st, err := os.Lstat(p.dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: %w (%s)", p.dir, ErrPacksNotDir, st.Mode().Type())
	}
	return nil
}

// packName is the file name of pack num: fixed-width hex, so a number from
// a hostile row can name nothing but a file in dir.
func packName(num int64) string { return fmt.Sprintf("%016x.pack", uint64(num)) }

// ParsePackName returns the number of the pack file name, or false for any
// other name (temporary files, strays).
func ParsePackName(name string) (int64, bool) {
	hex, ok := strings.CutSuffix(name, ".pack")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || n == 0 || n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// errPacksClosed reports use after Close.
var errPacksClosed = errors.New("pack directory closed")

// append writes data at the end of this Packs' pack and returns where.
// The bytes are in the writer's staging buffer when it returns: a read
// through this Packs finds them (read writes them out first), Sync makes
// them durable.
func (p *Packs) append(data []byte) (num, off int64, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, 0, errPacksClosed
	}
	if p.readOnly {
		p.mu.Unlock()
		return 0, 0, errors.New("append to pack: store opened read-only")
	}
	if p.w == nil {
		w, err := p.create()
		if err != nil {
			p.mu.Unlock()
			return 0, 0, packWrite(fmt.Errorf("create pack in %s: %w", p.dir, err))
		}
		p.w = w
	}
	w := p.w
	p.mu.Unlock()
	off, err = w.append(data)
	if err != nil {
		// The range is garbage now: no row will name it.
		return 0, 0, packWrite(fmt.Errorf("append to pack %s: %w", packName(w.num), err))
	}
	return w.num, off, nil
}

// append copies data into the staging buffer, writing out each buffer it
// fills, and returns data's offset in the pack. Workers append
// concurrently; the copy is short next to the hashing and compression
// they do before it.
func (w *packWriter) append(data []byte) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return 0, errPacksClosed
	}
	if w.failed != nil {
		return 0, w.failed
	}
	off := w.next
	for rest := data; len(rest) > 0; {
		c := copy(w.buf[w.n:], rest)
		w.n += c
		rest = rest[c:]
		if w.n == len(w.buf) {
			if err := w.sendFullLocked(); err != nil {
				// The bytes of data consumed so far become garbage
				// (no row will name them); earlier appends stay
				// staged for the next write-out to retry.
				w.next = w.base + int64(w.n)
				return 0, err
			}
		}
	}
	w.next += int64(len(data))
	w.dirty.Store(true)
	return off, nil
}

// sendFullLocked hands the full staging buffer to a goroutine that writes
// it, and goes on with the spare one. The caller holds w.mu.
func (w *packWriter) sendFullLocked() error {
	if err := w.waitLocked(); err != nil {
		return err
	}
	if w.spare == nil {
		b, err := allocStaging(len(w.buf))
		if err != nil {
			return w.writeOutLocked() // one buffer it is
		}
		w.spare = b
	}
	full, base := w.buf, w.base
	w.buf, w.spare = w.spare, nil
	w.base += int64(len(full))
	w.n = 0
	done := make(chan struct{})
	w.flight, w.flightEnd = done, base+int64(len(full))
	go func() {
		defer close(done)
		var err error
		if w.direct >= 0 {
			err = pwriteFull(w.direct, full, base)
		}
		if w.direct < 0 || errors.Is(err, syscall.EINVAL) {
			_, err = w.f.WriteAt(full, base) // see writeOutLocked
		}
		w.flightErr = err
		w.spare = full // read by waitLocked after done
	}()
	return nil
}

// waitLocked waits for the buffer in flight, if any. The caller holds
// w.mu (the writing goroutine never takes it).
func (w *packWriter) waitLocked() error {
	if w.failed != nil {
		return w.failed
	}
	if w.flight == nil {
		return nil
	}
	<-w.flight
	w.flight = nil
	if err := w.flightErr; err != nil {
		w.failed = fmt.Errorf("write pack %s at %d: %w", packName(w.num), w.flightEnd-int64(len(w.spare)), err)
		return w.failed
	}
	w.inFile = max(w.inFile, w.flightEnd)
	return nil
}

// writeOutLocked writes the staging buffer's bytes to the file: the whole
// aligned blocks are then done with; a partial last block is written
// padded and stays at the start of the buffer, to be completed. It waits
// for a buffer in flight first. The caller holds w.mu.
func (w *packWriter) writeOutLocked() error {
	if err := w.waitLocked(); err != nil {
		return err
	}
	if w.n == 0 {
		return nil
	}
	if w.direct >= 0 {
		padded := (w.n + dioAlign - 1) &^ (dioAlign - 1)
		clear(w.buf[w.n:padded])
		err := pwriteFull(w.direct, w.buf[:padded], w.base)
		if err == nil {
			w.inFile = max(w.inFile, w.base+int64(w.n))
			whole := w.n &^ (dioAlign - 1)
			rest := copy(w.buf, w.buf[whole:w.n])
			w.base += int64(whole)
			w.n = rest
			return nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return err
		}
		// The file system took O_DIRECT at open but refuses these writes
		// (an alignment it did not report): go on through the page cache.
		syscall.Close(w.direct)
		w.direct = -1
	}
	if _, err := w.f.WriteAt(w.buf[:w.n], w.base); err != nil {
		return err
	}
	w.base += int64(w.n)
	w.inFile = w.base
	w.n = 0
	return nil
}

// flushTo makes the bytes below end readable from the file.
func (w *packWriter) flushTo(end int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if end <= w.inFile || w.buf == nil {
		return nil
	}
	return w.writeOutLocked()
}

// closeLocked writes out what is staged, trims the padding and lets go of
// the buffer and the direct descriptor. The caller holds w.mu.
func (w *packWriter) closeLocked() error {
	if w.buf == nil {
		return nil
	}
	err := w.writeOutLocked()
	if w.flight != nil {
		<-w.flight // failed above: the goroutine may still hold the spare
		w.flight = nil
	}
	if err == nil {
		// A padded block may lie past the end (also when a direct write
		// was refused later and the writer went on through the page
		// cache).
		if st, serr := w.f.Stat(); serr == nil && st.Size() > w.next {
			err = w.f.Truncate(w.next)
		}
	}
	w.releaseBuffers()
	return err
}

func pwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := syscall.Pwrite(fd, b, off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// create makes a new pack, locked, under a name no other pack has. It is
// created as a temporary file, locked, and only then renamed into a name
// gc considers: gc can never lock (and so delete) a pack between its
// creation and its writer's lock.
func (p *Packs) create() (*packWriter, error) {
	if err := os.Mkdir(p.dir, 0o700); err == nil {
		// The new directory entry must outlive a power loss before any
		// row names a pack in it.
		if err := syncDir(filepath.Dir(p.dir)); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if st, err := os.Lstat(p.dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", p.dir)
	}
	for range 8 {
		var b [8]byte
		rand.Read(b[:])
		num := int64(binary.LittleEndian.Uint64(b[:]) >> 1)
		if num == 0 {
			continue
		}
		name := filepath.Join(p.dir, packName(num))
		if _, err := os.Lstat(name); err == nil {
			continue // taken
		}
		tmp := name + ".tmp"
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := lockPack(f); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("lock new pack: %w", err)
		}
		// link, not rename: it fails if the name was taken meanwhile.
		if err := os.Link(tmp, name); err != nil {
			f.Close()
			os.Remove(tmp)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return nil, err
		}
		os.Remove(tmp)
		if err := syncDir(p.dir); err != nil {
			f.Close()
			return nil, err
		}
		// Errors name the file by the name it has now: a duplicate
		// descriptor shares the open file, and so its flock.
		if fd, err := syscall.Dup(int(f.Fd())); err == nil {
			syscall.CloseOnExec(fd)
			named := os.NewFile(uintptr(fd), name)
			f.Close()
			f = named
		}
		buf, err := allocStaging(packBufSize)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &packWriter{f: f, num: num, buf: buf, direct: openDirect(f, name)}, nil
	}
	return nil, errors.New("no free pack name")
}

// Sync makes every byte appended so far durable (fdatasync), if any was
// appended since the last Sync. A writer calls it before committing a
// transaction that names packed bytes: the rows must never reach the disk
// before the bytes they point at.
func (p *Packs) Sync() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	w := p.w
	p.mu.Unlock()
	if w == nil {
		return nil
	}
	// One Sync at a time: a second must not find dirty cleared and
	// return while the first is still writing the bytes out.
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if !w.dirty.Swap(false) {
		w.mu.Lock()
		err := w.failed
		w.mu.Unlock()
		return packWrite(err)
	}
	w.mu.Lock()
	err := w.writeOutLocked()
	end := w.inFile
	w.mu.Unlock()
	if err != nil {
		w.dirty.Store(true)
		return packWrite(fmt.Errorf("sync pack %s: %w", packName(w.num), err))
	}
	if err := fdatasync(w.f); err != nil {
		// The kernel may have dropped the pages that failed: bytes
		// offsets were handed out for may be gone, so nothing may
		// commit a row naming this pack's bytes any more.
		w.mu.Lock()
		if w.failed == nil {
			w.failed = fmt.Errorf("sync pack %s: %w", packName(w.num), err)
		}
		w.mu.Unlock()
		w.dirty.Store(true)
		return packWrite(fmt.Errorf("sync pack %s: %w", packName(w.num), err))
	}
	w.mu.Lock()
	w.synced = max(w.synced, end)
	w.mu.Unlock()
	return nil
}

// Failed returns the error that broke the pack being written (a write or
// fdatasync that failed: see packWriter.failed), or nil. Until
// AbandonFailed, every later append and Sync fails with it, so no
// transaction can commit.
func (p *Packs) Failed() error {
	p.mu.Lock()
	w := p.w
	p.mu.Unlock()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// AbandonFailed gives up the pack being written if it failed (Failed):
// it is cut back to the bytes its last successful Sync made durable,
// which frees the rest on a full disk, and released; the next append
// starts a new pack. No committed row names a byte past that point -
// every commit syncs first, and every Sync since the failure failed - and
// none ever will. The caller must know that no transaction of this
// process that appended to the pack is still open: its next Sync would
// go to the new pack and succeed. It returns the bytes cut off.
func (p *Packs) AbandonFailed() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.w
	if w == nil {
		return 0, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		return 0, nil
	}
	if w.flight != nil {
		<-w.flight // its error is the failure; the bytes go with the rest
		w.flight = nil
	}
	var cut int64
	var err error
	if st, serr := w.f.Stat(); serr != nil {
		err = serr
	} else if st.Size() > w.synced {
		cut = st.Size() - w.synced
		err = w.f.Truncate(w.synced)
	}
	w.releaseBuffers()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	p.w = nil
	if err != nil {
		return cut, fmt.Errorf("abandon pack %s: %w", packName(w.num), err)
	}
	return cut, nil
}

// Trim gives back the bytes at the end of this Packs' pack that no
// committed row names, and returns how many: namedEnd(num) must return
// the end of the last range the committed rows of the store name in pack
// num (0: none). The pack is truncated there and the writer goes on
// appending from there; a pack left empty is deleted by Close. Only the
// pack's own writer ever inserts rows naming it, so once this handle's
// transactions are done the rows naming it can only shrink (gc) and the
// bytes past namedEnd are garbage of transactions that rolled back:
// giving them back at once (rather than at the next gc) is what lets a
// push that failed on a full disk leave the disk as it found it.
//
// A writer that failed (see packWriter.failed) works again afterwards:
// the bytes the failure concerned are past the committed end, gone now.
//
// The caller guarantees that no transaction of this Packs is open and no
// append is under way (a verb after its work failed, or Close).
func (p *Packs) Trim(namedEnd func(num int64) (int64, error)) (int64, error) {
	if p == nil {
		return 0, nil
	}
	p.mu.Lock()
	w := p.w
	closed := p.closed
	p.mu.Unlock()
	if w == nil || closed {
		return 0, nil
	}
	end, err := namedEnd(w.num)
	if err != nil {
		return 0, fmt.Errorf("trim pack %s: %w", packName(w.num), err)
	}
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.truncateLocked(end)
	if err != nil {
		return 0, fmt.Errorf("trim pack %s: %w", packName(w.num), err)
	}
	return n, nil
}

// truncateLocked drops every byte at or past end, staged or in the file,
// and returns how many bytes the file gave back. The caller holds w.mu.
func (w *packWriter) truncateLocked(end int64) (int64, error) {
	if w.buf == nil || end < 0 || end >= w.next {
		return 0, nil
	}
	if w.flight != nil {
		<-w.flight
		w.flight = nil
		if w.flightErr != nil {
			if w.failed == nil {
				w.failed = fmt.Errorf("write pack %s: %w", packName(w.num), w.flightErr)
			}
		} else {
			w.inFile = max(w.inFile, w.flightEnd)
		}
	}
	st, err := w.f.Stat()
	if err != nil {
		return 0, err
	}
	if end >= w.base {
		w.n = int(end - w.base)
	} else {
		base := end
		if w.direct >= 0 {
			base = end &^ (dioAlign - 1) // direct writes start aligned
		}
		if _, err := w.f.ReadAt(w.buf[:end-base], base); err != nil {
			return 0, err
		}
		w.base, w.n = base, int(end-base)
	}
	var freed int64
	if st.Size() > end {
		if err := w.f.Truncate(end); err != nil {
			return 0, err
		}
		freed = st.Size() - end
	}
	w.next = end
	w.inFile = min(w.inFile, end)
	// A failed write or fdatasync concerned bytes past the last commit:
	// every committed row's bytes were written and synced before it
	// committed, and everything past end is gone now. The writer can go
	// on (the op that records the failure commits through it).
	w.failed = nil
	w.dirty.Store(false)
	return freed, nil
}

// Writing reports the number of the pack this Packs appends to (0 if
// none): gc leaves it alone.
func (p *Packs) Writing() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return 0
	}
	return p.w.num
}

// read returns n stored bytes at off in pack num. The caller bounds n by
// the kind's limit; read checks the range against the pack's size before
// allocating, so a lying row costs nothing.
func (p *Packs) read(num, off, n int64) ([]byte, error) {
	if num <= 0 || off < 0 || n < 0 {
		return nil, fmt.Errorf("pack %d range %d+%d is invalid", num, off, n)
	}
	p.mu.Lock()
	w := p.w
	p.mu.Unlock()
	if w != nil && w.num == num {
		// Bytes this Packs appended may still be staged.
		if err := w.flushTo(off + n); err != nil {
			return nil, fmt.Errorf("pack %s: %w", packName(num), err)
		}
	}
	f, err := p.reader(num)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", packName(num), err)
	}
	if off > st.Size() || n > st.Size()-off {
		return nil, fmt.Errorf("pack %s holds %d bytes, range %d+%d is past its end", packName(num), st.Size(), off, n)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("pack %s: %w", packName(num), err)
	}
	return b, nil
}

// reader returns pack num opened for reading, cached.
func (p *Packs) reader(num int64) (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPacksClosed
	}
	if f, ok := p.readers[num]; ok {
		return f, nil
	}
	if err := p.checkDir(); err != nil {
		return nil, fmt.Errorf("pack %s: %w", packName(num), err)
	}
	// O_NOFOLLOW and the regular-file check: a hostile store's directory
	// must not make a read block on a FIFO or wander through a link.
	f, err := os.OpenFile(filepath.Join(p.dir, packName(num)), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", packName(num), err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("pack %s: not a regular file", packName(num))
	}
	if len(p.readers) >= maxOpenPacks {
		// Drop any one from the cache without closing it: a read may
		// be using it right now (closing would fail that read as if
		// the pack were damaged). The runtime closes it once unused.
		for k := range p.readers {
			delete(p.readers, k)
			break
		}
	}
	p.readers[num] = f
	return f, nil
}

// maxOpenPacks bounds the packs a Packs keeps open for reading.
const maxOpenPacks = 64

// Forget closes a cached reader of pack num, so that deleting the pack
// frees its space at once.
func (p *Packs) Forget(num int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.readers[num]; ok {
		f.Close()
		delete(p.readers, num)
	}
}

// Close closes the open packs and releases the lock on the pack being
// written (after a final Sync attempt). The caller must have committed or
// rolled back every transaction that names bytes it appended.
func (p *Packs) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, f := range p.readers {
		errs = append(errs, f.Close())
	}
	p.readers = nil
	if w := p.w; w != nil {
		w.mu.Lock()
		errs = append(errs, w.closeLocked())
		empty := w.next == 0
		w.mu.Unlock()
		if empty {
			// Nothing it holds can be named (Trim took it back to
			// nothing): remove it while the lock still keeps gc off it.
			if p.checkDir() == nil && os.Remove(filepath.Join(p.dir, packName(w.num))) == nil {
				errs = append(errs, syncDir(p.dir))
			}
		} else if w.dirty.Load() {
			errs = append(errs, fdatasync(w.f))
		}
		errs = append(errs, w.f.Close())
	}
	return errors.Join(errs...)
}

// PackRange is a run of bytes in one pack.
type PackRange struct {
	Pack, Off, Len int64
}

// OpenPackForGC opens pack num for reclaiming space and locks it
// exclusively without waiting. ok is false when its writer still holds it.
// The caller closes f, which releases the lock.
func (p *Packs) OpenPackForGC(num int64) (f *os.File, ok bool, err error) {
	if err := p.checkDir(); err != nil {
		return nil, false, err
	}
	f, err = os.OpenFile(filepath.Join(p.dir, packName(num)), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, false, fmt.Errorf("pack %s: not a regular file", packName(num))
	}
	if err := tryLockPack(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// PunchRange gives the bytes of r back to the file system, keeping the
// pack's size (so no other offset moves). Safe for bytes no committed row
// names and none ever will: a dead object's (gc deleted its row), or the
// unreferenced parts of a pack whose writer is gone.
func (p *Packs) PunchRange(r PackRange) error {
	if r.Len <= 0 {
		return nil
	}
	if err := p.checkDir(); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(p.dir, packName(r.Pack)), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return PunchHole(f, r.Off, r.Len)
}

// RemovePack deletes pack num, whose lock the caller holds (f from
// OpenPackForGC).
func (p *Packs) RemovePack(num int64) error {
	p.Forget(num)
	if err := p.checkDir(); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(p.dir, packName(num))); err != nil {
		return err
	}
	return syncDir(p.dir)
}

// List returns the numbers of the pack files in the directory (none if it
// does not exist).
func (p *Packs) List() ([]int64, error) {
	if err := p.checkDir(); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		if n, ok := ParsePackName(e.Name()); ok && e.Type().IsRegular() {
			out = append(out, n)
		}
	}
	return out, nil
}

// RemoveStaleTemps deletes the temporary files of pack creations that
// died before their pack got its name (see create): any NAME.pack.tmp
// whose creator no longer holds its lock. It returns how many it removed.
func (p *Packs) RemoveStaleTemps() (int, error) {
	if err := p.checkDir(); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".tmp")
		if _, isPack := ParsePackName(base); !ok || !isPack || !e.Type().IsRegular() {
			continue
		}
		// A writer creates its temp file and only then locks it: one
		// younger than a minute may be between the two steps.
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < staleTemp {
			continue
		}
		name := filepath.Join(p.dir, e.Name())
		f, err := os.OpenFile(name, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue // gone meanwhile
		}
		if tryLockPack(f) == nil {
			if os.Remove(name) == nil {
				n++
			}
		}
		f.Close()
	}
	return n, nil
}

// staleTemp is the age past which RemoveStaleTemps considers an unlocked
// NAME.pack.tmp abandoned.
const staleTemp = time.Minute

// syncDir fsyncs directory dir so the entries made in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// PackFile describes one pack file on disk.
type PackFile struct {
	Num       int64
	Size      int64 // bytes, holes included
	Allocated int64 // disk space it takes (punched holes take none)
	// Writing: its writer still holds it, so bytes past what committed
	// rows name may belong to a transaction still open.
	Writing bool
}

// Stat lists the pack files with their sizes. It opens each read-only and
// never takes a lock a writer or gc would wait for.
func (p *Packs) Stat() ([]PackFile, error) {
	nums, err := p.List()
	if err != nil {
		return nil, err
	}
	out := make([]PackFile, 0, len(nums))
	for _, num := range nums {
		f, err := os.OpenFile(filepath.Join(p.dir, packName(num)), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue // removed meanwhile (gc)
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			f.Close()
			continue
		}
		pf := PackFile{Num: num, Size: st.Size(), Allocated: st.Size(), Writing: p.Writing() == num || heldByWriter(f)}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			pf.Allocated = sys.Blocks * 512
		}
		f.Close()
		out = append(out, pf)
	}
	return out, nil
}

// PackName is the file name of pack num inside the pack directory.
func PackName(num int64) string { return packName(num) }

// Size is the current size of pack num, read through the same checks as
// a read (the directory no link, the pack a regular file).
func (p *Packs) Size(num int64) (int64, error) {
	if num <= 0 {
		return 0, fmt.Errorf("pack %d is invalid", num)
	}
	p.mu.Lock()
	w := p.w
	p.mu.Unlock()
	if w != nil && w.num == num {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.next, nil // staged bytes count: reads write them out first
	}
	f, err := p.reader(num)
	if err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("pack %s: %w", packName(num), err)
	}
	return st.Size(), nil
}

// releaseBuffers closes the writer's O_DIRECT descriptor and gives back its
// staging buffers: the end of a writer, closed or abandoned. The caller
// holds w.mu.
func (w *packWriter) releaseBuffers() {
	if w.direct >= 0 {
		syscall.Close(w.direct)
		w.direct = -1
	}
	freeStaging(w.buf)
	if w.spare != nil {
		freeStaging(w.spare)
	}
	w.buf, w.spare = nil, nil
}
