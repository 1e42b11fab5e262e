package journal

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/mattn/go-sqlite3"
)

// ErrBatchFailed marks every error a Batch returns once it has lost a
// transaction (see Batch.Failed): the store could not keep what the
// Batch's callers were told it would.
var ErrBatchFailed = errclass.New(errclass.Unavailable, "the store could not journal")

// FailedPrefix starts the text of the end event (EvEnd) of an operation
// the store could not keep whole - a session whose mount failed: OpInfo's
// Failed is the rest of that text, and art log shows the op as failed.
const FailedPrefix = "failed: "

// AbandonFailedPack gives up the pack this process was writing if a write
// or sync of it failed, cutting it back to what committed rows can name
// (cas.Packs.AbandonFailed: on a full disk this frees the bytes of the
// transactions that were lost), so that the store can be written again.
// Call it only when no transaction of this process that stored content is
// still open (the session calls it once its mount is gone). It returns
// the bytes freed.
func (db *DB) AbandonFailedPack() (int64, error) { return db.packs.AbandonFailed() }

// StorageErrno is the POSIX error that err, a failure to write the store,
// stands for: ENOSPC for a full disk (SQLITE_FULL, or any error carrying
// ENOSPC), EDQUOT, EROFS, else EIO for SQLite's I/O and corruption errors.
// ok is false when err is none of these (a namespace error, a cancel).
func StorageErrno(err error) (e syscall.Errno, ok bool) {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch {
		case se.Code == sqlite3.ErrFull, se.SystemErrno == syscall.ENOSPC:
			return syscall.ENOSPC, true
		case se.SystemErrno == syscall.EDQUOT:
			return syscall.EDQUOT, true
		case se.Code == sqlite3.ErrIoErr, se.Code == sqlite3.ErrCorrupt, se.Code == sqlite3.ErrNotADB,
			se.Code == sqlite3.ErrCantOpen, se.Code == sqlite3.ErrNomem:
			return syscall.EIO, true
		case se.Code == sqlite3.ErrReadonly:
			return syscall.EROFS, true
		}
		return 0, false
	}
	if errors.As(err, &e) {
		switch e {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS:
			return e, true
		}
	}
	return 0, false
}

// storageFailure reports whether an update's error means the store itself
// failed under the Batch - SQLite could not write (a full disk, an I/O
// error), or the pack being written is broken - rather than the update
// being refused (ENOENT, EEXIST...). The Batch's transaction cannot be
// trusted to commit after it: it may hold rows naming pack bytes that
// are lost, and SQLite may have rolled it back already.
func (b *Batch) storageFailure(err error) bool {
	if b.op.db.packs.Failed() != nil || errors.Is(err, cas.ErrPackWrite) {
		return true
	}
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	_, ok := StorageErrno(se)
	return ok
}

// maxLost bounds the paths a Batch names as lost (Lost); the rest are
// counted.
const maxLost = 100

// lostPaths is a set of paths in the order first seen: the first maxLost
// kept, the rest counted. (A Batch loses at most one transaction, of at
// most its MaxOps updates: the set stays small.)
type lostPaths struct {
	seen  map[string]bool
	paths []string
}

func (l *lostPaths) add(p string) {
	if l.seen[p] {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[p] = true
	if len(l.paths) < maxLost {
		l.paths = append(l.paths, p)
	}
}

// list returns the first paths and how many more there are.
func (l *lostPaths) list() ([]string, int) {
	return append([]string(nil), l.paths...), len(l.seen) - len(l.paths)
}

// diskFull reports whether err is SQLite failing for want of space.
func diskFull(err error) bool {
	e, ok := StorageErrno(err)
	return ok && (e == syscall.ENOSPC || e == syscall.EDQUOT)
}

// FullErr is the error of a write to a store opened on a full disk (see
// openReadOnly: a writable open fell back to reading), nil for any other
// store. A verb that must write can tell the user why it cannot.
func (db *DB) FullErr() error {
	if !db.full {
		return nil
	}
	return fmt.Errorf("write to store %s: %w (the disk is full; art could open the store for reading only)", db.path, syscall.ENOSPC)
}

// ensureShm creates the store's -shm file, empty, if it is missing: a
// connection opening it read-only (readonly_shm) needs it to exist, and
// an empty file takes no space. Owned like the store when created by root
// (as SQLite does).
func ensureShm(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path+"-shm", os.O_RDONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, st.Mode().Perm()&0o666)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		f.Chown(int(sys.Uid), int(sys.Gid))
	}
	return nil
}
