package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// removeTree removes dir and everything below it that is on dir's own
// mount, like rm -rf --one-file-system: a mount point found inside (a
// session's home still mounted, served or not) is left with the path to
// it, and reported. A session's state is removed this way so that no
// failure elsewhere can make a removal delete a branch's files through
// its mount.
func removeTree(dir string) error {
	id, err := mountID(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return removeOnMount(dir, id)
}

func removeOnMount(p string, id uint64) error {
	got, err := mountID(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err // a dead FUSE mount answers ENOTCONN: left too
	}
	if got != id {
		return fmt.Errorf("remove %s: a mount point, left in place", p)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		ents, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		var errs []error
		for _, e := range ents {
			if err := removeOnMount(filepath.Join(p, e.Name()), id); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// mountID is the id of the mount p is on (p itself when it is a mount
// point), without following a final symlink: unlike st_dev it tells a
// bind mount from the filesystem it shows.
func mountID(p string) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, &fs.PathError{Op: "statx", Path: p, Err: err}
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: no mount id (kernel before 5.8)", p)
	}
	return stx.Mnt_id, nil
}
