package journal

// The redo log: how a Batch makes a close durable without a commit.
//
// A Batch shares one SQLite transaction among many updates and commits it
// every few milliseconds. A close of a file must survive a crash of the
// process (a file the agent wrote and closed never vanishes), and a
// commit per close costs npm ci about a tenth of its time (each commit
// writes the same dozen B-tree pages to the WAL). With LogCloses, a close
// instead appends one record to a log of the Batch's own: the rows of the
// two tables that hold the truth - the events the transaction appended
// and the objects it inserted - since the last record. Everything else it
// wrote (nodes, dentries, link groups, the branch's head) is derived from
// the events, as a materialization derives it (rev.go). The commit then
// comes when the Batch's timer or size says, and truncates the log.
//
// After a crash, whoever next holds the store's write lock applies the
// log (recoverRedo, from Open and gc): it inserts the objects and replays
// the events onto the branch, continuing its chain. The write lock makes
// that safe without trusting the log's file lock: a Batch appends records
// only inside its open transaction, which holds the write lock, so a log
// whose events are not committed, seen under the write lock, belongs to a
// transaction that is gone.
//
// A statement of an update that is neither of those rows nor a derived
// row makes the transaction unloggable: its closes commit, as before.
//
// The log is data like the store: a record is length-prefixed and
// CRC-checked (a torn last record, from a crash in its write, was never
// acknowledged and is dropped), sizes are bounded, every event is decoded
// as strictly as a stored one, and the chain the log claims is checked
// before anything is applied. docs/store-format.md, "The redo log".

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mattn/go-sqlite3"
	"golang.org/x/sys/unix"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

const (
	redoMagic     = "ARTREDO1"
	redoHeaderLen = len(redoMagic) + 8 + 16 // magic, branch id, the log's random id
	// maxRedoRecord bounds one record (the updates between two closes);
	// a bigger one is not written (the close commits instead) and not
	// read.
	maxRedoRecord = 256 << 20
	// maxRedoLog bounds what recovery reads of one log.
	maxRedoLog = 4 << 30
	// maxRedoLogs bounds how many logs one recovery looks at.
	maxRedoLogs = 4096
)

// Item tags of a record.
const (
	redoEvent  = 'E'
	redoObject = 'O' // stored in its row
	redoPacked = 'P' // stored in a pack
)

var redoCRC = crc32.MakeTable(crc32.Castagnoli)

// RedoDir is the directory of a store's redo logs (STORE.redo).
func RedoDir(path string) string { return path + ".redo" }

// derivedPrefixes start the statements of an update that write rows
// derived from the events (the projection): a replay of the events writes
// them again, so the log leaves them out.
var derivedPrefixes = []string{
	"INSERT INTO nodes ", "INSERT OR REPLACE INTO nodes ", "UPDATE nodes ", "DELETE FROM nodes ",
	"INSERT INTO dentries ", "INSERT OR IGNORE INTO dentries ", "UPDATE dentries ", "DELETE FROM dentries ",
	"INSERT INTO link_groups ", "DELETE FROM link_groups ",
}

// redoCapture gathers the loggable rows an open transaction writes, in
// the order it writes them. Safe for concurrent use (the object store
// inserts chunks from several goroutines).
type redoCapture struct {
	mu  sync.Mutex
	buf []byte // items since the last record
	// mark is len(buf) when the current update began: a failed update's
	// items go (rewind).
	mark int
	// unloggable names the first statement that could not be logged; the
	// transaction's closes then commit.
	unloggable string
}

// note records statement q with args, which succeeded.
func (c *redoCapture) note(q string, args []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unloggable != "" {
		return
	}
	var err error
	switch {
	case q == insertEventSQL:
		c.buf, err = appendEventItem(c.buf, args)
	case q == cas.InsertObjectSQL:
		c.buf, err = appendObjectItem(c.buf, args)
	case strings.HasPrefix(q, cas.InsertPackedSQL):
		c.buf, err = appendPackedItems(c.buf, args)
	default:
		for _, p := range derivedPrefixes {
			if strings.HasPrefix(q, p) {
				return
			}
		}
		err = errors.New("not a loggable statement")
	}
	if err != nil {
		c.unloggable = fmt.Sprintf("%.60s: %v", q, err)
	}
}

// refuse makes the transaction unloggable.
func (c *redoCapture) refuse(why string) {
	c.mu.Lock()
	if c.unloggable == "" {
		c.unloggable = why
	}
	c.mu.Unlock()
}

// begin marks the start of an update; rewind drops what it noted.
func (c *redoCapture) begin() {
	c.mu.Lock()
	c.mark = len(c.buf)
	c.mu.Unlock()
}

func (c *redoCapture) rewind() {
	c.mu.Lock()
	c.buf = c.buf[:c.mark]
	c.mu.Unlock()
}

// take returns the items noted since the last take, or ok false when the
// transaction cannot be logged. The caller holds the Batch: no update runs.
func (c *redoCapture) take() (items []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unloggable != "" || len(c.buf) > maxRedoRecord {
		return nil, false
	}
	items = c.buf
	c.buf, c.mark = c.buf[len(c.buf):], 0
	return items, true
}

func argInt(a any) (int64, error) {
	switch v := a.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	}
	return 0, fmt.Errorf("argument %T, want an integer", a)
}

func argBytes(a any, null bool) ([]byte, bool, error) {
	switch v := a.(type) {
	case []byte:
		return v, true, nil
	case nil:
		if null {
			return nil, false, nil
		}
	}
	return nil, false, fmt.Errorf("argument %T, want bytes", a)
}

func appendInts(b []byte, args []any) ([]byte, error) {
	for _, a := range args {
		v, err := argInt(a)
		if err != nil {
			return b, err
		}
		b = binary.AppendVarint(b, v)
	}
	return b, nil
}

func appendID32(b []byte, a any) ([]byte, error) {
	v, _, err := argBytes(a, false)
	if err == nil && len(v) != len(cas.ID{}) {
		err = fmt.Errorf("id of %d bytes", len(v))
	}
	return append(b, v...), err
}

func appendNullable(b []byte, a any) ([]byte, error) {
	v, ok, err := argBytes(a, true)
	if err != nil {
		return b, err
	}
	if !ok {
		return append(b, 0), nil
	}
	return appendBytes(append(b, 1), v), nil
}

// appendEventItem: seq, branch, op, kind, time_ns (varints), path and root
// (nullable), payload, prev and hash (32 bytes each).
func appendEventItem(b []byte, args []any) ([]byte, error) {
	if len(args) != 10 {
		return b, fmt.Errorf("%d arguments", len(args))
	}
	b = append(b, redoEvent)
	b, err := appendInts(b, args[:5])
	if err == nil {
		b, err = appendNullable(b, args[5])
	}
	if err == nil {
		b, err = appendNullable(b, args[6])
	}
	if err == nil {
		var v []byte
		v, _, err = argBytes(args[7], false)
		b = appendBytes(b, v)
	}
	if err == nil {
		b, err = appendID32(b, args[8])
	}
	if err == nil {
		b, err = appendID32(b, args[9])
	}
	return b, err
}

// appendObjectItem: id, kind, codec, size, stored bytes.
func appendObjectItem(b []byte, args []any) ([]byte, error) {
	if len(args) != 5 {
		return b, fmt.Errorf("%d arguments", len(args))
	}
	b = append(b, redoObject)
	b, err := appendID32(b, args[0])
	if err == nil {
		b, err = appendInts(b, args[1:4])
	}
	if err == nil {
		var v []byte
		v, _, err = argBytes(args[4], false)
		b = appendBytes(b, v)
	}
	return b, err
}

// appendPackedItems: for each row, id, kind, codec, size, pack, offset,
// stored length.
func appendPackedItems(b []byte, args []any) ([]byte, error) {
	if len(args) == 0 || len(args)%7 != 0 {
		return b, fmt.Errorf("%d arguments", len(args))
	}
	var err error
	for ; len(args) > 0 && err == nil; args = args[7:] {
		b = append(b, redoPacked)
		if b, err = appendID32(b, args[0]); err == nil {
			b, err = appendInts(b, args[1:7])
		}
	}
	return b, err
}

// redoLog is a Batch's log file, created at its first record and locked
// (flock) while the Batch lives, so that recovery leaves the file of a
// live writer in place.
type redoLog struct {
	f      *os.File
	path   string
	held   *atomic.Int32 // the DB's count of logs holding records (DB.redoHeld)
	size   int64         // header and whole records
	sync   bool          // fdatasync every record (DurabilityFull)
	broken bool          // a write or truncate failed: closes commit from now on
}

// createRedoLog creates a new log for branch in the store's redo
// directory. The directory is created if missing and must be a directory
// (not a link to one).
func createRedoLog(dbPath string, branch int64, syncEach bool, held *atomic.Int32) (*redoLog, error) {
	dir := RedoDir(dbPath)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("redo log: %w", err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("redo log: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var id [16]byte
	rand.Read(id[:])
	name := hex.EncodeToString(id[:]) + ".log"
	fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redo log: create: %w", err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, name))
	l := &redoLog{f: f, path: f.Name(), sync: syncEach, held: held}
	fail := func(err error) (*redoLog, error) {
		f.Close()
		unix.Unlinkat(dfd, name, 0)
		return nil, fmt.Errorf("redo log: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err)
	}
	h := make([]byte, 0, redoHeaderLen)
	h = append(h, redoMagic...)
	h = binary.LittleEndian.AppendUint64(h, uint64(branch))
	h = append(h, id[:]...)
	if _, err := f.WriteAt(h, 0); err != nil {
		return fail(err)
	}
	if syncEach {
		// The log's name must survive a power loss as its records will.
		if err := unix.Fsync(dfd); err != nil {
			return fail(err)
		}
	}
	l.size = int64(len(h))
	return l, nil
}

// append writes one record holding items at the log's end, in one write.
// A write that fails is cut off again; if that fails too, the log is
// broken (and the caller commits instead, from then on).
func (l *redoLog) append(items []byte) error {
	rec := make([]byte, 8, 8+len(items))
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(items)))
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(items, redoCRC))
	rec = append(rec, items...)
	_, err := l.f.WriteAt(rec, l.size)
	if err == nil && l.sync {
		err = unix.Fdatasync(int(l.f.Fd()))
	}
	if err != nil {
		if terr := l.f.Truncate(l.size); terr != nil {
			l.broken = true
		}
		return fmt.Errorf("redo log: %w", err)
	}
	if l.size == int64(redoHeaderLen) {
		l.held.Add(1)
	}
	l.size += int64(len(rec))
	return nil
}

// reset drops the records (their transaction committed).
func (l *redoLog) reset() {
	if l.size == int64(redoHeaderLen) {
		return
	}
	if err := l.f.Truncate(int64(redoHeaderLen)); err != nil {
		l.broken = true
		return
	}
	l.size = int64(redoHeaderLen)
	l.held.Add(-1)
}

// remove deletes the log (everything in it committed) and closes it.
func (l *redoLog) remove() {
	if l.size > int64(redoHeaderLen) {
		l.held.Add(-1)
	}
	os.Remove(l.path)
	l.f.Close()
	// The directory stays: another session's sandbox may hide it (a cover
	// on a path that went away and came back would not hide the new one).
}

// close closes the log and leaves it for recovery (it stays counted as
// held: this process must not trim what it names).
func (l *redoLog) close() { l.f.Close() }

// A parsed log.
type redoEventRow struct {
	seq, branch, op, kind, time int64
	path, root                  []byte
	hasPath, hasRoot            bool
	payload                     []byte
	prev, hash                  cas.ID
}

type redoObjectRow struct {
	id                cas.ID
	kind, codec, size int64
	data              []byte
	packed            bool
	pack, off, n      int64
}

type parsedRedo struct {
	branch  int64
	events  []redoEventRow
	objects []redoObjectRow
}

// parseRedo reads the log f of size bytes: its header, then its records.
// The last record may be torn (a crash in its write, never acknowledged:
// a live writer cuts a failed write off before the next): a record that
// is short or fails its check and reaches the end of the file is
// dropped. One that fails its check before the end, or a log past
// maxRedoLog, is ErrCorrupt; an error reading is returned as it is (the
// log stays for another try).
func parseRedo(f io.ReaderAt, size int64) (*parsedRedo, error) {
	if size > maxRedoLog {
		return nil, fmt.Errorf("%w: redo log of %d bytes, more than %d", ErrCorrupt, size, int64(maxRedoLog))
	}
	r := io.NewSectionReader(f, 0, size)
	var h [redoHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &parsedRedo{}, nil // created, nothing written yet
		}
		return nil, err
	}
	if string(h[:len(redoMagic)]) != redoMagic {
		return nil, fmt.Errorf("%w: not a redo log", ErrCorrupt)
	}
	p := &parsedRedo{branch: int64(binary.LittleEndian.Uint64(h[len(redoMagic):]))}
	at := int64(redoHeaderLen)
	for at < size {
		var rh [8]byte
		if _, err := io.ReadFull(r, rh[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return p, nil // a torn header at the end
			}
			return nil, err
		}
		n := int64(binary.LittleEndian.Uint32(rh[0:4]))
		end := at + 8 + n
		if n > maxRedoRecord || end > size {
			return p, nil // torn: the record would reach past the end
		}
		items := make([]byte, n)
		if _, err := io.ReadFull(r, items); err != nil {
			return nil, err
		}
		if crc32.Checksum(items, redoCRC) != binary.LittleEndian.Uint32(rh[4:8]) {
			if end == size {
				return p, nil // the last record, torn
			}
			return nil, fmt.Errorf("%w: redo log record at %d fails its check, with records after it", ErrCorrupt, at)
		}
		if err := p.parseItems(items); err != nil {
			return nil, err
		}
		at = end
	}
	return p, nil
}

func (p *parsedRedo) parseItems(b []byte) error {
	d := decoder{b: b}
	id := func() (v cas.ID) {
		if len(d.b) < len(v) {
			d.fail("short id")
			return v
		}
		copy(v[:], d.b)
		d.b = d.b[len(v):]
		return v
	}
	nullable := func() ([]byte, bool) {
		switch d.byte() {
		case 0:
			return nil, false
		case 1:
			return d.bytes(), true
		}
		d.fail("bad nullable")
		return nil, false
	}
	for len(d.b) > 0 && d.err == nil {
		switch tag := d.byte(); tag {
		case redoEvent:
			var e redoEventRow
			e.seq, e.branch, e.op, e.kind, e.time = d.varint(), d.varint(), d.varint(), d.varint(), d.varint()
			e.path, e.hasPath = nullable()
			e.root, e.hasRoot = nullable()
			e.payload = d.bytes()
			e.prev, e.hash = id(), id()
			p.events = append(p.events, e)
		case redoObject:
			o := redoObjectRow{id: id()}
			o.kind, o.codec, o.size = d.varint(), d.varint(), d.varint()
			o.data = d.bytes()
			p.objects = append(p.objects, o)
		case redoPacked:
			o := redoObjectRow{id: id(), packed: true}
			o.kind, o.codec, o.size, o.pack, o.off, o.n = d.varint(), d.varint(), d.varint(), d.varint(), d.varint(), d.varint()
			p.objects = append(p.objects, o)
		default:
			d.fail(fmt.Sprintf("item tag %d", tag))
		}
	}
	if d.err != nil {
		return fmt.Errorf("%w: redo log: %v", ErrCorrupt, d.err)
	}
	return nil
}

// redoOutcome is what recovery made of one log.
type redoOutcome int

const (
	redoNothing   redoOutcome = iota // no events: nothing to recover
	redoLive                         // its writer lives: left to it
	redoCommitted                    // its events are on the branch already
	redoApplied                      // its events were replayed onto the branch
)

// RedoRecovery reports what Open's recovery did (Recovered).
type RedoRecovery struct {
	Logs   int      // logs whose events were replayed
	Events int      // events replayed
	Failed []string // logs that could not be applied (set aside as NAME.failed), with why
}

// Recovered reports what this DB's Open recovered from redo logs.
func (db *DB) Recovered() RedoRecovery { return db.recovered }

// Report writes what r says a person should know, a line each: the
// events replayed, the logs set aside (their messages escaped: a replay
// error can name a path the agent chose).
func (r RedoRecovery) Report(w io.Writer) {
	if r.Logs > 0 {
		fmt.Fprintf(w, "art: recovered %d events of %d crashed session(s) from their redo logs\n", r.Events, r.Logs)
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "art: warning: a redo log could not be applied: %s\n", termtext.Text(f))
	}
}

// recoverRedo applies every redo log of the store whose events are not
// committed: each in a write transaction of its own, under the write lock
// (see the top of this file). A log that is applied or committed is
// removed, or emptied when its writer still holds it; one that cannot be
// applied is set aside as NAME.failed and named in db.recovered.
func (db *DB) recoverRedo(ctx context.Context) error {
	if db.readOnly {
		return nil
	}
	db.recovering.Store(true)
	defer db.recovering.Store(false)
	if h := redoHooks.recovering; h != nil {
		h()
	}
	d, names, err := db.openRedoDir(false)
	if d == nil || err != nil {
		return err
	}
	defer d.Close()
	dfd := int(d.Fd())
	var errs []error
	left := map[int64]string{}
	for _, name := range names {
		if err := db.recoverLog(ctx, dfd, name, left); err != nil {
			errs = append(errs, err)
		}
	}
	// Only now is a branch whose log this pass applied, set aside or
	// found gone free again (redoWaits): until here an earlier pass's
	// entry kept every writer of this process off it, so none could
	// append to the branch ahead of its log and make it inapplicable.
	db.redoLeft.Range(func(k, _ any) bool {
		if _, ok := left[k.(int64)]; !ok {
			db.redoLeft.Delete(k)
		}
		return true
	})
	for branch, name := range left {
		db.redoLeft.Store(branch, name)
	}
	return errors.Join(errs...)
}

// redoHooks are called, when set, for tests to step in.
var redoHooks struct {
	// recovering: as a recovery begins (recovering set).
	recovering func()
}

// trustedRedo refuses a redo directory or log that another user could
// have written: one not owned by this process's user or the store file's
// owner, or writable by group or others. A log is applied to the store
// as its own writer's transaction; nobody else's may be.
func (db *DB) trustedRedo(st *unix.Stat_t) error {
	owner := uint32(os.Geteuid())
	if st.Uid != owner {
		var sst unix.Stat_t
		if err := unix.Stat(db.path, &sst); err != nil || sst.Uid != st.Uid {
			return fmt.Errorf("owned by uid %d, neither this user nor the store's owner", st.Uid)
		}
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("writable by others (mode %o)", st.Mode&0o777)
	}
	return nil
}

// openRedoDir opens the store's redo directory (never through a link,
// and only one this user or the store's owner alone can write) and lists
// its logs, with failed the set-aside ones too (redoNames). d is nil
// when there is no directory; the caller closes it.
func (db *DB) openRedoDir(failed bool) (d *os.File, names []string, err error) {
	dir := RedoDir(db.path)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("redo logs: open %s: %w", dir, err)
	}
	d = os.NewFile(uintptr(fd), dir)
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err == nil {
		if err = db.trustedRedo(&st); err == nil {
			names, err = redoNames(d, failed)
		}
	}
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("redo logs: %s: %w", dir, err)
	}
	return d, names, nil
}

// readRedo opens and parses log name in the redo directory dfd, for
// reading only (no lock: a live writer's may be growing). A log gone
// meanwhile is (nil, nil).
func readRedo(dfd int, name string) (*parsedRedo, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	return parseRedo(f, st.Size)
}

// redoNames lists the logs in the redo directory d (with failed, the
// set-aside ones too), reading every entry - set-aside logs piling up
// must not hide a live one - but keeping at most maxRedoLogs names.
func redoNames(d *os.File, failed bool) ([]string, error) {
	var out []string
	for len(out) < maxRedoLogs {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if redoLogName(n) || failed && redoLogName(strings.TrimSuffix(n, ".failed")) {
				out = append(out, n)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// redoLogName: 32 lower-case hex digits and ".log", as createRedoLog names.
func redoLogName(name string) bool {
	h, ok := strings.CutSuffix(name, ".log")
	if !ok || len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

func (db *DB) recoverLog(ctx context.Context, dfd int, name string, left map[int64]string) error {
	fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // its writer removed it
	}
	if err != nil {
		return fmt.Errorf("redo log %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("redo log %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("redo log %s: not a regular file", name)
	}
	if err := db.trustedRedo(&st); err != nil {
		return fmt.Errorf("redo log %s: %w", name, err)
	}
	// Everything from here runs under the write lock. A writer creates,
	// locks and appends to its log only while it holds that lock (inside
	// its open transaction), and a recovery takes a log's file lock only
	// while it holds it too; so here a log's file lock held means a
	// writer that lives, with no transaction open, and a free one means
	// its writer is gone and the log holds all it will ever hold.
	var outcome redoOutcome
	var applied int
	var branch int64
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			outcome = redoLive // its writer applies it itself if it must
			return nil
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		p, err := parseRedo(f, st.Size)
		if errors.Is(err, ErrCorrupt) {
			return redoDataError{err}
		}
		if err != nil {
			return err
		}
		branch = p.branch
		outcome, applied, err = db.applyRedo(ctx, tx, p)
		return err
	})
	var de redoDataError
	switch {
	case errors.As(err, &de):
		// The log itself is wrong (or its branch moved): it can never
		// apply. Set aside, for a person to look at.
		db.recovered.Failed = append(db.recovered.Failed, fmt.Sprintf("%s: %v (set aside as %s.failed)", name, de.err, name))
		unix.Renameat(dfd, name, dfd, name+".failed")
		return nil
	case err != nil:
		// The store could not take it now (busy, full, read-only): it
		// stays for the next open, and this process writes nothing to
		// its branch meanwhile (an event there would make it
		// inapplicable).
		if branch == 0 {
			branch = redoBranchOf(f)
		}
		if branch != 0 {
			left[branch] = name
		}
		return fmt.Errorf("redo log %s not applied yet: %w", name, err)
	case outcome == redoLive:
		return nil
	}
	if outcome == redoApplied {
		db.recovered.Logs++
		db.recovered.Events += applied
	}
	return unix.Unlinkat(dfd, name, 0)
}

// redoBranchOf reads the branch id in a log's header (0 if unreadable).
func redoBranchOf(f io.ReaderAt) int64 {
	var h [redoHeaderLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || string(h[:len(redoMagic)]) != redoMagic {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(h[len(redoMagic):]))
}

// storeError reports whether err came from SQLite or the context (the
// store could not do it now), not from the events' content.
func storeError(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// redoDataError is a log that can never be applied: it fails its checks,
// or its branch moved. Anything else that stops a recovery (the store
// busy or full) leaves the log for the next try.
type redoDataError struct{ err error }

func (e redoDataError) Error() string { return e.err.Error() }
func (e redoDataError) Unwrap() error { return e.err }

// redoOnBranch reports whether p's events are on its branch already:
// the branch's last events are the log's (committed by the writer, or
// recovered before).
func redoOnBranch(ctx context.Context, tx cas.DBTX, p *parsedRedo) (bool, error) {
	evs := p.events
	// Committed by its writer: the first event is on the chain as logged
	// (its transaction committed whole, whatever followed it).
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE seq = ? AND branch = ? AND hash = ?`, evs[0].seq, p.branch, evs[0].hash[:]).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return true, nil
	}
	// Applied by a recovery (appended with new seqs) that could not
	// remove the log after: the branch's last events are the log's.
	rows, err := tx.QueryContext(ctx, `SELECT payload FROM events WHERE branch = ? ORDER BY seq DESC LIMIT ?`, p.branch, len(evs))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	same := 0
	for i := len(evs) - 1; rows.Next(); i-- {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return false, err
		}
		if i >= 0 && bytes.Equal(payload, evs[i].payload) {
			same++
		}
	}
	return same == len(evs), rows.Err()
}

// redoPendingTx fails when a redo log holds events that are not on their
// branch, inside tx (which holds the write lock, so such a log's writer
// is gone): gc must not sweep before they are recovered, or it could
// delete an object only they name. Logs it cannot read are left to
// recovery (which sets them aside).
func (db *DB) redoPendingTx(ctx context.Context, tx *sql.Tx) error {
	d, names, err := db.openRedoDir(false)
	if d == nil || err != nil {
		return err
	}
	defer d.Close()
	for _, name := range names {
		p, err := readRedo(int(d.Fd()), name)
		if errors.Is(err, ErrCorrupt) || err == nil && (p == nil || len(p.events) == 0) {
			continue // recovery sets it aside, or there is nothing in it
		}
		if err != nil {
			return fmt.Errorf("redo log %s: %w", name, err)
		}
		if ok, err := redoOnBranch(ctx, tx, p); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("redo log %s holds a crashed writer's closes, not yet recovered: run again", name)
		}
	}
	return nil
}

// redoPackRanges returns the ranges of pack num that the store's redo
// logs name (those not applied yet and those set aside alike): gc keeps
// them. An error means the logs could not be read, and gc must leave the
// pack alone.
func (db *DB) redoPackRanges(num int64) ([]cas.PackRange, error) {
	d, names, err := db.openRedoDir(true)
	if d == nil || err != nil {
		return nil, err
	}
	defer d.Close()
	var out []cas.PackRange
	for _, name := range names {
		p, err := readRedo(int(d.Fd()), name)
		if errors.Is(err, ErrCorrupt) || err == nil && p == nil {
			continue // not a log (it names nothing), or removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, o := range p.objects {
			if o.packed && o.pack == num {
				out = append(out, cas.PackRange{Off: o.off, Len: o.n})
			}
		}
	}
	return out, nil
}

// redoWaits fails when a redo log this process could not apply holds
// closes of branch: an event appended to the branch now would make the
// log inapplicable.
func (db *DB) redoWaits(branch int64) error {
	if st := db.redoStuck.Load(); st != nil && st.branch == branch {
		return st
	}
	if name, ok := db.redoLeft.Load(branch); ok {
		return fmt.Errorf("a crashed session's closes wait in redo log %s, which the store could not take yet: try again", name)
	}
	return nil
}

// retryLeft runs the recovery again when an earlier one left logs (see
// redoLeft), before any write transaction of this process (writeTx).
func (db *DB) retryLeft(ctx context.Context) {
	if db.recovering.Load() {
		return
	}
	left := false
	db.redoLeft.Range(func(any, any) bool {
		left = true
		return false
	})
	if left {
		// The entries stay while it runs; it clears those it resolves.
		db.recoverRedo(ctx)
	}
}

// redoStuck is DB.redoStuck: a branch whose closes wait in a redo log
// this process could not apply.
type redoStuck struct {
	branch int64
	err    error
}

func (e *redoStuck) Error() string {
	return fmt.Sprintf("closes acknowledged on it wait in a redo log the store could not take (%v): nothing more is written to it before the next open applies them", e.err)
}

func (e *redoStuck) Unwrap() error { return e.err }

// errRedoMoved: the branch is neither where the log began nor where it
// ended: something else changed it, and the log cannot be applied.
var errRedoMoved = errors.New("the branch moved since the log was written")

// applyRedo applies p inside tx (which holds the write lock).
func (db *DB) applyRedo(ctx context.Context, tx cas.DBTX, p *parsedRedo) (redoOutcome, int, error) {
	evs := p.events
	if len(evs) == 0 {
		return redoNothing, 0, nil
	}
	// The chain the log claims, checked before anything else is read.
	for i, e := range evs {
		if e.branch != p.branch {
			return 0, 0, redoDataError{fmt.Errorf("%w: redo log: event of branch %d in the log of branch %d", ErrCorrupt, e.branch, p.branch)}
		}
		if chainHash(e.prev, e.seq, e.payload) != e.hash || (i > 0 && e.prev != evs[i-1].hash) {
			return 0, 0, redoDataError{fmt.Errorf("%w: redo log: broken chain at its event %d", ErrCorrupt, i)}
		}
	}
	committed, err := redoOnBranch(ctx, tx, p)
	if err != nil {
		return 0, 0, err
	}
	if committed {
		return redoCommitted, 0, nil
	}
	var headSeq, count, nextIno, next int64
	var head []byte
	var deleted sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT head_seq, head_hash, event_count, next_ino, deleted_ns,
		max((SELECT coalesce(max(seq), 0) FROM events), (SELECT coalesce(max(to_seq), 0) FROM forgotten)) + 1
		FROM branches WHERE id = ?`, p.branch).Scan(&headSeq, &head, &count, &nextIno, &deleted, &next)
	if err != nil {
		return 0, 0, fmt.Errorf("branch %d: %w", p.branch, err)
	}
	if deleted.Valid || !bytes.Equal(head, evs[0].prev[:]) {
		return 0, 0, redoDataError{errRedoMoved}
	}
	for _, o := range p.objects {
		if o.packed {
			_, err = tx.ExecContext(ctx, cas.InsertPackedSQL+`(?, ?, ?, ?, x'', ?, ?, ?)`, o.id[:], o.kind, o.codec, o.size, o.pack, o.off, o.n)
		} else {
			_, err = tx.ExecContext(ctx, cas.InsertObjectSQL, o.id[:], o.kind, o.codec, o.size, append([]byte{}, o.data...))
		}
		if err != nil {
			return 0, 0, fmt.Errorf("object %s: %w", o.id.Short(), err)
		}
	}
	pr := newProj(ctx, tx, db.objs, p.branch, nextIno, db.now())
	defer pr.close()
	var prev cas.ID
	copy(prev[:], head)
	for i, e := range evs {
		ev, err := DecodeEvent(e.payload)
		if err != nil {
			return 0, 0, redoDataError{fmt.Errorf("redo log event %d: %w", i, err)}
		}
		if ev.Branch != p.branch || EventKind(e.kind) != ev.Kind || e.op != ev.Op || e.time != ev.Time {
			return 0, 0, redoDataError{fmt.Errorf("%w: redo log event %d: its row and payload differ", ErrCorrupt, i)}
		}
		pr.now = ev.Time // as when it was first applied
		if err := pr.replay(ev); err != nil {
			if storeError(err) {
				return 0, 0, err
			}
			// A path that does not resolve, a name that exists: the
			// events do not fit the branch they claim.
			return 0, 0, redoDataError{fmt.Errorf("redo log event %d (%s): %w", i, ev.Kind, err)}
		}
		var path, root any
		if e.hasPath {
			path = append([]byte{}, e.path...) // never NULL: an empty path is a blob
		}
		if e.hasRoot {
			root = e.root
		}
		hash := chainHash(prev, next, e.payload)
		if _, err := tx.ExecContext(ctx, insertEventSQL, next, p.branch, e.op, e.kind, e.time, path, root, e.payload, prev[:], hash[:]); err != nil {
			return 0, 0, fmt.Errorf("redo log event %d: %w", i, err)
		}
		prev, headSeq = hash, next
		next++
		count++
	}
	_, err = tx.ExecContext(ctx, `UPDATE branches SET head_seq = ?, head_hash = ?, event_count = ?, next_ino = ? WHERE id = ?`,
		headSeq, prev[:], count, pr.nextIno, p.branch)
	if err != nil {
		return 0, 0, err
	}
	return redoApplied, len(evs), nil
}
