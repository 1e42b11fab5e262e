//go:build !linux

package cas

import (
	"os"
	"syscall"
)

// Without SEEK_DATA, PutSparseFile stores every file as PutFile does.
func seekData(*os.File, int64) (int64, error) { return 0, syscall.EINVAL }
func seekHole(*os.File, int64) (int64, error) { return 0, syscall.EINVAL }
