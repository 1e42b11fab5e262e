// Package walvfs is a SQLite VFS that writes a WAL commit's frames in one
// write(2) instead of two per frame.
//
// SQLite writes each WAL frame as two pwrite64 calls, its 24-byte header
// and its page apart. A close of a file in art commits about 13 frames,
// so 26 system calls, and on a virtual machine each costs several
// microseconds whatever its size (measured here: 26 writes of a 13-frame
// commit 186-213 us, one write of the same bytes 27-38 us). The VFS holds
// a transaction's frames in memory as SQLite writes them, in order, and
// writes them at once when SQLite writes the commit frame's page: the
// transaction's last write, before SQLite publishes the commit in the
// WAL index for readers and before the COMMIT returns. So a commit is in
// the kernel exactly when it was before (a kill -9 of the process after
// COMMIT returns loses nothing), a failed write fails the commit as
// before, and no reader can see a frame not yet written.
//
// Rules (walvfs.c):
//   - only WAL files are wrapped; the database file, journals and the
//     shared memory are the default VFS's own, untouched;
//   - a run of held bytes starts with a frame header that is not a
//     commit's and grows only by the bytes that follow it in the file;
//   - anything else - a write elsewhere, a read, sync, truncate, size,
//     file control, close - first writes what is held;
//   - a commit frame's header ends the run at its page.
//
// SQLite's synchronous=FULL syncs the WAL at a commit: the sync writes
// what is held first, so power-loss durability is unchanged too.
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
// through the VFS, the writes the VFS made for them, and the commits it
// wrote at their commit frame's page.
type Stats struct {
	Writes, RealWrites, Commits int64
}

// Read returns the counters so far.
func Read() Stats {
	var out [3]C.wv_i64
	C.wv_stats(&out[0])
	return Stats{Writes: int64(out[0]), RealWrites: int64(out[1]), Commits: int64(out[2])}
}
