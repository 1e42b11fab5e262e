//go:build !linux

package cas

import (
	"errors"
	"os"
	"syscall"
)

// Without flock semantics art relies on, a pack is never considered
// free: gc leaves every pack file in place.
func lockPack(f *os.File) error    { return nil }
func tryLockPack(f *os.File) error { return syscall.EWOULDBLOCK }

// PunchHole is not available: the space of dead objects stays allocated
// until their pack is wholly dead (which, without locks, is never).
func PunchHole(f *os.File, off, n int64) error { return errors.ErrUnsupported }

func fdatasync(f *os.File) error { return f.Sync() }

// No direct I/O: write-outs go through the page cache.
func openDirect(f *os.File, name string) int { return -1 }

func allocStaging(n int) ([]byte, error) { return make([]byte, n), nil }

func freeStaging(b []byte) {}

func heldByWriter(f *os.File) bool { return true } // unknown: assume busy
