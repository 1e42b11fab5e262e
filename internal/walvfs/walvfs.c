// A VFS over SQLite's default one that writes the WAL frames of a
// commit in one write. See walvfs.go for why.
//
// INVARIANT. The VFS holds bytes SQLite wrote to a WAL file (not yet
// passed to the default VFS) only as one run: contiguous, in SQLite's
// order, all of it written after anything else SQLite wrote to that
// file. No byte is held
//   (a) across any other call on the WAL file (a read, a write that is
//       not an exact append to the run, sync, truncate, size, lock, file
//       control, close): that call writes the run first;
//   (b) across the publication of a commit: the run is written within
//       the write of the commit frame's page, the last write of the
//       commit's frames before walFrames publishes them in the wal-index
//       (walIndexWriteHdr, a memory store into the -shm with no VFS call);
//   (c) across the release of the WAL write lock (lock slot 0 of the
//       -shm, released by xShmLock on the DATABASE file): what is held
//       then is discarded before the release passes on;
//   (d) at all, unless this WAL file's database holds the WAL write lock
//       through xShmLock, on a file with powersafe overwrite.
// So every frame another connection or process may read (published) or
// write over (after the lock's release) is in the file first, a COMMIT
// returns with its frames in the kernel as without the VFS, and no held
// byte can land later over another writer's frames.
//
// RULES, and what in SQLite 3.54.1 (go-sqlite3 v1.14.53's amalgamation)
// each relies on:
//  1. A run starts only with a 24-byte write that is a frame header with
//     nTruncate (bytes 4-7, big-endian) zero: a non-commit frame's
//     header. Every 24-byte WAL write is a frame header: walWriteOneFrame
//     (header, then its page at once) and walRewriteChecksums (a rewrite,
//     always just after an xRead of that frame, which wrote any run);
//     the WAL header is 32 bytes (walFrames), pages are >= 512. A write
//     split at a sync point (walWriteToLog) happens only when a commit is
//     padded to a sector (walFrames, padToSectorBoundary), which
//     sqlite3WalOpen turns off when the database file has
//     SQLITE_IOCAP_POWERSAFE_OVERWRITE: rule (d) holds nothing otherwise.
//  2. A write at exactly the run's end joins it, while the run stays
//     within RUN_CAP (a frame is never split across two runs: a header
//     joins only with room for its page). A frame header whose nTruncate
//     is nonzero marks a commit frame (walEncodeFrame writes nTruncate
//     there, nonzero only on a commit's last frame, walFrames' nDbSize);
//     the write after it, its page (walWriteOneFrame), writes the run:
//     rule (b). walFrames writes the commit frame last (a commit's last
//     page is never overwritten in place: "p->pDirty || isCommit==0"),
//     then may rewrite checksums (reads first: rule (a)), pad (rule 1),
//     sync, truncate (walLimitSize) - all on a file with nothing held.
//     A commit header that would start a run is written as it comes: it
//     might be walRewriteChecksums' rewrite, with no page after it.
//  3. Any write that is not an exact append writes the run first, then
//     goes through: walFrames overwrites a frame of the current
//     transaction in place (page only, at an earlier offset, after a
//     spill), writes the WAL header at offset 0 when walRestartLog
//     restarts the log, and after sqlite3WalSavepointUndo moves mxFrame
//     back its next frames land before the run's end.
//  4. The database file is wrapped too, and linked to its WAL file:
//     sqlite3WalOpen opens the WAL with the pager's zWal, which
//     sqlite3PagerOpen places in the same allocation as zFilename, the
//     name the database file was opened with (sqlite3PagerOpen:
//     sqlite3OsOpen of pPager->zFilename); sqlite3_filename_database(zWal)
//     returns that very pointer (databaseName: back to the four zero
//     bytes sqlite3PagerOpen puts before zFilename). sqlite3WalOpen is
//     the only opener of a WAL file (SQLITE_OPEN_WAL). The pager closes the WAL before the
//     database file (sqlite3PagerClose). Its xShmLock tracks the WAL
//     write lock (walLockExclusive/walUnlockExclusive: slot 0,
//     SQLITE_SHM_EXCLUSIVE): taken by sqlite3WalBeginWriteTransaction,
//     released by sqlite3WalEndWriteTransaction after a commit or a
//     rollback, and around checkpoints and recovery.
//  5. At the release, anything held is discarded, not written. It can
//     only be frames of no commit: a commit writes the run at its commit
//     page (rule 2) or fails (and is then rolled back); what is held is
//     a rolled-back transaction's spilled frames (sqlite3WalUndo resets
//     the connection's wal-index header from the shared one; the pager's
//     undo, pagerUndoCallback -> readDbPage, may read the WAL first,
//     which writes the run by rule (a): harmless, those bytes are
//     beyond the published mxFrame) or a failed commit's (pager_unlock in the ERROR state
//     releases the lock, and the next read transaction takes its header
//     from the -shm: walIndexReadHdr). SQLite never reads them again (the
//     next transaction writes from the published mxFrame + 1, over
//     them), another writer may write there as soon as the lock is free,
//     and writing a failed commit's frames whole could make a crash
//     recovery (walIndexRecover) take them for a commit.
//  6. Exclusive locking mode: walLockExclusive and walUnlockExclusive
//     return before any xShmLock (pWal->exclusiveMode), and a heap-memory
//     wal-index maps no -shm: no WAL write lock is seen, so by rule (d)
//     nothing is held and every write goes through as it comes.
//  7. A failed write of the run fails the call that wrote it, and the
//     run is dropped; the WAL file then fails every call until the WAL
//     write lock's release: SQLite believes those frames written, so the
//     transaction must not commit or read them (an error it treats as a
//     statement's - SQLITE_FULL in sqlite3VdbeHalt - may leave it open).
//     Nothing is written for it after (rule 5), and the next transaction
//     starts clean.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "walvfs.h"

// A frame's header: 24 bytes, then the page.
#define FRAME_HEADER 24
// The most one write of the default VFS takes: the unix VFS masks a
// write's size to 17 bits (seekAndWriteFd: nBuf &= 0x1ffff), so a bigger
// one comes back short and fails as SQLITE_FULL. A run is at most this,
// one write; a commit over it is several runs, each written whole. (A
// bigger run would need the file descriptor, which the default VFS does
// not give out.)
#define RUN_CAP 0x1ffff

typedef struct wal_file wal_file;
typedef struct db_file db_file;

struct wal_file {
	wv_file base;
	wv_file *real; // the default VFS's file, in the same allocation
	db_file *db; // its database file (rule 4), NULL if not found
	unsigned char *buf; // the held run (RUN_CAP bytes; NULL until needed)
	wv_i64 off; // file offset of buf[0]
	int len; // bytes held
	int page; // size of the last page joined to a run (to keep frames whole)
	int commit; // the run ends with a commit frame's header: its page writes it
	int err; // rule 7: nonzero after a failed write of a run, until the lock's release
	int psow; // the database file had SQLITE_IOCAP_POWERSAFE_OVERWRITE at the open (rule 1)
};

struct db_file {
	wv_file base;
	wv_file *real;
	const char *name; // the pointer SQLite opened it with (rule 4)
	wal_file *wal; // its WAL file while open
	int write_lock; // holds the WAL write lock (xShmLock slot 0, exclusive)
	db_file *next; // in dbs
};

// The real file sits after ours, at an offset aligned to 16 bytes.
#define REAL_OFFSET(t) ((sizeof(t) + 15) & ~(size_t)15)
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static wv_vfs art_vfs;
static wv_vfs *real_vfs;

// Open database files, to link a WAL file to its database's (rule 4).
// Only opens and closes take the mutex: after that a database file and
// its WAL file are used by their one connection (their pager) alone.
static pthread_mutex_t dbs_mu = PTHREAD_MUTEX_INITIALIZER;
static db_file *dbs;

// Counters for tests and measurement: writes SQLite made to WAL files;
// writes this VFS made for them; frame headers it held and wrote with
// their page; runs it wrote; bytes it discarded at a release of the
// WAL write lock (rule 5).
static wv_i64 n_writes, n_real_writes, n_frames, n_runs, n_discarded;
// Tests only: the n-th run write from now fails (0: none).
static int fail_run;

static void add(wv_i64 *c, wv_i64 n) { __atomic_fetch_add(c, n, __ATOMIC_RELAXED); }

void wv_stats(wv_i64 out[5]) {
	out[0] = __atomic_load_n(&n_writes, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&n_real_writes, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&n_frames, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&n_runs, __ATOMIC_RELAXED);
	out[4] = __atomic_load_n(&n_discarded, __ATOMIC_RELAXED);
}

void wv_fail_run(int n) { __atomic_store_n(&fail_run, n, __ATOMIC_RELAXED); }

static int injected_fault(void) {
	int n = __atomic_load_n(&fail_run, __ATOMIC_RELAXED);
	while (n > 0) {
		if (__atomic_compare_exchange_n(&fail_run, &n, n - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			return n == 1;
		}
	}
	return 0;
}

// flush writes the held run, in one write (rule 7 on failure).
static int flush(wal_file *w) {
	if (w->err != WV_OK) {
		return w->err;
	}
	if (w->len == 0) {
		return WV_OK;
	}
	int rc;
	if (injected_fault()) {
		rc = WV_IOERR_WRITE;
	} else {
		add(&n_real_writes, 1);
		add(&n_runs, 1);
		rc = w->real->methods->write(w->real, w->buf, w->len, w->off);
	}
	w->len = 0;
	w->commit = 0;
	w->err = rc;
	return rc;
}

// discard drops what is held and any failure (rule 5): the WAL write
// lock is being released.
static void discard(wal_file *w) {
	add(&n_discarded, w->len);
	w->len = 0;
	w->commit = 0;
	w->err = WV_OK;
}

static int may_hold(const wal_file *w) {
	return w->db != NULL && w->db->write_lock && w->psow;
}

static int is_commit_header(const void *p) {
	const unsigned char *b = p;
	return (b[4] | b[5] | b[6] | b[7]) != 0;
}

// start holds a non-commit frame's header as a new run (rule 1), or
// returns 0 if it cannot.
static int start(wal_file *w, const void *p, int n, wv_i64 off) {
	if (n != FRAME_HEADER || is_commit_header(p) || !may_hold(w)) {
		return 0;
	}
	if (w->buf == NULL) {
		w->buf = malloc(RUN_CAP);
		if (w->buf == NULL) {
			return 0;
		}
	}
	memcpy(w->buf, p, n);
	w->off = off;
	w->len = n;
	add(&n_frames, 1);
	return 1;
}

static int wal_write(wv_file *f, const void *p, int n, wv_i64 off) {
	wal_file *w = (wal_file *)f;
	add(&n_writes, 1);
	if (w->err != WV_OK) {
		return w->err;
	}
	if (w->len > 0 && off == w->off + w->len) {
		// Rule 2. A header joins only with room for its page after it.
		int room = RUN_CAP - w->len;
		if (n == FRAME_HEADER ? n + w->page <= room : n <= room) {
			memcpy(w->buf + w->len, p, n);
			w->len += n;
			if (w->commit) {
				// The commit frame's page: nothing may be held
				// past it (rule b).
				return flush(w);
			}
			if (n == FRAME_HEADER) {
				add(&n_frames, 1);
				w->commit = is_commit_header(p);
			} else {
				w->page = n;
			}
			return WV_OK;
		}
	}
	// Rules 2 (full) and 3 (not an append): what is held goes first.
	int rc = flush(w);
	if (rc != WV_OK) {
		return rc;
	}
	if (start(w, p, n, off)) {
		return WV_OK;
	}
	add(&n_real_writes, 1);
	return w->real->methods->write(w->real, p, n, off);
}

static void unlink_wal(wal_file *w) {
	pthread_mutex_lock(&dbs_mu);
	if (w->db != NULL) {
		w->db->wal = NULL;
		w->db = NULL;
	}
	pthread_mutex_unlock(&dbs_mu);
}

static int wal_close(wv_file *f) {
	wal_file *w = (wal_file *)f;
	// Nothing is held here in SQLite's use (sqlite3WalClose runs with no
	// write transaction: rule (d)). Should anything be, it is written
	// only while the write lock is still held; without it another
	// writer may already own those offsets, so it is dropped (rule 5).
	int rc = WV_OK;
	if (w->db != NULL && w->db->write_lock) {
		rc = flush(w);
	} else {
		discard(w);
	}
	unlink_wal(w);
	int rc2 = w->real->methods->close(w->real);
	free(w->buf);
	w->buf = NULL;
	return rc != WV_OK ? rc : rc2;
}

// Rule (a): every other call sees the file as written so far.
#define FLUSHED(w) \
	wal_file *w = (wal_file *)f; \
	int frc = flush(w); \
	if (frc != WV_OK) { \
		return frc; \
	}

static int wal_read(wv_file *f, void *p, int n, wv_i64 off) {
	FLUSHED(w);
	return w->real->methods->read(w->real, p, n, off);
}
static int wal_truncate(wv_file *f, wv_i64 size) {
	FLUSHED(w);
	return w->real->methods->truncate(w->real, size);
}
static int wal_sync(wv_file *f, int flags) {
	FLUSHED(w);
	return w->real->methods->sync(w->real, flags);
}
static int wal_file_size(wv_file *f, wv_i64 *size) {
	FLUSHED(w);
	return w->real->methods->file_size(w->real, size);
}
static int wal_lock(wv_file *f, int l) {
	FLUSHED(w);
	return w->real->methods->lock(w->real, l);
}
static int wal_unlock(wv_file *f, int l) {
	FLUSHED(w);
	return w->real->methods->unlock(w->real, l);
}
static int wal_check_reserved_lock(wv_file *f, int *out) {
	FLUSHED(w);
	return w->real->methods->check_reserved_lock(w->real, out);
}
static int wal_file_control(wv_file *f, int op, void *arg) {
	FLUSHED(w);
	return w->real->methods->file_control(w->real, op, arg);
}
// Properties of the file, not of its bytes: nothing to write first.
static int wal_sector_size(wv_file *f) {
	wal_file *w = (wal_file *)f;
	return w->real->methods->sector_size(w->real);
}
static int wal_device_characteristics(wv_file *f) {
	wal_file *w = (wal_file *)f;
	return w->real->methods->device_characteristics(w->real);
}
// SQLite keeps a WAL's shared memory on its database file, never on the
// WAL file, and maps only database files: these forward for completeness.
static int wal_shm_map(wv_file *f, int pg, int size, int extend, void volatile **pp) {
	FLUSHED(w);
	if (w->real->methods->version < 2) {
		return WV_ERROR;
	}
	return w->real->methods->shm_map(w->real, pg, size, extend, pp);
}
static int wal_shm_lock(wv_file *f, int off, int n, int flags) {
	FLUSHED(w);
	if (w->real->methods->version < 2) {
		return WV_ERROR;
	}
	return w->real->methods->shm_lock(w->real, off, n, flags);
}
static void wal_shm_barrier(wv_file *f) {
	wal_file *w = (wal_file *)f;
	if (w->real->methods->version >= 2) {
		w->real->methods->shm_barrier(w->real);
	}
}
static int wal_shm_unmap(wv_file *f, int del) {
	FLUSHED(w);
	if (w->real->methods->version < 2) {
		return WV_ERROR;
	}
	return w->real->methods->shm_unmap(w->real, del);
}
static int wal_fetch(wv_file *f, wv_i64 off, int n, void **pp) {
	FLUSHED(w);
	*pp = NULL;
	if (w->real->methods->version < 3) {
		return WV_OK; // no mapping: SQLite reads instead
	}
	return w->real->methods->fetch(w->real, off, n, pp);
}
static int wal_unfetch(wv_file *f, wv_i64 off, void *p) {
	FLUSHED(w);
	if (w->real->methods->version < 3) {
		return WV_OK;
	}
	return w->real->methods->unfetch(w->real, off, p);
}

static const wv_methods wal_methods = {
	3,
	wal_close,
	wal_read,
	wal_write,
	wal_truncate,
	wal_sync,
	wal_file_size,
	wal_lock,
	wal_unlock,
	wal_check_reserved_lock,
	wal_file_control,
	wal_sector_size,
	wal_device_characteristics,
	wal_shm_map,
	wal_shm_lock,
	wal_shm_barrier,
	wal_shm_unmap,
	wal_fetch,
	wal_unfetch,
};

// The database file: the default VFS's, but for xShmLock (rule 4, 5)
// and xClose (the link).
#define DB(d) db_file *d = (db_file *)f

static int db_close(wv_file *f) {
	DB(d);
	pthread_mutex_lock(&dbs_mu);
	for (db_file **pp = &dbs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	if (d->wal != NULL) {
		// Not in SQLite's order (the WAL closes first); kept safe: the
		// close gives up the file's locks, so nothing of the WAL's may
		// stay held past it (rule 5).
		discard(d->wal);
		d->wal->db = NULL;
		d->wal = NULL;
	}
	pthread_mutex_unlock(&dbs_mu);
	return d->real->methods->close(d->real);
}
static int db_read(wv_file *f, void *p, int n, wv_i64 off) {
	DB(d);
	return d->real->methods->read(d->real, p, n, off);
}
static int db_write(wv_file *f, const void *p, int n, wv_i64 off) {
	DB(d);
	return d->real->methods->write(d->real, p, n, off);
}
static int db_truncate(wv_file *f, wv_i64 size) {
	DB(d);
	return d->real->methods->truncate(d->real, size);
}
static int db_sync(wv_file *f, int flags) {
	DB(d);
	return d->real->methods->sync(d->real, flags);
}
static int db_file_size(wv_file *f, wv_i64 *size) {
	DB(d);
	return d->real->methods->file_size(d->real, size);
}
static int db_lock(wv_file *f, int l) {
	DB(d);
	return d->real->methods->lock(d->real, l);
}
static int db_unlock(wv_file *f, int l) {
	DB(d);
	return d->real->methods->unlock(d->real, l);
}
static int db_check_reserved_lock(wv_file *f, int *out) {
	DB(d);
	return d->real->methods->check_reserved_lock(d->real, out);
}
static int db_file_control(wv_file *f, int op, void *arg) {
	DB(d);
	return d->real->methods->file_control(d->real, op, arg);
}
static int db_sector_size(wv_file *f) {
	DB(d);
	return d->real->methods->sector_size(d->real);
}
static int db_device_characteristics(wv_file *f) {
	DB(d);
	return d->real->methods->device_characteristics(d->real);
}
static int db_shm_map(wv_file *f, int pg, int size, int extend, void volatile **pp) {
	DB(d);
	return d->real->methods->shm_map(d->real, pg, size, extend, pp);
}
// db_shm_lock sees the WAL write lock (slot 0) taken and released.
static int db_shm_lock(wv_file *f, int off, int n, int flags) {
	DB(d);
	int slot0 = off == 0 && n > 0 && (flags & WV_SHM_EXCLUSIVE) != 0;
	if (slot0 && (flags & WV_SHM_UNLOCK) != 0) {
		// Rule 5: nothing is held past the release. Before it, not
		// after: once the unlock passes on, another writer may write.
		d->write_lock = 0;
		if (d->wal != NULL) {
			discard(d->wal);
		}
	}
	int rc = d->real->methods->shm_lock(d->real, off, n, flags);
	if (slot0 && (flags & WV_SHM_LOCK) != 0 && rc == WV_OK) {
		d->write_lock = 1;
	}
	return rc;
}
static void db_shm_barrier(wv_file *f) {
	DB(d);
	d->real->methods->shm_barrier(d->real);
}
static int db_shm_unmap(wv_file *f, int del) {
	DB(d);
	// Unmapping the -shm gives up every lock on it, the write lock
	// included: as at its release, nothing is held past it (rule 5).
	// Not in SQLite's order with a write transaction open.
	d->write_lock = 0;
	if (d->wal != NULL) {
		discard(d->wal);
	}
	return d->real->methods->shm_unmap(d->real, del);
}
static int db_fetch(wv_file *f, wv_i64 off, int n, void **pp) {
	DB(d);
	return d->real->methods->fetch(d->real, off, n, pp);
}
static int db_unfetch(wv_file *f, wv_i64 off, void *p) {
	DB(d);
	return d->real->methods->unfetch(d->real, off, p);
}

static const wv_methods db_methods = {
	3,
	db_close,
	db_read,
	db_write,
	db_truncate,
	db_sync,
	db_file_size,
	db_lock,
	db_unlock,
	db_check_reserved_lock,
	db_file_control,
	db_sector_size,
	db_device_characteristics,
	db_shm_map,
	db_shm_lock,
	db_shm_barrier,
	db_shm_unmap,
	db_fetch,
	db_unfetch,
};

// open_real opens the default VFS's file at real, inside f. SQLite
// closes a file whose methods are set even when its open failed; ours
// are not set then, so a failed real open is closed here.
static int open_real(wv_file *f, wv_file *real, const char *name, int flags, int *out) {
	real->methods = NULL;
	int rc = real_vfs->open(real_vfs, name, real, flags, out);
	if (rc != WV_OK) {
		if (real->methods != NULL) {
			real->methods->close(real);
		}
		f->methods = NULL;
	}
	return rc;
}

// art_open wraps a main database file and a WAL file; any other file is
// the default VFS's own, opened in place (its methods, untouched).
static int art_open(wv_vfs *v, const char *name, wv_file *f, int flags, int *out) {
	(void)v;
	if ((flags & WV_OPEN_MAIN_DB) != 0 && name != NULL && (flags & WV_OPEN_WAL) == 0) {
		db_file *d = (db_file *)f;
		memset(d, 0, sizeof *d);
		d->real = (wv_file *)((char *)f + REAL_OFFSET(db_file));
		int rc = open_real(f, d->real, name, flags, out);
		if (rc != WV_OK) {
			return rc;
		}
		if (d->real->methods->version < 3) {
			// No shared memory to watch: no WAL run can be held.
			d->real->methods->close(d->real);
			f->methods = NULL;
			return WV_ERROR;
		}
		d->name = name;
		pthread_mutex_lock(&dbs_mu);
		d->next = dbs;
		dbs = d;
		pthread_mutex_unlock(&dbs_mu);
		d->base.methods = &db_methods;
		return WV_OK;
	}
	if ((flags & WV_OPEN_WAL) == 0) {
		return real_vfs->open(real_vfs, name, f, flags, out);
	}
	wal_file *w = (wal_file *)f;
	memset(w, 0, sizeof *w);
	w->real = (wv_file *)((char *)f + REAL_OFFSET(wal_file));
	int rc = open_real(f, w->real, name, flags, out);
	if (rc != WV_OK) {
		return rc;
	}
	// Rule 4. Unlinked (no database found), the file holds nothing.
	const char *db_name = sqlite3_filename_database(name);
	pthread_mutex_lock(&dbs_mu);
	for (db_file *d = dbs; d != NULL; d = d->next) {
		if (d->name == db_name && d->wal == NULL) {
			d->wal = w;
			w->db = d;
			break;
		}
	}
	pthread_mutex_unlock(&dbs_mu);
	// Read as sqlite3WalOpen reads it right after this open to decide
	// padToSectorBoundary for this WAL's life (a file control may change
	// the database file's flag later; the WAL keeps its choice).
	if (w->db != NULL) {
		wv_file *dr = w->db->real;
		w->psow = (dr->methods->device_characteristics(dr) & WV_IOCAP_POWERSAFE_OVERWRITE) != 0;
	}
	w->base.methods = &wal_methods;
	return WV_OK;
}

// The rest is the default VFS's, called with its own vfs pointer.
static int art_delete(wv_vfs *v, const char *name, int sync_dir) {
	(void)v;
	return real_vfs->delete_(real_vfs, name, sync_dir);
}
static int art_access(wv_vfs *v, const char *name, int flags, int *out) {
	(void)v;
	return real_vfs->access(real_vfs, name, flags, out);
}
static int art_full_pathname(wv_vfs *v, const char *name, int n, char *out) {
	(void)v;
	return real_vfs->full_pathname(real_vfs, name, n, out);
}
static void *art_dl_open(wv_vfs *v, const char *name) {
	(void)v;
	return real_vfs->dl_open(real_vfs, name);
}
static void art_dl_error(wv_vfs *v, int n, char *msg) {
	(void)v;
	real_vfs->dl_error(real_vfs, n, msg);
}
static void (*art_dl_sym(wv_vfs *v, void *h, const char *sym))(void) {
	(void)v;
	return real_vfs->dl_sym(real_vfs, h, sym);
}
static void art_dl_close(wv_vfs *v, void *h) {
	(void)v;
	real_vfs->dl_close(real_vfs, h);
}
static int art_randomness(wv_vfs *v, int n, char *out) {
	(void)v;
	return real_vfs->randomness(real_vfs, n, out);
}
static int art_sleep(wv_vfs *v, int us) {
	(void)v;
	return real_vfs->sleep(real_vfs, us);
}
static int art_current_time(wv_vfs *v, double *out) {
	(void)v;
	return real_vfs->current_time(real_vfs, out);
}
static int art_get_last_error(wv_vfs *v, int n, char *out) {
	(void)v;
	return real_vfs->get_last_error(real_vfs, n, out);
}
static int art_current_time_int64(wv_vfs *v, wv_i64 *out) {
	(void)v;
	return real_vfs->current_time_int64(real_vfs, out);
}
static int art_set_system_call(wv_vfs *v, const char *name, wv_syscall_ptr p) {
	(void)v;
	return real_vfs->set_system_call(real_vfs, name, p);
}
static wv_syscall_ptr art_get_system_call(wv_vfs *v, const char *name) {
	(void)v;
	return real_vfs->get_system_call(real_vfs, name);
}
static const char *art_next_system_call(wv_vfs *v, const char *name) {
	(void)v;
	return real_vfs->next_system_call(real_vfs, name);
}

// wv_register registers the VFS as name (not the default). Called once.
int wv_register(const char *name) {
	real_vfs = sqlite3_vfs_find(NULL);
	if (real_vfs == NULL || real_vfs->version < 3) {
		return WV_ERROR;
	}
	art_vfs.version = 3;
	art_vfs.file_size = (int)(MAX(REAL_OFFSET(wal_file), REAL_OFFSET(db_file)) + (size_t)real_vfs->file_size);
	art_vfs.max_pathname = real_vfs->max_pathname;
	art_vfs.name = name;
	art_vfs.open = art_open;
	art_vfs.delete_ = art_delete;
	art_vfs.access = art_access;
	art_vfs.full_pathname = art_full_pathname;
	art_vfs.dl_open = art_dl_open;
	art_vfs.dl_error = art_dl_error;
	art_vfs.dl_sym = art_dl_sym;
	art_vfs.dl_close = art_dl_close;
	art_vfs.randomness = art_randomness;
	art_vfs.sleep = art_sleep;
	art_vfs.current_time = art_current_time;
	art_vfs.get_last_error = art_get_last_error;
	art_vfs.current_time_int64 = art_current_time_int64;
	art_vfs.set_system_call = art_set_system_call;
	art_vfs.get_system_call = art_get_system_call;
	art_vfs.next_system_call = art_next_system_call;
	return sqlite3_vfs_register(&art_vfs, 0);
}
