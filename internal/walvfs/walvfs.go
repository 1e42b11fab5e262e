// Package walvfs is a SQLite VFS that writes the WAL frames of a commit
// in one write(2) instead of two a frame.
//
// SQLite writes each WAL frame as two pwrite64 calls, its 24-byte header
// and its page apart. A close of a file in art commits about 13 frames,
// so 26 system calls, and on a virtual machine each costs several
// microseconds whatever its size (measured here: 26 writes of a 13-frame
// commit 186-213 us, one write of the same bytes 27-38 us).
//
// The VFS holds a run of a write transaction's frames as SQLite appends
// them and writes the run in one call within the write of the commit
// frame's page, before SQLite publishes the commit: a commit of up to
// 31 frames of 4 KiB (the default VFS's 128 KiB a write) is one write.
// Nothing is held across any other call on the WAL file, across a
// commit's publication, or across the release of the WAL write lock,
// which the VFS sees on the database file's shared memory (xShmLock):
// what is still held then is a rolled-back transaction's and is
// discarded. Outside a WAL write lock taken through the shared memory
// (exclusive locking mode among others) it holds nothing. walvfs.c
// states the invariant and each rule with the SQLite function it relies
// on.
//
// A first version held a transaction's frames until its commit without
// watching the lock: a transaction rolled back after spilling frames left
// them held past the lock's release, to be written later over another
// writer's committed frames (TestRollbackAfterSpillLeavesNothingHeld). A
// second held only a frame's header until its page (n + 1 writes a
// commit of n frames).
//
// A commit is in the kernel when COMMIT returns, as without the VFS (a
// kill -9 of the process after it loses nothing), and synchronous=FULL
// syncs what was written, as before. A failed write of a run fails the
// call that made it, and the WAL file fails every call until the
// transaction ends.
package walvfs

/*
#include "walvfs.h"
*/
import "C"

import (
	"fmt"
	"sync"

	// The SQLite the VFS registers with: go-sqlite3's, linked in.
	_ "github.com/mattn/go-sqlite3"
)

// Name is the VFS's name, for a connection's vfs= URI parameter.
const Name = "art-wal"

var (
	once   sync.Once
	regErr error
	cname  = C.CString(Name) // SQLite keeps the pointer: never freed
)

// Register registers the VFS with SQLite (once; later calls return the
// first call's result). A connection uses it only when opened with
// vfs=Name.
func Register() error {
	once.Do(func() {
		if rc := C.wv_register(cname); rc != 0 {
			regErr = fmt.Errorf("walvfs: register the WAL-gathering SQLite VFS: no usable default VFS (SQLite error %d)", int(rc))
		}
	})
	return regErr
}

// Stats counts, over the process: the writes SQLite made to WAL files
// through the VFS; the writes the VFS made for them; the frames it held
// (written with others in one write); the runs it wrote (one write each);
// the bytes it discarded at a release of the WAL write lock (a
// rolled-back transaction's frames).
type Stats struct {
	Writes, RealWrites, Frames, Runs, Discarded int64
}

// Read returns the counters so far.
func Read() Stats {
	var out [5]C.wv_i64
	C.wv_stats(&out[0])
	return Stats{Writes: int64(out[0]), RealWrites: int64(out[1]), Frames: int64(out[2]),
		Runs: int64(out[3]), Discarded: int64(out[4])}
}

// failRun makes the n-th write of a held run from now fail with
// SQLITE_IOERR_WRITE, without writing (0: none). For tests: cgo cannot be
// used from a _test.go file.
func failRun(n int) {
	C.wv_fail_run(C.int(n))
}
