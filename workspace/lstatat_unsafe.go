//go:build linux && (amd64 || arm64)

package workspace

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatAt lstats name in directory fd. name must be followed by a NUL in
// memory (right past its length, see readHostDir): the path goes to the
// kernel as it is, where unix.Fstatat would copy each name to add one.
func lstatAt(fd int, name []byte, st *unix.Stat_t) error {
	// The conversions stay in the call expression, as unix.Fstatat's do:
	// that keeps what they point to where they point until it returns.
	_, _, errno := unix.Syscall6(sysFstatat, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(name))),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
