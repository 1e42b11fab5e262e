package sandbox

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isSymlink(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}

// searchableBy reports whether a process with host ids uid and gid (and
// no supplementary groups, as the sandboxed command has) could reach path
// from root, a directory at or above it where the sandbox shows the host's
// tree (/ for the host root, a bind's source): every directory from root
// down to path's parent grants search (x) to that uid, its gid, or
// others. A directory with a POSIX ACL counts as searchable, since its
// entries may grant more than its mode shows: that errs towards hiding.
func searchableBy(root, path string, uid, gid int) bool {
	root = filepath.Clean(root)
	for dir := filepath.Dir(filepath.Clean(path)); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return true
		}
		if !searchBit(st, uid, gid) {
			if _, err := unix.Getxattr(dir, "system.posix_acl_access", nil); err != nil {
				return false
			}
		}
		if dir == root || dir == "/" || dir == "." {
			return true
		}
	}
}

func searchBit(st unix.Stat_t, uid, gid int) bool {
	switch {
	case int(st.Uid) == uid:
		return st.Mode&unix.S_IXUSR != 0
	case int(st.Gid) == gid:
		return st.Mode&unix.S_IXGRP != 0
	}
	return st.Mode&unix.S_IXOTH != 0
}
