// Package walvfs is a SQLite VFS that writes a WAL frame's header and
// page in one write(2) instead of two.
//
// SQLite writes each WAL frame as two pwrite64 calls, its 24-byte header
// and its page apart. A close of a file in art commits about 13 frames,
// so 26 system calls, and on a virtual machine each costs several
// microseconds whatever its size (measured here: 26 writes of a 13-frame
// commit 186-213 us, one write of the same bytes 27-38 us). The VFS holds
// a frame's header until SQLite writes its page, which SQLite does at once
// after it, and writes both together: a commit of n frames is n + 1
// writes (its commit frame's header goes alone).
//
// Nothing is held past a frame. A first version held a whole
// transaction's frames until its commit frame; a review found that a
// transaction rolled back after it spilled frames left them held past
// the release of the WAL's write lock, to be written later over another
// writer's committed frames. Holding only between a header and its page -
// two writes of one step of SQLite's (walWriteOneFrame) - makes that
// impossible: every byte is in the file before SQLite's next step, and a
// failed write fails the frame's own write as with SQLite's VFS.
//
// Rules (walvfs.c):
//   - only WAL files are wrapped; the database file, journals and the
//     shared memory are the default VFS's own, untouched;
//   - a 24-byte write that is not a commit frame's header waits; the
//     write that follows it in the file joins it, in one write;
//   - anything else - a write elsewhere, a read, sync, truncate, size,
//     file control, close - first writes a waiting header alone;
//   - a commit frame's header is written at once (SQLite rewrites it
//     alone, with no page after it, before it publishes the commit).
//
// So a commit is in the kernel exactly when it was before (a kill -9 of
// the process after COMMIT returns loses nothing) and SQLite's
// synchronous=FULL syncs what it wrote, as before.
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

// Stats counts, over the process, the writes SQLite made to WAL files
// through the VFS, the writes the VFS made for them, and the frames it
// wrote whole (header and page in one write).
type Stats struct {
	Writes, RealWrites, Frames int64
}

// Read returns the counters so far.
func Read() Stats {
	var out [3]C.wv_i64
	C.wv_stats(&out[0])
	return Stats{Writes: int64(out[0]), RealWrites: int64(out[1]), Frames: int64(out[2])}
}
