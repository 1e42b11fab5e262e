//go:build !(linux && (amd64 || arm64))

package workspace

import "golang.org/x/sys/unix"

func lstatAt(fd int, name []byte, st *unix.Stat_t) error {
	return unix.Fstatat(fd, string(name), st, unix.AT_SYMLINK_NOFOLLOW)
}
