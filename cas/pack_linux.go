//go:build linux

package cas

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockPack takes the writer's lock on a new pack (nobody else can hold it).
func lockPack(f *os.File) error { return tryLockPack(f) }

// tryLockPack takes an exclusive flock without waiting; EWOULDBLOCK when
// another open file (a writer, in any process) holds it.
func tryLockPack(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}

// PunchHole frees bytes off..off+n of f, keeping its size; they read as
// zeros afterwards.
func PunchHole(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// openDirect opens the new pack at name a second time, O_DIRECT and
// write-only, when f's file system reports direct I/O alignments that
// dioAlign satisfies; -1 otherwise (the writer then writes through f).
func openDirect(f *os.File, name string) int {
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st); err != nil {
		return -1
	}
	if st.Mask&unix.STATX_DIOALIGN == 0 || st.Dio_offset_align == 0 || st.Dio_mem_align == 0 ||
		dioAlign%st.Dio_offset_align != 0 || dioAlign%st.Dio_mem_align != 0 {
		return -1
	}
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_DIRECT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	// The name could have been replaced between the two opens only by
	// someone who can write the pack directory; still, write nothing
	// through a descriptor that is not the locked pack.
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Fstat(int(f.Fd()), &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(fd)
		return -1
	}
	return fd
}

// allocStaging returns a page-aligned buffer of n bytes outside Go's heap
// (direct I/O needs the alignment; the garbage collector need not scan it).
func allocStaging(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("pack staging buffer: %w", err)
	}
	return b, nil
}

func freeStaging(b []byte) { unix.Munmap(b) }

// heldByWriter reports whether a writer (an exclusive flock, in any
// process) holds f's pack. A shared lock, taken and dropped at once, is
// the probe: it fails only against an exclusive one.
func heldByWriter(f *os.File) bool {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true
		}
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
}
