// The parts of SQLite's VFS interface walvfs.c uses, declared from the
// interface's documentation (https://sqlite.org/c3ref/vfs.html,
// https://sqlite.org/c3ref/io_methods.html): the struct layouts are
// SQLite's stable ABI. Declared here, not included, so that art builds with
// no SQLite headers installed; the functions are go-sqlite3's, resolved at
// link time.
#ifndef ART_WALVFS_H
#define ART_WALVFS_H

typedef long long wv_i64;
typedef struct wv_file wv_file;
typedef struct wv_methods wv_methods;
typedef struct wv_vfs wv_vfs;

// sqlite3_file
struct wv_file {
	const wv_methods *methods;
};

// sqlite3_io_methods, version 3
struct wv_methods {
	int version;
	int (*close)(wv_file *);
	int (*read)(wv_file *, void *, int, wv_i64);
	int (*write)(wv_file *, const void *, int, wv_i64);
	int (*truncate)(wv_file *, wv_i64);
	int (*sync)(wv_file *, int);
	int (*file_size)(wv_file *, wv_i64 *);
	int (*lock)(wv_file *, int);
	int (*unlock)(wv_file *, int);
	int (*check_reserved_lock)(wv_file *, int *);
	int (*file_control)(wv_file *, int, void *);
	int (*sector_size)(wv_file *);
	int (*device_characteristics)(wv_file *);
	int (*shm_map)(wv_file *, int, int, int, void volatile **);
	int (*shm_lock)(wv_file *, int, int, int);
	void (*shm_barrier)(wv_file *);
	int (*shm_unmap)(wv_file *, int);
	int (*fetch)(wv_file *, wv_i64, int, void **);
	int (*unfetch)(wv_file *, wv_i64, void *);
};

typedef void (*wv_syscall_ptr)(void);

// sqlite3_vfs, version 3
struct wv_vfs {
	int version;
	int file_size; // szOsFile
	int max_pathname;
	wv_vfs *next;
	const char *name;
	void *app_data;
	int (*open)(wv_vfs *, const char *, wv_file *, int, int *);
	int (*delete_)(wv_vfs *, const char *, int);
	int (*access)(wv_vfs *, const char *, int, int *);
	int (*full_pathname)(wv_vfs *, const char *, int, char *);
	void *(*dl_open)(wv_vfs *, const char *);
	void (*dl_error)(wv_vfs *, int, char *);
	void (*(*dl_sym)(wv_vfs *, void *, const char *))(void);
	void (*dl_close)(wv_vfs *, void *);
	int (*randomness)(wv_vfs *, int, char *);
	int (*sleep)(wv_vfs *, int);
	int (*current_time)(wv_vfs *, double *);
	int (*get_last_error)(wv_vfs *, int, char *);
	int (*current_time_int64)(wv_vfs *, wv_i64 *);
	int (*set_system_call)(wv_vfs *, const char *, wv_syscall_ptr);
	wv_syscall_ptr (*get_system_call)(wv_vfs *, const char *);
	const char *(*next_system_call)(wv_vfs *, const char *);
};

// go-sqlite3's (the amalgamation's) exported functions.
wv_vfs *sqlite3_vfs_find(const char *name);
int sqlite3_vfs_register(wv_vfs *vfs, int make_default);
const char *sqlite3_filename_database(const char *name);

#define WV_OK 0
#define WV_ERROR 1
#define WV_IOERR_WRITE 778 // SQLITE_IOERR_WRITE
#define WV_OPEN_MAIN_DB 0x00000100 // SQLITE_OPEN_MAIN_DB
#define WV_OPEN_WAL 0x00080000 // SQLITE_OPEN_WAL
#define WV_SHM_UNLOCK 1 // SQLITE_SHM_UNLOCK
#define WV_SHM_LOCK 2 // SQLITE_SHM_LOCK
#define WV_SHM_EXCLUSIVE 8 // SQLITE_SHM_EXCLUSIVE
#define WV_IOCAP_POWERSAFE_OVERWRITE 0x00001000 // SQLITE_IOCAP_POWERSAFE_OVERWRITE

// What walvfs.c offers Go.
int wv_register(const char *name);
void wv_stats(wv_i64 out[5]);
void wv_fail_run(int n);

#endif
