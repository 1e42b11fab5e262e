// A VFS over SQLite's default one that writes a WAL frame's header and
// page in one write. See walvfs.go for why and for the rules that keep a
// commit as durable as it was.
#include <stdlib.h>
#include <string.h>
#include "walvfs.h"

// A frame's header: 24 bytes, then the page. Bytes 4-7 (big-endian) are
// the database's size in pages after a commit on a transaction's last
// frame, and zero on every other frame.
#define FRAME_HEADER 24
// The largest page SQLite has (64 KiB), after its header: one write of
// both stays under the 0x1ffff bytes the unix VFS writes at most a call
// (it masks the size; a bigger write would come back short and fail as
// SQLITE_FULL).
#define BUF_CAP (FRAME_HEADER + 65536)

typedef struct wal_file {
	wv_file base;
	wv_file *real; // the default VFS's file, in the same allocation
	unsigned char *buf; // a held frame header, then room for its page (BUF_CAP; NULL until needed)
	wv_i64 off; // file offset of buf[0]
	int len; // bytes in buf: 0, or FRAME_HEADER while a header waits for its page
} wal_file;

// The real file sits after wal_file, at an offset aligned to 16 bytes.
#define REAL_OFFSET ((sizeof(wal_file) + 15) & ~(size_t)15)

static wv_vfs art_vfs;
static wv_vfs *real_vfs;

// Counters for tests and measurement: writes SQLite made to WAL files,
// writes this VFS made for them, and frames written whole (header and
// page in one write).
static wv_i64 n_writes, n_real_writes, n_frames;

static void count(wv_i64 *c) { __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }

void wv_stats(wv_i64 out[3]) {
	out[0] = __atomic_load_n(&n_writes, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&n_real_writes, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&n_frames, __ATOMIC_RELAXED);
}

// flush writes a held header alone, as SQLite asked. It is dropped on
// failure too, and the failure is the caller's.
static int flush(wal_file *w) {
	if (w->len == 0) {
		return WV_OK;
	}
	count(&n_real_writes);
	int rc = w->real->methods->write(w->real, w->buf, w->len, w->off);
	w->len = 0;
	return rc;
}

static int is_commit_header(const void *p) {
	const unsigned char *b = p;
	return (b[4] | b[5] | b[6] | b[7]) != 0;
}

// wal_write gathers a frame: SQLite writes a frame's header and then, in
// the same step (walWriteOneFrame), its page right after it. The header
// waits for that write and both go in one. Nothing is held past the
// frame, so every byte SQLite wrote is in the file before it takes its
// next step - publishing frames, ending its transaction, releasing the
// WAL's write lock (another process may write the WAL then: bytes held
// past it could land over its frames) - and a failed write fails the
// frame's own write, as with SQLite's VFS. A commit frame's header is
// written as it comes: SQLite rewrites it alone (walRewriteChecksums) and
// then publishes the commit, with no page after it to end the wait.
static int wal_write(wv_file *f, const void *p, int n, wv_i64 off) {
	wal_file *w = (wal_file *)f;
	count(&n_writes);
	if (w->len > 0 && off == w->off + w->len && n <= BUF_CAP - w->len) {
		memcpy(w->buf + w->len, p, n);
		count(&n_frames);
		count(&n_real_writes);
		int rc = w->real->methods->write(w->real, w->buf, w->len + n, w->off);
		w->len = 0;
		return rc;
	}
	int rc = flush(w);
	if (rc != WV_OK) {
		return rc;
	}
	if (n == FRAME_HEADER && !is_commit_header(p)) {
		if (w->buf == NULL) {
			w->buf = malloc(BUF_CAP);
		}
		if (w->buf != NULL) {
			memcpy(w->buf, p, n);
			w->off = off;
			w->len = n;
			return WV_OK;
		}
	}
	count(&n_real_writes);
	return w->real->methods->write(w->real, p, n, off);
}

static int wal_close(wv_file *f) {
	wal_file *w = (wal_file *)f;
	int rc = flush(w);
	int rc2 = w->real->methods->close(w->real);
	free(w->buf);
	w->buf = NULL;
	return rc != WV_OK ? rc : rc2;
}

// Every other call sees the file as written so far: held bytes first.
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

// art_open opens a WAL file wrapped; any other file is the default VFS's
// own, opened in place (its methods, untouched).
static int art_open(wv_vfs *v, const char *name, wv_file *f, int flags, int *out) {
	(void)v;
	if ((flags & WV_OPEN_WAL) == 0) {
		return real_vfs->open(real_vfs, name, f, flags, out);
	}
	wal_file *w = (wal_file *)f;
	memset(w, 0, sizeof *w);
	w->real = (wv_file *)((char *)f + REAL_OFFSET);
	w->real->methods = NULL;
	int rc = real_vfs->open(real_vfs, name, w->real, flags, out);
	if (rc != WV_OK) {
		// SQLite closes a file whose methods are set even when its open
		// failed; ours are not set, so close the real one here.
		if (w->real->methods != NULL) {
			w->real->methods->close(w->real);
		}
		w->base.methods = NULL;
		return rc;
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
	art_vfs.file_size = (int)(REAL_OFFSET + (size_t)real_vfs->file_size);
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
