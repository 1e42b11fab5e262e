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
type packWriter struct {
	f     *os.File
	num   int64
	next  int64       // the next free offset; guarded by Packs.mu
	dirty atomic.Bool // bytes written since the last fdatasync

	// kicked is the end of the last range handed to the disk early
	// (startWriteback); guarded by kickMu.
	kickMu sync.Mutex
	kicked int64
}

// kickBytes is how much a pack's writer appends before it asks the kernel
// to start writing those bytes to disk. The fdatasync before the commit
// then waits for the tail only: storing a 64 MiB file spent a third of its
// close in that fdatasync, with the disk idle while the chunks were cut,
// hashed and compressed.
const kickBytes = 1 << 20

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
var ErrPacksNotDir = errors.New("pack directory is not a directory")

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
// The bytes are in the file (in the page cache) when it returns; Sync
// makes them durable. Offsets are reserved under the lock and written
// outside it, so workers append concurrently.
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
			return 0, 0, fmt.Errorf("create pack in %s: %w", p.dir, err)
		}
		p.w = w
	}
	w := p.w
	off = w.next
	w.next += int64(len(data))
	p.mu.Unlock()
	if _, err := w.f.WriteAt(data, off); err != nil {
		// The range is garbage now: no row will name it.
		return 0, 0, fmt.Errorf("append to pack %s: %w", packName(w.num), err)
	}
	w.dirty.Store(true)
	w.kick(off + int64(len(data)))
	return w.num, off, nil
}

// kick starts writeback of what was appended below end since the last
// kick, once that is kickBytes or more. It only starts I/O, never waits
// for it and never replaces Sync: bytes a concurrent append has not
// written yet are simply not dirty at this point and go with the Sync.
func (w *packWriter) kick(end int64) {
	w.kickMu.Lock()
	from := w.kicked
	if end-from < kickBytes {
		w.kickMu.Unlock()
		return
	}
	w.kicked = end
	w.kickMu.Unlock()
	startWriteback(w.f, from, end-from) // best effort: Sync reports errors
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
		return &packWriter{f: f, num: num}, nil
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
	if w == nil || !w.dirty.Swap(false) {
		return nil
	}
	if err := fdatasync(w.f); err != nil {
		w.dirty.Store(true)
		return fmt.Errorf("sync pack %s: %w", packName(w.num), err)
	}
	return nil
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
		if w.dirty.Load() {
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
