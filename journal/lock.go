package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/warmwire"
	"golang.org/x/sys/unix"
)

// Branch locks.
//
// A session (art run, art mount, art exec, art mcp) serves a branch's tree
// to programs that keep its names and inodes in the kernel's caches and in
// the overlay's memory; a change of that tree by anyone else - a checkout,
// an undo, a delete or rename, a pull or an import into it - would pull it
// out from under them (EIO, empty listings). So a session holds its
// branch's lock (LockBranch) for as long as it serves the branch, and
// every change of a branch's tree - whichever verb makes it - first checks
// the lock in the same write transaction that makes the change
// (checkBranchFree, called by Tx before its first tree event, by
// DeleteBranch and RenameBranch). LockBranch takes the lock inside a
// write transaction too, so SQLite's write lock orders the two: either the
// check sees the lock, or the lock is taken after the change committed.
// Only the DB that holds a lock may change that branch (its own overlay);
// any other DB, in this process or another, gets *BranchInUseError.
// Records that do not change the tree (a snapshot, an op's end, exec and
// network events) need no lock: a run's closing snapshot follows its
// unlock.
//
// A lock is a flock(2) on a file in LockDir named for the store's absolute
// path and the branch, holding who took it (pid, store, branch: a line
// each) for session.List. The kernel drops it when its holder dies.

// LockDir is the directory of branch locks - and of sessions' state
// (session.StateDir): /run/art for root, else $XDG_RUNTIME_DIR/art, else
// TMPDIR/art-UID. Locks, like sessions, are per user: a session of another
// user on the same store is not seen. LockDir creates nothing.
func LockDir() string { return warmwire.LockDir() }

// BranchInUseError says a session holds the branch's lock: another session
// on it, or a change of its tree by anyone else, is refused.
type BranchInUseError struct {
	Store, Branch string
	PID           int // the holder's process, when it said (0: unknown)
}

// ErrorClass: the branch's state refuses the change while its session runs.
func (e *BranchInUseError) ErrorClass() errclass.Class { return errclass.Conflict }

func (e *BranchInUseError) Error() string {
	s := fmt.Sprintf("branch %s of %s is in use by another art run", e.Branch, e.Store)
	if e.PID > 0 {
		s += fmt.Sprintf(" (pid %d)", e.PID)
	}
	return s
}

// BranchLock is a held branch lock (LockBranch).
type BranchLock struct {
	db     *DB
	branch string
	f      *os.File
}

// storeKey names db's store for its locks (see BranchKey).
func (db *DB) storeKey() string { return storeKey(db.path) }

// storeKey names the store at path for its locks (warmwire.StoreKey):
// its absolute path with every link resolved.
func storeKey(path string) string { return warmwire.StoreKey(path) }

// BranchKey names branch of the store at path in LockDir: the branch's
// lock file is "lock-" + BranchKey, and whatever else lives there per
// branch (a warm daemon's socket and log) uses the same key, so that
// every path to one store names one file.
func BranchKey(path, branch string) string { return warmwire.BranchKey(path, branch) }

// lockPath is the lock file of branch in db's store.
func (db *DB) lockPath(branch string) string {
	return filepath.Join(db.lockDir, "lock-"+BranchKey(db.path, branch))
}

// LockBranch takes branch's lock for a session serving it: from now until
// Release, only db may change the branch's tree. A branch another holder
// has is *BranchInUseError. The branch need not exist yet.
func (db *DB) LockBranch(ctx context.Context, branch string) (*BranchLock, error) {
	if db.readOnly {
		return nil, fmt.Errorf("lock branch %s: %w", branch, ErrReadOnly)
	}
	if err := os.MkdirAll(db.lockDir, 0o711); err != nil {
		return nil, fmt.Errorf("lock branch %s: %w", branch, err)
	}
	var l *BranchLock
	// Under the store's write lock: a check runs in a write transaction,
	// so it is ordered with this (see the package's branch locks).
	err := db.writeTx(ctx, func(*sql.Tx) error {
		f, err := os.OpenFile(db.lockPath(branch), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return fmt.Errorf("lock branch %s: %w", branch, err)
		}
		// A few tries: session.List (art status) takes a shared lock for
		// an instant to see whether anyone holds it.
		for try := 0; ; try++ {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil && !sameFile(f, db.lockPath(branch)) {
				// The holder we waited for released it and removed the
				// file (Release): a lock on that inode guards nothing.
				f.Close()
				if f, err = os.OpenFile(db.lockPath(branch), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600); err != nil {
					return fmt.Errorf("lock branch %s: %w", branch, err)
				}
				err = unix.EWOULDBLOCK // try again on the new file
			}
			if err == nil {
				break
			}
			if try == 5 || !errors.Is(err, unix.EWOULDBLOCK) {
				f.Close()
				if errors.Is(err, unix.EWOULDBLOCK) {
					return db.inUse(branch)
				}
				return fmt.Errorf("lock branch %s: %w", branch, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Who holds it, for session.List: a previous holder's lines go.
		if err := f.Truncate(0); err == nil {
			fmt.Fprintf(f, "%d\n%s\n%s\n", os.Getpid(), db.storeKey(), branch)
		}
		l = &BranchLock{db: db, branch: branch, f: f}
		return nil
	})
	if err != nil {
		return nil, err
	}
	db.lockMu.Lock()
	db.held[branch] = l
	db.lockMu.Unlock()
	return l, nil
}

// Release gives the lock up. Idempotent.
func (l *BranchLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.db.lockMu.Lock()
	if l.db.held[l.branch] == l {
		delete(l.db.held, l.branch)
	}
	l.db.lockMu.Unlock()
	// The file goes while the lock is still held, so that sessions leave
	// no lock file per store and branch behind them (a test suite made
	// thousands). A locker that opened it before the unlink finds, once it
	// has the flock, that the path no longer names its inode, and opens
	// the path again (LockBranch); a check that opened it sees it free,
	// which it is.
	path := l.db.lockPath(l.branch)
	if sameFile(l.f, path) {
		os.Remove(path)
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// sameFile says whether path names f's inode now.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// BranchFree reports *BranchInUseError when a holder other than db has
// branch's lock now. Advisory - for failing before a long transfer: the
// change itself checks again in its own transaction.
func (db *DB) BranchFree(branch string) error { return db.checkBranchFree(branch) }

// checkBranchFree refuses a change of branch's tree while another holder
// has its lock. Call it inside the write transaction that makes the change.
func (db *DB) checkBranchFree(branch string) error {
	db.lockMu.Lock()
	_, mine := db.held[branch]
	db.lockMu.Unlock()
	if mine {
		return nil
	}
	f, err := os.OpenFile(db.lockPath(branch), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // never locked (no lock directory: none at all)
	}
	if err != nil {
		return fmt.Errorf("check lock of branch %s: %w", branch, err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		return nil // closing f drops the shared lock
	case errors.Is(err, unix.EWOULDBLOCK):
		return db.inUse(branch)
	default:
		return fmt.Errorf("check lock of branch %s: %w", branch, err)
	}
}

// inUse is the error for branch held by someone else, naming the holder
// when its lock file says who it is.
func (db *DB) inUse(branch string) error {
	e := &BranchInUseError{Store: db.path, Branch: branch}
	if data, err := os.ReadFile(db.lockPath(branch)); err == nil {
		if pid, err := strconv.Atoi(strings.SplitN(string(data), "\n", 2)[0]); err == nil {
			e.PID = pid
		}
	}
	return e
}
