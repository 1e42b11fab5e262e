package journal

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/migrations"
	"github.com/mattn/go-sqlite3"
)

// A store file may come from anyone (a teammate's file, a remote, a
// branch an agent wrote), and SQLite runs whatever its schema says: a view
// or trigger in place of a table is code (an endless recursive CTE, a
// gigabyte zeroblob) that a plain SELECT executes. So every connection is
// opened hardened, and every store's schema must be, row for row, the
// schema art's own migrations make at some version before anything else is
// read from it:
//
//   - driverName's connect hook sets PRAGMA trusted_schema=OFF (no SQL
//     function with side effects from schema objects), cell_size_check=ON
//     (corrupt b-tree pages are found before they are used), and
//     SQLITE_LIMIT_LENGTH to maxValue: no single string or blob larger
//     than the largest object art stores ever crosses into Go, whatever
//     table it sits in.
//   - checkSchema compares sqlite_schema (type, name, table, SQL text)
//     with the schemas of versions 0..Latest, derived by applying
//     migrations to an in-memory database, so helpers who add a migration
//     extend the check without touching it. No view, trigger, virtual
//     table, extra index or altered column can pass. Deriving costs about
//     5 ms of every art process's start, so the comparison is by digest
//     (schemaDigest), against digests generated into schema_digests.go
//     from the same migration files and the same SQLite (schemaSource
//     says which); when those differ (a new migration not yet generated)
//     the digests are derived as before, and TestSchemaDigests fails
//     until `go test ./journal -run TestSchemaDigests -update` is run.

// walSizeLimit is what the WAL file is truncated to when it restarts.
const walSizeLimit = 64 << 20

// walCheckpointPages is the WAL size, in pages, past which a commit
// checkpoints (32 MiB of 4 KiB pages): well under walSizeLimit.
const walCheckpointPages = 8192

// driverName is the go-sqlite3 driver with the connect hook.
const driverName = "sqlite3_art"

// maxValue bounds any one column value read from a store: the largest
// stored object (a zstd frame a little larger than cas.MaxObjectSize) or
// cached pack index (64 MiB).
const maxValue = cas.MaxObjectSize + 2<<20

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: hardenConn})
}

func hardenConn(c *sqlite3.SQLiteConn) error {
	c.SetLimit(sqlite3.SQLITE_LIMIT_LENGTH, maxValue)
	// journal_size_limit: a WAL that one big transaction grew (a new
	// 4 GiB file is 4.5 GB of WAL) is cut back to walSizeLimit when it
	// restarts after a checkpoint, instead of occupying its high-water
	// mark on disk until the last connection closes.
	//
	// wal_autocheckpoint: the committing connection copies the WAL into
	// the database and fsyncs both whenever the WAL passes this many
	// pages. SQLite's 1,000 (4 MiB) made an ingest of Go's src/ (58 MB)
	// checkpoint 25 times, its writer waiting on 55 fsyncs (0.45 s of
	// 1.3 s); at walCheckpointPages, 16 fsyncs. Durability is the same:
	// a commit is durable by the WAL alone (and its fsync at commit with
	// synchronous=FULL), whenever the checkpoint runs.
	if _, err := c.Exec(fmt.Sprintf(`PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON; PRAGMA journal_size_limit = %d; PRAGMA wal_autocheckpoint = %d`,
		walSizeLimit, walCheckpointPages), nil); err != nil {
		return fmt.Errorf("harden connection: %w", err)
	}
	return nil
}

// Damaged reports whether err is SQLite refusing the file itself: a page
// that is not what it should be (SQLITE_CORRUPT), a file that is not a
// database (SQLITE_NOTADB), or a value over maxValue (SQLITE_TOOBIG). The
// CLI reports these as a damaged store, like ErrCorrupt.
func Damaged(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrTooBig
	}
	return false
}

// IsReadOnly reports a write refused because the store is read-only to
// this process: ErrReadOnly, or SQLite refusing a write (SQLITE_READONLY).
func IsReadOnly(err error) bool { return errors.Is(err, ErrReadOnly) || readOnlyRefused(err) }

// DiskFull reports whether err is the file system being full: SQLite's
// SQLITE_FULL, or any layer's ENOSPC (a pack write, SQLite growing its
// WAL or shared-memory index).
func DiskFull(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrFull || se.SystemErrno == syscall.ENOSPC) {
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}

// SQLite's errors are classed here, where the store meets SQLite: a
// damaged file is Corrupt, a read-only one Permission, a full disk
// Unavailable - what the CLI has always told the user.
func init() { errclass.Register(sqliteClass) }

// sqliteClass is the class of one SQLite error (not of what wraps it).
func sqliteClass(err error) errclass.Class {
	se, ok := err.(sqlite3.Error)
	switch {
	case !ok:
		return errclass.Failure
	case Damaged(se):
		return errclass.Corrupt
	case readOnlyRefused(se):
		return errclass.Permission
	case DiskFull(se):
		return errclass.Unavailable
	}
	return errclass.Failure
}

// readOnlyRefused reports SQLite refusing a write on a read-only
// connection.
func readOnlyRefused(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrReadonly
}

// schemaRow is one row of sqlite_schema.
type schemaRow struct {
	typ, name, table, sql string
}

func (r schemaRow) String() string { return r.typ + " " + r.name }

// knownSchemas holds the schema of every version 0..Latest (index =
// version), sorted.
var knownSchemas = sync.OnceValues(func() ([][]schemaRow, error) {
	ctx := context.Background()
	db, err := sql.Open(driverName, "file::memory:?_txlock=immediate")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // each connection to :memory: is its own database
	out := [][]schemaRow{nil}
	for v := 1; v <= migrations.Latest(); v++ {
		if _, _, err := migrations.ApplyTo(ctx, db, v, time.Now); err != nil {
			return nil, fmt.Errorf("derive schema %d: %w", v, err)
		}
		rows, err := readSchema(ctx, db)
		if err != nil {
			return nil, err
		}
		out = append(out, rows)
	}
	return out, nil
})

// readSchema lists sqlite_schema, sorted. Reading it runs no code of the
// store's: it is SQLite's own table.
func readSchema(ctx context.Context, db *sql.DB) ([]schemaRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schemaRow
	for rows.Next() {
		var r schemaRow
		if err := rows.Scan(&r.typ, &r.name, &r.table, &r.sql); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].typ != out[j].typ {
			return out[i].typ < out[j].typ
		}
		return out[i].name < out[j].name
	})
	return out, nil
}

// checkSchema returns the version whose schema db has exactly. A store
// whose schema_migrations table is art's and records a version newer than
// this binary knows wraps migrations.ErrTooNew; any other schema wraps
// ErrCorrupt, naming the first difference from the closest version.
func checkSchema(ctx context.Context, db *sql.DB) (int, error) {
	have, err := readSchema(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("read schema: %w", err)
	}
	digests, err := knownDigests()
	if err != nil {
		return 0, err
	}
	d := schemaDigest(have)
	for v, want := range digests {
		if d == want {
			return v, nil
		}
	}
	// Not a schema art makes: say why, from the schemas themselves.
	known, err := knownSchemas()
	if err != nil {
		return 0, err
	}
	for v, want := range known {
		if equalSchema(have, want) {
			return v, nil
		}
	}
	// A newer art's store: its schema_migrations is still art's table (it
	// is never changed), so its version can be read without running
	// anything the store defines.
	latest := known[len(known)-1]
	for _, r := range have {
		if r.name != "schema_migrations" {
			continue
		}
		for _, w := range latest {
			if w == r {
				var v sql.NullInt64
				if err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err == nil && int(v.Int64) > len(known)-1 {
					return 0, fmt.Errorf("%w: store is at version %d, this binary knows up to %d; upgrade art",
						migrations.ErrTooNew, v.Int64, len(known)-1)
				}
			}
		}
	}
	return 0, fmt.Errorf("%w: the schema is not one art makes (%s)", ErrCorrupt, schemaDiff(have, latest))
}

// schemaDigest is a SHA-256 of rows (in readSchema's order), each field
// length-prefixed: two schemas have one digest only if they are equal
// row for row.
func schemaDigest(rows []schemaRow) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, r := range rows {
		for _, f := range []string{r.typ, r.name, r.table, r.sql} {
			binary.BigEndian.PutUint64(n[:], uint64(len(f)))
			h.Write(n[:])
			h.Write([]byte(f))
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// schemaSource is a digest of what the schemas derive from: SQLite's
// version and every migration file.
func schemaSource() string {
	h := sha256.New()
	lib, _, src := sqlite3.Version()
	fmt.Fprintf(h, "%s\x00%s\x00", lib, src)
	for _, m := range migrations.All() {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00%s", m.Version, m.Name, len(m.SQL), m.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// knownDigests holds schemaDigest of every version 0..Latest (index =
// version): generatedDigests when they were generated from these
// migrations and this SQLite, else derived from knownSchemas.
var knownDigests = sync.OnceValues(func() ([][32]byte, error) {
	if schemaSource() == generatedSource && len(generatedDigests) == migrations.Latest()+1 {
		out := make([][32]byte, len(generatedDigests))
		for v, s := range generatedDigests {
			if _, err := hex.Decode(out[v][:], []byte(s)); err != nil || len(s) != 64 {
				return nil, fmt.Errorf("schema digest %d: %q is not one", v, s)
			}
		}
		return out, nil
	}
	return derivedDigests()
})

// derivedDigests computes the digests from the schemas themselves.
func derivedDigests() ([][32]byte, error) {
	known, err := knownSchemas()
	if err != nil {
		return nil, err
	}
	out := make([][32]byte, len(known))
	for v, rows := range known {
		out[v] = schemaDigest(rows)
	}
	return out, nil
}

func equalSchema(a, b []schemaRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// schemaDiff names the first thing in have that art's schema want lacks
// or has differently, else the first thing missing.
func schemaDiff(have, want []schemaRow) string {
	byName := map[string]schemaRow{}
	for _, w := range want {
		byName[w.name] = w
	}
	for _, h := range have {
		w, ok := byName[h.name]
		switch {
		case !ok:
			return fmt.Sprintf("unexpected %s", h)
		case w.typ != h.typ:
			return fmt.Sprintf("%s is a %s, want a %s", h.name, h.typ, w.typ)
		case w != h:
			return fmt.Sprintf("%s differs: %s", h, oneLine(h.sql))
		}
		delete(byName, h.name)
	}
	for _, w := range want {
		if _, ok := byName[w.name]; ok {
			return fmt.Sprintf("no %s", w)
		}
	}
	return "unknown difference"
}

// oneLine shortens SQL text for an error message.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}
