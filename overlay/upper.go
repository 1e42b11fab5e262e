package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Upper directories and what a killed daemon leaves of them.
//
// A mount's private copies hold the agent's files while they are open,
// so a daemon killed with SIGKILL must not leave them behind for good.
// Each upper directory carries a lock file its owner holds (flock) for as
// long as it lives; CleanStaleUppers removes the directories whose lock
// nobody holds. The lock is taken on "lock.new" and then renamed to
// "lock", so a directory being made never shows an unheld "lock".

const (
	upperPrefix = "art-upper-"
	upperLock   = "lock"
)

// MakeUpperDir creates a private upper directory in parent (""
// os.TempDir()) and holds its lock until release, which also removes it.
func MakeUpperDir(parent string) (dir string, release func(), err error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err = os.MkdirTemp(parent, upperPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("upper dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, upperLock+".new"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err = unix.Flock(int(lock.Fd()), unix.LOCK_EX); err == nil {
			err = os.Rename(lock.Name(), filepath.Join(dir, upperLock))
		}
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("upper dir lock: %w", err)
	}
	return dir, func() { os.RemoveAll(dir); lock.Close() }, nil
}

// CleanStaleUppers removes the upper directories in parent ("":
// os.TempDir()) that belong to this user and whose owner is gone, and
// reports how many it removed.
func CleanStaleUppers(parent string) (int, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, upperPrefix+"*"))
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, d := range dirs {
		var st unix.Stat_t
		if unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
			continue
		}
		lock, err := os.Open(filepath.Join(d, upperLock))
		if err != nil {
			continue // being made, or made before locks: not provably stale
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			lock.Close()
			continue // alive
		}
		err = os.RemoveAll(d)
		lock.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
