package journal

import (
	"context"
	"fmt"
	"os"

	"github.com/artrt/art/cas"
)

// Usage is what a store occupies, for art status: the files on disk and
// the bytes of each kind of row in them. Row bytes count the stored
// columns (what the rows hold, compressed where they are); the rest of
// the file is SQLite's indexes, page headers and free pages.
type Usage struct {
	FileBytes int64 `json:"file_bytes"` // the database file
	WALBytes  int64 `json:"wal_bytes"`  // its write-ahead log (cut back after checkpoints)
	FreeBytes int64 `json:"free_bytes"` // free pages inside the file (a VACUUM would give them back)
	// PacksBytes is the disk space of the pack directory (STORE.packs):
	// the stored bytes of large chunks, plus any not yet given back by gc.
	PacksBytes int64 `json:"packs_bytes"`

	Chunks    KindUsage `json:"chunks"`    // file content
	Manifests KindUsage `json:"manifests"` // files' chunk lists
	Trees     KindUsage `json:"trees"`     // directories of snapshots and states

	Events      RowUsage `json:"events"`       // the journal
	Snapshots   int64    `json:"snapshots"`    // rows of the snapshots table
	Ops         int64    `json:"ops"`          // rows of the ops table
	Projection  RowUsage `json:"projection"`   // nodes, dentries and link groups of every branch
	ImportCache RowUsage `json:"import_cache"` // what captures recorded of the host
}

// KindUsage is the objects of one kind.
type KindUsage struct {
	Count  int64 `json:"count"`
	Stored int64 `json:"stored_bytes"` // as stored (compressed where it pays)
	Size   int64 `json:"size_bytes"`   // uncompressed
}

// RowUsage is the rows of one or more tables and the bytes of their
// columns.
type RowUsage struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

// Usage measures the store. It reads every row's length (not the
// values: SQLite keeps a blob's length in its row header), so it costs a
// scan of each table, without a write lock.
func (db *DB) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	if fi, err := os.Stat(db.path); err == nil {
		u.FileBytes = fi.Size()
	}
	if fi, err := os.Stat(db.path + "-wal"); err == nil {
		u.WALBytes = fi.Size()
	}
	u.PacksBytes = packsAllocated(db.path)
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return u, fmt.Errorf("measure store: %w", err)
	}
	defer tx.Rollback() // read-only
	var pageSize, free int64
	if err := tx.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return u, fmt.Errorf("measure store: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return u, fmt.Errorf("measure store: %w", err)
	}
	u.FreeBytes = pageSize * free
	rows, err := tx.QueryContext(ctx, `SELECT kind, count(*), coalesce(sum(length(data) + pack_len), 0), coalesce(sum(size), 0) FROM objects GROUP BY kind`)
	if err != nil {
		return u, fmt.Errorf("measure objects: %w", err)
	}
	for rows.Next() {
		var kind int64
		var k KindUsage
		if err := rows.Scan(&kind, &k.Count, &k.Stored, &k.Size); err != nil {
			rows.Close()
			return u, fmt.Errorf("measure objects: %w", err)
		}
		switch cas.Kind(kind) {
		case cas.KindChunk:
			u.Chunks = k
		case cas.KindManifest:
			u.Manifests = k
		case cas.KindTree:
			u.Trees = k
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return u, fmt.Errorf("measure objects: %w", err)
	}
	one := func(q string, dest ...any) error {
		if err := tx.QueryRowContext(ctx, q).Scan(dest...); err != nil {
			return fmt.Errorf("measure store: %w", err)
		}
		return nil
	}
	// Column bytes: blobs and text by length, integers as 8 (an upper
	// bound of SQLite's varint records, good enough for a split).
	if err := one(`SELECT count(*), coalesce(sum(coalesce(length(path), 0) + coalesce(length(root), 0) + length(payload) + length(prev) + length(hash) + 48), 0) FROM events`,
		&u.Events.Rows, &u.Events.Bytes); err != nil {
		return u, err
	}
	if err := one(`SELECT count(*) FROM snapshots`, &u.Snapshots); err != nil {
		return u, err
	}
	if err := one(`SELECT count(*) FROM ops`, &u.Ops); err != nil {
		return u, err
	}
	for _, q := range []string{
		`SELECT count(*), coalesce(sum(coalesce(length(target), 0) + coalesce(length(xattrs), 0) + 88), 0) FROM nodes`,
		`SELECT count(*), coalesce(sum(length(name) + 24), 0) FROM dentries`,
		`SELECT count(*), coalesce(sum(16), 0) FROM link_groups`,
	} {
		var r RowUsage
		if err := one(q, &r.Rows, &r.Bytes); err != nil {
			return u, err
		}
		u.Projection.Rows += r.Rows
		u.Projection.Bytes += r.Bytes
	}
	if err := one(`SELECT count(*), coalesce(sum(length(path) + length(manifest) + 56), 0) FROM import_cache`,
		&u.ImportCache.Rows, &u.ImportCache.Bytes); err != nil {
		return u, err
	}
	return u, nil
}
