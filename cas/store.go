package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/artrt/art/internal/procs"
	"github.com/klauspost/compress/zstd"
)

// Kind is an object's type. The numbers are stored in the objects table and
// never change meaning.
type Kind uint8

const (
	KindChunk    Kind = 1 // raw file bytes
	KindManifest Kind = 2 // a file's extents, see Manifest
	KindTree     Kind = 3 // a directory, see Tree
)

func (k Kind) String() string {
	switch k {
	case KindChunk:
		return "chunk"
	case KindManifest:
		return "manifest"
	case KindTree:
		return "tree"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MaxObjectSize bounds the uncompressed size of manifests and trees (chunks
// are bounded by MaxChunk). Get refuses to inflate anything larger.
const MaxObjectSize = 64 << 20

// maxStored is the most stored bytes an object of kind k may have: its
// size limit plus what a zstd frame can add to incompressible data
// (art itself stores a frame only when it is smaller). Rows with more are
// refused before their data is read, so a huge blob in a foreign store
// costs nothing.
func (k Kind) maxStored() int64 {
	m := k.maxSize()
	return m + m/128 + 1024
}

// maxSize is the largest uncompressed object of kind k, 0 for an unknown kind.
func (k Kind) maxSize() int64 {
	switch k {
	case KindChunk:
		return MaxChunk
	case KindManifest, KindTree:
		return MaxObjectSize
	}
	return 0
}

// ObjectsSchema creates the objects table. Package migrations runs it as
// part of the store schema; tests run it directly.
//
// pack, pack_off and pack_len place an object's stored bytes in a pack
// file (see Packs) when pack is not 0; data is then empty.
const ObjectsSchema = `CREATE TABLE objects (id BLOB NOT NULL, kind INTEGER NOT NULL, codec INTEGER NOT NULL, size INTEGER NOT NULL, data BLOB NOT NULL,
	pack INTEGER NOT NULL DEFAULT 0, pack_off INTEGER NOT NULL DEFAULT 0, pack_len INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX objects_by_id ON objects(id);`

// Values of the codec column.
const (
	codecRaw  = 0
	codecZstd = 1
)

// minCompress is the smallest object worth trying to compress: below it a
// zstd frame's overhead eats any saving.
const minCompress = 64

// DBTX is the part of *sql.DB, *sql.Conn and *sql.Tx a Store uses.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Store reads and writes objects in the objects table of one database
// handle. It is safe for concurrent use as far as its handle is (a *sql.DB
// is; a *sql.Tx serializes its statements). Store holds no transaction of its
// own: callers choose boundaries by passing a *sql.Tx to With.
type Store struct {
	db    DBTX
	c     *codecs
	packs *Packs // nil: every object inline
}

// NewStore returns a Store on db that keeps every object inline.
func NewStore(db DBTX) *Store {
	return &Store{db: db, c: sharedCodecs()}
}

// NewPackedStore returns a Store on db that appends the stored bytes of
// large chunks to packs (see Packs) and reads packed objects from there.
// The caller must call packs.Sync before committing any transaction
// through which the Store wrote.
func NewPackedStore(db DBTX, packs *Packs) *Store {
	return &Store{db: db, c: sharedCodecs(), packs: packs}
}

// With returns a Store that shares s's codecs and packs and works on db,
// typically a transaction. It allocates one small struct.
func (s *Store) With(db DBTX) *Store {
	return &Store{db: db, c: s.c, packs: s.packs}
}

// Packs returns the pack directory s writes to and reads from, or nil.
func (s *Store) Packs() *Packs { return s.packs }

// packFrom is the offset in a file from which PutFile packs its chunks:
// the content of small files stays inline (one row, no file, no extra
// fdatasync at commit), large content goes to a pack.
const packFrom = 1 << 20

// minPackStored is the smallest stored form that goes to a pack even
// where packing is asked for: a chunk that compressed to almost nothing (a
// run of zeros) is cheaper as a row than as a file read.
const minPackStored = 4 << 10

// minPackRaw is the smallest chunk, in stored bytes, that a received
// object (PutRaw, PutChecked) is packed at.
const minPackRaw = 16 << 10

// zstdLevel is the encoder level; see docs/store-format.md for the
// measurement behind it.
const zstdLevel = zstd.SpeedFastest

// codecs are the zstd encoder and decoder every Store shares. Their
// EncodeAll and DecodeAll are safe for concurrent use.
type codecs struct {
	enc  *zstd.Encoder
	dec  *zstd.Decoder
	bufs sync.Pool // *[]byte with capacity compressBufSize
}

// compressBufSize holds the zstd frame of any chunk that is worth storing
// compressed (smaller than the chunk).
const compressBufSize = MaxChunk

var sharedCodecs = sync.OnceValue(func() *codecs { return newCodecs(zstdLevel) })

func newCodecs(level zstd.EncoderLevel) *codecs {
	n := procs.Workers()
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(n),
		zstd.WithEncoderCRC(false), // objects are verified by their BLAKE3 id
	)
	if err != nil {
		panic(fmt.Sprintf("cas: zstd encoder: %v", err))
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(n),
		zstd.WithDecoderMaxMemory(MaxObjectSize),
		zstd.WithDecoderMaxWindow(MaxObjectSize),
		zstd.WithDecodeAllCapLimit(true), // never inflate past cap(dst), the stored size
	)
	if err != nil {
		panic(fmt.Sprintf("cas: zstd decoder: %v", err))
	}
	c := &codecs{enc: enc, dec: dec}
	c.bufs.New = func() any {
		b := make([]byte, 0, compressBufSize)
		return &b
	}
	return c
}

// compress returns the bytes to store for data and their codec: a zstd frame
// if it is at least 5% smaller than data, else data itself. The frame may
// live in *buf, which must not be reused until the result is no longer
// needed.
func (c *codecs) compress(data []byte, buf *[]byte) (int, []byte) {
	if len(data) < minCompress {
		return codecRaw, data
	}
	// Room for zstd's output of incompressible data too (its raw blocks
	// and headers are a little longer than data), or EncodeAll grows dst
	// at every such chunk: a tenth of a 2 GiB random file's probes.
	room := len(data) + len(data)>>7 + 64
	dst := (*buf)[:0]
	if cap(dst) < room {
		dst = make([]byte, 0, room)
	}
	z := c.enc.EncodeAll(data, dst)
	if cap(z) <= cap(*buf) {
		*buf = z[:0]
	}
	// Saving at least 5%: len(data) - len(z) >= len(data)/20.
	if 20*(len(data)-len(z)) >= len(data) {
		return codecZstd, z
	}
	return codecRaw, data
}

// decode turns a stored row into the verified canonical bytes of id.
func (c *codecs) decode(id ID, kind Kind, codec, size int64, stored []byte) ([]byte, error) {
	return c.decodeOwned(id, kind, codec, size, stored, false)
}

// decodeOwned is decode; with owned, stored is the caller's to give away,
// and raw content is returned without a copy.
func (c *codecs) decodeOwned(id ID, kind Kind, codec, size int64, stored []byte, owned bool) ([]byte, error) {
	limit := kind.maxSize()
	if limit == 0 {
		return nil, corrupt(id, "unknown kind %d", kind)
	}
	if size < 0 || size > limit {
		return nil, corrupt(id, "%s claims %d bytes, limit %d", kind, size, limit)
	}
	var out []byte
	switch codec {
	case codecRaw:
		if int64(len(stored)) != size {
			return nil, corrupt(id, "stored %d raw bytes, size says %d", len(stored), size)
		}
		if owned {
			out = stored
		} else {
			out = make([]byte, len(stored))
			copy(out, stored)
		}
	case codecZstd:
		var h zstd.Header
		if err := h.Decode(stored); err != nil {
			return nil, corrupt(id, "zstd header: %v", err)
		}
		if h.HasFCS && h.FrameContentSize != uint64(size) {
			return nil, corrupt(id, "zstd frame holds %d bytes, size says %d", h.FrameContentSize, size)
		}
		// The capacity bounds the output (WithDecodeAllCapLimit): a frame
		// that inflates past size fails after at most one more block.
		var err error
		out, err = c.dec.DecodeAll(stored, make([]byte, 0, size))
		if err != nil {
			return nil, corrupt(id, "zstd: %v", err)
		}
		if int64(len(out)) != size {
			return nil, corrupt(id, "inflated to %d bytes, size says %d", len(out), size)
		}
	default:
		return nil, corrupt(id, "unknown codec %d", codec)
	}
	if Sum(out) != id {
		return nil, corrupt(id, "content hashes to %s", Sum(out))
	}
	return out, nil
}

// Put stores data as an object of kind k unless an object with its id is
// already present; existence is checked before compressing, so storing
// known content costs one hash and one index lookup. It returns the id and
// the number of bytes it added to the data column (0 when the object was
// already there, including when another writer inserted it concurrently).
// Put is idempotent. data is not retained.
func (s *Store) Put(ctx context.Context, k Kind, data []byte) (ID, int64, error) {
	limit := k.maxSize()
	if limit == 0 {
		return ID{}, 0, fmt.Errorf("put object: invalid kind %d", k)
	}
	if int64(len(data)) > limit {
		return ID{}, 0, fmt.Errorf("put %s of %d bytes: %w (limit %d)", k, len(data), ErrTooLarge, limit)
	}
	id := Sum(data)
	n, err := s.put(ctx, id, k, data)
	if err != nil {
		return ID{}, 0, fmt.Errorf("put %s %s: %w", k, id.Short(), err)
	}
	return id, n, nil
}

// put stores data, whose id the caller computed, if absent.
func (s *Store) put(ctx context.Context, id ID, k Kind, data []byte) (int64, error) {
	// The look-up spares compressing what is stored already; for a small
	// object (a one-chunk file's manifest, most trees) it costs more than
	// compressing, and INSERT OR IGNORE says whether the object was new.
	if len(data) > smallPut {
		if ok, err := s.has(ctx, id); err != nil || ok {
			return 0, err
		}
	}
	return s.insert(ctx, id, k, data, false)
}

// smallPut is the size up to which put inserts without looking up first.
const smallPut = 1 << 10

// insert compresses data and inserts it unless a row with id exists,
// its stored bytes in a pack when pack is set and s has packs. It returns
// the bytes stored: 0 if the row was there.
func (s *Store) insert(ctx context.Context, id ID, k Kind, data []byte, pack bool) (int64, error) {
	buf := s.c.bufs.Get().(*[]byte)
	defer s.c.bufs.Put(buf)
	codec, stored := s.c.compress(data, buf)
	return s.insertStored(ctx, id, k, int64(codec), int64(len(data)), stored, pack)
}

// insertStored inserts an object's stored form unless a row with id
// exists. With pack (and packs) the bytes are appended to the pack first,
// so the row that names them can only commit after they are written; if
// the row turns out to exist, or the transaction rolls back, the appended
// bytes are garbage for gc.
func (s *Store) insertStored(ctx context.Context, id ID, k Kind, codec, size int64, stored []byte, pack bool) (int64, error) {
	if stored == nil {
		stored = []byte{} // the data column is NOT NULL
	}
	var res sql.Result
	var err error
	if pack && s.packs != nil && len(stored) >= minPackStored {
		num, off, aerr := s.packs.append(stored)
		if aerr != nil {
			return 0, aerr
		}
		_, n, err := s.insertPackedRows(ctx, k, []packedRow{{id: id, codec: codec, size: size, pack: num, off: off, n: int64(len(stored))}})
		return n, err
	} else {
		res, err = s.db.ExecContext(ctx, InsertObjectSQL, id[:], int64(k), codec, size, stored)
	}
	if err != nil {
		return 0, err
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if rows == 0 {
		return 0, nil
	}
	return int64(len(stored)), nil
}

// The statements that insert objects: an object stored in its row
// (InsertObjectSQL: id, kind, codec, size, stored bytes), and rows of
// objects whose stored bytes are in packs (InsertPackedSQL followed by one
// "(?, ?, ?, ?, x”, ?, ?, ?)" a row, comma-separated: id, kind, codec,
// size, pack, offset, stored length). journal's redo log knows them by
// these strings (it logs the objects a transaction inserts).
const (
	InsertObjectSQL = `INSERT OR IGNORE INTO objects (id, kind, codec, size, data) VALUES (?, ?, ?, ?, ?)`
	InsertPackedSQL = `INSERT OR IGNORE INTO objects (id, kind, codec, size, data, pack, pack_off, pack_len) VALUES `
)

// packedRow is the row of an object whose stored bytes are in a pack.
type packedRow struct {
	id                     ID
	codec, size, pack, off int64
	n                      int64 // stored length
}

// insertPackedRows inserts the rows of objects of kind k whose stored
// bytes were appended to packs, unless a row with the same id exists,
// insertBatch rows to a statement. It returns how many rows were new and
// their stored bytes (exact when all or none of a statement's rows were
// new; else the rows' count only). Bytes of rows that existed are
// garbage for gc.
func (s *Store) insertPackedRows(ctx context.Context, k Kind, rows []packedRow) (int, int64, error) {
	added, bytes := 0, int64(0)
	for len(rows) > 0 {
		batch := rows[:min(len(rows), insertBatch)]
		rows = rows[len(batch):]
		q := InsertPackedSQL +
			strings.Repeat(`(?, ?, ?, ?, x'', ?, ?, ?), `, len(batch)-1) + `(?, ?, ?, ?, x'', ?, ?, ?)`
		args := make([]any, 0, 7*len(batch))
		var n int64
		for _, r := range batch {
			args = append(args, r.id[:], int64(k), r.codec, r.size, r.pack, r.off, r.n)
			n += r.n
		}
		res, err := s.db.ExecContext(ctx, q, args...)
		if err != nil {
			return added, bytes, err
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return added, bytes, err
		}
		added += int(affected)
		if int(affected) == len(batch) {
			bytes += n
		}
	}
	return added, bytes, nil
}

// insertBatch is the rows of one multi-row INSERT (7 parameters each,
// well under SQLite's limit of 32,766).
const insertBatch = 128

// Has reports whether an object with id is stored. It does not verify it.
func (s *Store) Has(ctx context.Context, id ID) (bool, error) {
	ok, err := s.has(ctx, id)
	if err != nil {
		return false, fmt.Errorf("look up object %s: %w", id.Short(), err)
	}
	return ok, nil
}

// HasMany reports, for each of ids, whether an object with that id is
// stored. It does not verify them.
func (s *Store) HasMany(ctx context.Context, ids []ID) ([]bool, error) {
	ok, err := s.hasMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("look up %d objects: %w", len(ids), err)
	}
	return ok, nil
}

// StoredKinds returns, for each of ids, the kind column of the object's
// row, 0 when there is none. The column is only a hint (see getKind): a
// transfer uses it to tell a row stored as the kind a referrer expects,
// whose references were stored with it, from one whose bytes were first
// stored as another kind and whose references as this kind may be absent.
// One statement per lookupBatch ids: a push or pull asks it of every
// object on a changed path.
func (s *Store) StoredKinds(ctx context.Context, ids []ID) ([]Kind, error) {
	out := make([]Kind, len(ids))
	err := s.lookupMany(ctx, ids, true, func(at []int, kind int64) {
		for _, i := range at {
			out[i] = Kind(kind)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("look up %d objects: %w", len(ids), err)
	}
	return out, nil
}

// hasMany reports, for each of ids, whether an object with that id is
// stored: one statement per lookupBatch ids.
func (s *Store) hasMany(ctx context.Context, ids []ID) ([]bool, error) {
	out := make([]bool, len(ids))
	err := s.lookupMany(ctx, ids, false, func(at []int, _ int64) {
		for _, i := range at {
			out[i] = true
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lookupMany looks ids up, lookupBatch a statement, and calls found with
// the positions in ids of each id that has a row, and with withKind that
// row's kind column (without it only the index is read).
func (s *Store) lookupMany(ctx context.Context, ids []ID, withKind bool, found func(at []int, kind int64)) error {
	at := make(map[ID][]int, len(ids))
	for i, id := range ids {
		at[id] = append(at[id], i)
	}
	cols := `id, 0`
	if withKind {
		cols = `id, kind`
	}
	for start := 0; start < len(ids); start += lookupBatch {
		batch := ids[start:min(start+lookupBatch, len(ids))]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id[:]
		}
		rows, err := s.db.QueryContext(ctx, `SELECT `+cols+` FROM objects WHERE id IN (?`+strings.Repeat(`, ?`, len(batch)-1)+`)`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var b []byte
			var kind int64
			if err := rows.Scan(&b, &kind); err != nil {
				rows.Close()
				return err
			}
			var id ID
			if len(b) != len(id) {
				continue // not an id this store writes: no match
			}
			copy(id[:], b)
			found(at[id], kind)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

// lookupBatch is the ids hasMany looks up per statement.
const lookupBatch = 128

func (s *Store) has(ctx context.Context, id ID) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM objects WHERE id = ?`, id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Get returns the kind and the uncompressed bytes of object id, verified
// against id; the caller owns the returned slice. A missing object is an
// error wrapping ErrNotFound; a stored object that is wrong in any way (hash,
// size, codec, kind, or a frame inflating past its size or past the kind's
// limit) is a *CorruptError. Get never returns unverified bytes.
func (s *Store) Get(ctx context.Context, id ID) (Kind, []byte, error) {
	k, b, err := s.get(ctx, id)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return 0, nil, err // names the object already
		}
		return 0, nil, fmt.Errorf("get %s: %w", id, err)
	}
	return k, b, nil
}

func (s *Store) get(ctx context.Context, id ID) (Kind, []byte, error) {
	rows, err := s.db.QueryContext(ctx, selectBounded, id[:], KindChunk.maxStored(), KindTree.maxStored())
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, nil, err
		}
		return 0, nil, ErrNotFound
	}
	var kind, codec, size, length, pack, packOff, packLen int64
	var stored sql.RawBytes
	if err := rows.Scan(&kind, &codec, &size, &length, &stored, &pack, &packOff, &packLen); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			// Cancelled while reading: not damage. Reported as corruption,
			// a Ctrl-C would make art say the store is corrupt.
			return 0, nil, cerr
		}
		return 0, nil, corrupt(id, "row: %v", err)
	}
	if kind < 0 || kind > 255 {
		return 0, nil, corrupt(id, "unknown kind %d", kind)
	}
	if max := Kind(kind).maxStored(); length > max {
		return 0, nil, corrupt(id, "stored as %d bytes, limit %d", length, max)
	}
	if pack != 0 {
		// No statement stays open during the file read.
		if err := rows.Close(); err != nil {
			return 0, nil, err
		}
		if stored, err = s.readPacked(id, Kind(kind), length, pack, packOff, packLen); err != nil {
			return 0, nil, s.packedErr(ctx, id, pack, packOff, err)
		}
	}
	out, err := s.c.decode(id, Kind(kind), codec, size, stored)
	if err != nil {
		if pack != 0 {
			err = s.packedErr(ctx, id, pack, packOff, err)
		}
		return 0, nil, err
	}
	if err := rows.Close(); err != nil {
		return 0, nil, err
	}
	return Kind(kind), out, nil
}

// packedErr turns the failure to read or check a packed object into
// ErrNotFound when its row is gone by now: a gc that removed the object
// (unreachable, so nobody should be reading it) between our row read and
// our pack read punched or deleted its bytes. That is not damage. A row
// still in place keeps err (a *CorruptError). Inside a transaction the row
// is still visible and err stands.
func (s *Store) packedErr(ctx context.Context, id ID, pack, off int64, err error) error {
	var one int
	switch qerr := s.db.QueryRowContext(ctx, `SELECT 1 FROM objects WHERE id = ? AND pack = ? AND pack_off = ?`, id[:], pack, off).Scan(&one); {
	case errors.Is(qerr, sql.ErrNoRows):
		return ErrNotFound
	default:
		return err
	}
}

// readPacked reads the stored bytes of a packed object, bounded by its
// kind's limit and by the pack's size before anything is allocated: the
// row's numbers may be lies.
func (s *Store) readPacked(id ID, kind Kind, inline, pack, off, n int64) ([]byte, error) {
	if inline != 0 {
		return nil, corrupt(id, "packed object also has %d inline bytes", inline)
	}
	if max := kind.maxStored(); n > max || n <= 0 {
		return nil, corrupt(id, "packed as %d bytes, limit %d", n, max)
	}
	if s.packs == nil {
		return nil, corrupt(id, "stored in pack %d, but this store has no pack directory", pack)
	}
	b, err := s.packs.read(pack, off, n)
	if errors.Is(err, errPacksClosed) {
		return nil, err // the store was closed: nothing is wrong with the object
	}
	if err != nil {
		return nil, corrupt(id, "%v", err)
	}
	return b, nil
}

// selectBounded reads an object row, its data only when length(data)
// (which SQLite answers from the record header, without reading the blob)
// is within the kind's maxStored: ?2 for chunks, ?3 for other kinds.
const selectBounded = `SELECT kind, codec, size, length(data),
	CASE WHEN length(data) <= (CASE kind WHEN 1 THEN ?2 ELSE ?3 END) THEN data END,
	pack, pack_off, pack_len
	FROM objects WHERE id = ?1`

// eachBatch is how many rows Each reads before calling fn: no statement is
// open while fn runs, so fn may use the same handle (even a single
// connection) freely.
const eachBatch = 1024

// Each calls fn with the id and kind of every object in insertion (rowid)
// order, without reading or verifying the data; see Verify. It stops at
// fn's first error and returns it. Objects inserted while Each runs may or
// may not be visited.
func (s *Store) Each(ctx context.Context, fn func(id ID, k Kind) error) error {
	type row struct {
		id ID
		k  Kind
	}
	batch := make([]row, 0, eachBatch)
	var after int64 = -1 << 63
	for {
		batch = batch[:0]
		rows, err := s.db.QueryContext(ctx,
			`SELECT rowid, id, kind FROM objects WHERE rowid > ? ORDER BY rowid LIMIT ?`, after, eachBatch)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for rows.Next() {
			var rowid, kind int64
			var id sql.RawBytes
			if err := rows.Scan(&rowid, &id, &kind); err != nil {
				rows.Close()
				return fmt.Errorf("list objects: %w", err)
			}
			after = rowid
			var r row
			if len(id) != len(r.id) {
				rows.Close()
				return fmt.Errorf("list objects: row %d has a %d-byte id: %w", rowid, len(id), ErrCorrupt)
			}
			copy(r.id[:], id)
			if kind < 0 || kind > 255 {
				rows.Close()
				return corrupt(r.id, "unknown kind %d", kind)
			}
			r.k = Kind(kind)
			batch = append(batch, r)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, r := range batch {
			if err := fn(r.id, r.k); err != nil {
				return err
			}
		}
		if len(batch) < eachBatch {
			return nil
		}
	}
}

// Verify reads object id and checks it as Get does; manifests and trees
// must also decode. A problem with the object is a *CorruptError, a missing
// object wraps ErrNotFound.
func (s *Store) Verify(ctx context.Context, id ID) error {
	k, b, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	switch k {
	case KindManifest:
		_, err = DecodeManifest(b)
	case KindTree:
		_, err = DecodeTree(b)
	}
	if err != nil {
		return corrupt(id, "%v", err)
	}
	return nil
}

// getKind is Get for a reader that wants an object of kind want. The row's
// kind column is only a hint: an id names bytes, not a kind, so a chunk and
// a manifest (or tree) with the same bytes share one row, whose kind is
// that of whichever was stored first (inserts are INSERT OR IGNORE). The
// bytes Get returns are verified against id, so they are the object the
// caller wants whatever the column says; the caller interprets them as
// want (a manifest that does not decode is corrupt as ever).
func (s *Store) getKind(ctx context.Context, id ID, want Kind) ([]byte, error) {
	_, b, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > want.maxSize() {
		return nil, corrupt(id, "has %d bytes, a %s's limit is %d", len(b), want, want.maxSize())
	}
	return b, nil
}

// GetManifest returns the decoded manifest id. A missing object wraps
// ErrNotFound; an object that is not a valid manifest is a *CorruptError.
func (s *Store) GetManifest(ctx context.Context, id ID) (*Manifest, error) {
	b, err := s.getKind(ctx, id, KindManifest)
	if err != nil {
		return nil, err
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, corrupt(id, "%v", err)
	}
	return m, nil
}

// GetTree returns the decoded tree id. A missing object wraps ErrNotFound;
// an object that is not a valid tree is a *CorruptError.
func (s *Store) GetTree(ctx context.Context, id ID) (*Tree, error) {
	b, err := s.getKind(ctx, id, KindTree)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTree(b)
	if err != nil {
		return nil, corrupt(id, "%v", err)
	}
	return t, nil
}

// PutManifest validates, encodes and stores m (see Put). An invalid manifest
// is an error wrapping ErrMalformed.
func (s *Store) PutManifest(ctx context.Context, m *Manifest) (ID, int64, error) {
	if err := m.Validate(); err != nil {
		return ID{}, 0, fmt.Errorf("put manifest: %w", err)
	}
	return s.Put(ctx, KindManifest, m.Encode())
}

// PutTree validates, encodes and stores t (see Put). An invalid tree is an
// error wrapping ErrMalformed.
func (s *Store) PutTree(ctx context.Context, t *Tree) (ID, int64, error) {
	b, err := t.Encode()
	if err != nil {
		return ID{}, 0, fmt.Errorf("put tree: %w", err)
	}
	return s.Put(ctx, KindTree, b)
}

// StoredSize returns how many bytes object id occupies in the data column
// or its pack (compressed where it is), without reading them.
func (s *Store) StoredSize(ctx context.Context, id ID) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT length(data) + pack_len FROM objects WHERE id = ?`, id[:]).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("size of %s: %w", id.Short(), ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", id.Short(), err)
	}
	return n, nil
}
