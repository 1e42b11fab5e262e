//go:build linux

package cas

import (
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

// startWriteback asks the kernel to start writing the dirty pages of
// off..off+n of f to disk, without waiting for them (an early start for
// the fdatasync that follows; errors surface there).
func startWriteback(f *os.File, off, n int64) {
	for unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE) == unix.EINTR {
	}
}
