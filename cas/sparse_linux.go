package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// seekData and seekHole are lseek(2) with SEEK_DATA and SEEK_HOLE. They move
// f's offset, which PutSparseFile does not use (it reads with pread).
func seekData(f *os.File, off int64) (int64, error) { return f.Seek(off, unix.SEEK_DATA) }
func seekHole(f *os.File, off int64) (int64, error) { return f.Seek(off, unix.SEEK_HOLE) }
