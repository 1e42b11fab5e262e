package journal

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
)

// GCOptions configure GC.
type GCOptions struct {
	// DryRun finds what would be removed without removing anything.
	DryRun bool
	// Grace protects recently written objects: only objects already
	// present at a generation mark taken at least Grace ago may be
	// removed. Zero protects only objects written after GC began.
	Grace time.Duration
	// Progress, when set, is called as the phases advance.
	Progress func(phase string, done, total int)
}

// GCReport is the result of GC.
type GCReport struct {
	DryRun         bool  `json:"dry_run"`
	ObjectsBefore  int64 `json:"objects_before"`
	ObjectsAfter   int64 `json:"objects_after"`
	BytesBefore    int64 `json:"bytes_before"` // stored object bytes
	BytesAfter     int64 `json:"bytes_after"`
	Reachable      int64 `json:"reachable"`
	Removed        int64 `json:"removed"` // objects removed (or, with DryRun, that would be)
	RemovedBytes   int64 `json:"removed_bytes"`
	Protected      int64 `json:"protected"` // unreachable but within the grace period
	ProtectedBytes int64 `json:"protected_bytes"`
	FileBefore     int64 `json:"file_before"` // store file plus its WAL plus the packs' allocated bytes
	FileAfter      int64 `json:"file_after"`
	// PacksRemoved counts pack files deleted as wholly dead; PackBytesFreed
	// the bytes of dead or unreferenced ranges punched out of packs.
	PacksRemoved   int64 `json:"packs_removed"`
	PackBytesFreed int64 `json:"pack_bytes_freed"`
	// OrphanPackBytes is the disk space of pack bytes no row names in
	// packs no writer holds (left by a crashed or interrupted writer):
	// with DryRun what gc would free besides the removed objects' bytes.
	OrphanPackBytes int64   `json:"orphan_pack_bytes"`
	Vacuum          string  `json:"vacuum"` // "incremental", "full" (first conversion), "skipped: ..."
	Seconds         float64 `json:"seconds"`
}

// DiskBytes is what the store at path occupies: its file, its WAL and the
// space its packs take (allocated blocks: punched holes take none).
func DiskBytes(path string) int64 { return fileSize(path) }

// fileSize is DiskBytes.
func fileSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n + packsAllocated(path)
}

// packsAllocated is the disk space the store's pack files occupy.
func packsAllocated(path string) int64 {
	var n int64
	dir := cas.PacksDir(path)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if st, err := os.Lstat(filepath.Join(dir, e.Name())); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				n += sys.Blocks * 512
			} else {
				n += st.Size()
			}
		}
	}
	return n
}

type gcQuerier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// GC removes the objects no recorded state references and gives the space
// back to the file system. The roots are every event's root tree and file
// manifest (so every state a replay can reach stays materializable), every
// snapshot, every branch's live tree (projection rows) and the import
// cache's manifests. Marking and sweeping run in one write transaction, so
// no writer can add a reference meanwhile; an object written before GC
// began but not yet referenced (a writer that stores chunks in one
// transaction and refers to them in a later one) is protected by the
// generation marks and opts.Grace. See docs/store-format.md.
func (db *DB) GC(ctx context.Context, opts GCOptions) (*GCReport, error) {
	start := time.Now()
	rep := &GCReport{DryRun: opts.DryRun, FileBefore: fileSize(db.path)}
	if db.readOnly && !opts.DryRun {
		if err := db.FullErr(); err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
		return nil, errors.New("gc: store opened read-only")
	}
	if opts.DryRun {
		tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		if _, err := db.gcPlan(ctx, tx, opts, rep); err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
		if rep.OrphanPackBytes, err = db.orphanPackBytes(ctx, tx); err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
		rep.Vacuum = "skipped: dry run"
	} else if err := db.gcSweep(ctx, opts, rep); err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	rep.FileAfter = fileSize(db.path)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// gcSweep is GC without DryRun: plan and sweep in one write transaction,
// then give the freed pack bytes and pages back to the file system.
func (db *DB) gcSweep(ctx context.Context, opts GCOptions, rep *GCReport) error {
	// First what needs no write: the packs of writers that are gone lose
	// the bytes no row names (a crashed or interrupted push's). On a full
	// disk that is what gives the sweep's transaction the room it needs.
	if err := db.gcPacks(ctx, nil, rep); err != nil {
		return err
	}
	var plan *sweepPlan
	if err := db.writeTx(ctx, func(tx *sql.Tx) error {
		// A crashed writer's redo log may name objects no commit names.
		if err := db.redoPendingTx(ctx, tx); err != nil {
			return err
		}
		var err error
		if plan, err = db.gcPlan(ctx, tx, opts, rep); err != nil {
			return err
		}
		return db.gcExecute(ctx, tx, plan, opts)
	}); err != nil {
		return err
	}
	// The sweep is committed: what follows runs to its end even if ctx is
	// cancelled (a signal), so the bytes it freed in rows are freed on
	// disk too; only the vacuum stops early.
	done := context.WithoutCancel(ctx)
	// The rows are gone (committed), but with synchronous=NORMAL the
	// commit is not yet on disk: a power loss could bring the rows back
	// while the punched bytes and removed packs stay gone. Make the store
	// durable first, then free the packed bytes.
	if err := syncStoreFiles(db.path); err != nil {
		return err
	}
	if err := db.gcPacks(done, plan.dead, rep); err != nil {
		return err
	}
	rep.Vacuum = db.gcVacuum(ctx, rep.Removed > 0)
	return nil
}

// gcPlan reads what the sweep decides on (the object counts, the
// generation mark the grace period reaches back to, the marked set, the
// rows) and returns the sweep's plan, filling rep's counts. It writes
// nothing.
func (db *DB) gcPlan(ctx context.Context, q gcQuerier, opts GCOptions, rep *GCReport) (*sweepPlan, error) {
	now := db.now()
	var maxRowid, mark sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(data) + pack_len), 0), max(rowid) FROM objects`).
		Scan(&rep.ObjectsBefore, &rep.BytesBefore, &maxRowid); err != nil {
		return nil, err
	}
	if opts.Grace > 0 {
		err := q.QueryRowContext(ctx, `SELECT max_rowid FROM gc_marks WHERE time_ns <= ? ORDER BY time_ns DESC LIMIT 1`,
			now-opts.Grace.Nanoseconds()).Scan(&mark)
		if err != nil && err != sql.ErrNoRows {
			return nil, err
		}
	}
	m, err := db.gcMark(ctx, q, opts.Progress)
	if err != nil {
		return nil, err
	}
	// The sweep's scan of every row also finds the live rows whose kind
	// column is a manifest or tree but which the mark reached only as
	// another kind (see gcMarker.twin). Such rows are rare (an agent's
	// file whose bytes are another object's encoding): when the scan
	// finds some, their references are marked and the plan is made again
	// from a new scan, until a scan finds none.
	for {
		plan := newSweepPlan(m.w.Seen, maxRowid.Int64, gcCutoff(maxRowid.Int64, opts.Grace, mark.Int64))
		twins, err := db.gcScan(ctx, q, m, plan)
		if err != nil {
			return nil, err
		}
		if len(twins) == 0 {
			plan.report(rep)
			return plan, nil
		}
		if err := m.follow(twins); err != nil {
			return nil, err
		}
	}
}

// gcScan reads every object row into plan and returns the live rows the
// mark reached only as a kind other than their kind column's.
func (db *DB) gcScan(ctx context.Context, q gcQuerier, m *gcMarker, plan *sweepPlan) ([]cas.Ref, error) {
	rows, err := q.QueryContext(ctx, `SELECT rowid, id, kind, length(data) + pack_len, pack, pack_off, pack_len FROM objects`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var twins []cas.Ref
	for rows.Next() {
		var o gcObject
		var idb []byte
		var kind int64
		if err := rows.Scan(&o.rowid, &idb, &kind, &o.size, &o.pack.Pack, &o.pack.Off, &o.pack.Len); err != nil {
			return nil, err
		}
		copy(o.id[:], idb)
		if len(idb) == len(o.id) && m.twin(o.id, kind) {
			twins = append(twins, cas.Ref{ID: o.id, Kind: cas.Kind(kind)})
		}
		plan.consider(o)
	}
	return twins, rows.Err()
}

// gcExecute applies a sweep plan in tx: it deletes the doomed rows and
// records this gc's generation mark, pruning the marks the grace period no
// longer reaches.
func (db *DB) gcExecute(ctx context.Context, tx *sql.Tx, plan *sweepPlan, opts GCOptions) error {
	now := db.now()
	for i, r := range plan.doomed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE rowid = ?`, r); err != nil {
			return err
		}
		if opts.Progress != nil && (i%1024 == 0 || i == len(plan.doomed)-1) {
			opts.Progress("sweep", i+1, len(plan.doomed))
		}
	}
	// The mark's time is also the gc generation (GCGeneration): it must
	// grow with every gc, even if the clock stepped back.
	last, err := gcGeneration(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO gc_marks (time_ns, max_rowid, by_gc) VALUES (?, ?, 1)`, max(now, last+1), plan.maxRowid); err != nil {
		return err
	}
	// Keep the newest mark older than the grace period and all newer.
	_, err = tx.ExecContext(ctx, `DELETE FROM gc_marks WHERE time_ns < (SELECT coalesce(max(time_ns), 0) FROM gc_marks WHERE time_ns <= ?)`,
		now-opts.Grace.Nanoseconds())
	return err
}

// markInterval is how often opening a store for writing records a
// generation mark (see markGeneration).
const markInterval = 10 * time.Minute

// markGeneration records (now, max(rowid)) in gc_marks unless a mark newer
// than markInterval exists, so that a gc with a grace period finds a mark
// about that old instead of having to wait one period after its first run.
// Best effort: a failure (a busy store) only delays what gc may remove.
func (db *DB) markGeneration(ctx context.Context) {
	now := db.now()
	var recent int
	// On the writer, as Open's other reads: the reader is warming up.
	if db.w.QueryRowContext(ctx, `SELECT count(*) FROM gc_marks WHERE time_ns > ?`, now-markInterval.Nanoseconds()).Scan(&recent) != nil || recent > 0 {
		return
	}
	db.w.ExecContext(ctx, `INSERT OR IGNORE INTO gc_marks (time_ns, max_rowid) SELECT ?, coalesce(max(rowid), 0) FROM objects`, now)
}

// gcVacuum returns free pages to the file system: PRAGMA incremental_vacuum
// on a store in auto_vacuum=INCREMENTAL mode; otherwise (stores created
// before gc existed) one VACUUM that also switches the store to that mode.
// Both are single SQLite transactions, so a crash leaves the old file or the
// new one. Failure (e.g. another process holds a lock) is not an error: the
// space stays free inside the file and the next gc returns it.
func (db *DB) gcVacuum(ctx context.Context, removed bool) string {
	var mode int
	if err := db.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return "skipped: " + err.Error()
	}
	var free, pages int64
	if err := db.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return "skipped: " + err.Error()
	}
	if err := db.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return "skipped: " + err.Error()
	}
	what := "incremental"
	// incremental_vacuum moves pages one at a time (measured 19 s for
	// 800 MiB freed of 1 GiB, against 1.6 s for VACUUM): with a quarter of
	// the file or more free, rewriting it is faster.
	if mode == 2 && free*4 < pages {
		// Each step of this statement frees one page: drain it (a plain
		// Exec frees only the first).
		rows, err := db.w.QueryContext(ctx, `PRAGMA incremental_vacuum`)
		if err != nil {
			return "skipped: " + err.Error()
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "skipped: " + err.Error()
		}
	} else {
		if !removed && free == 0 {
			return "skipped: nothing to free"
		}
		what = "full"
		if _, err := db.w.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
			return "skipped: " + err.Error()
		}
		if _, err := db.w.ExecContext(ctx, `VACUUM`); err != nil {
			return "skipped: " + err.Error()
		}
	}
	db.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return what
}

// gcMark returns every object reachable from a root (see GC). An object
// missing from the store is no error here (art verify reports it); one
// that does not decode is.
func (db *DB) gcMark(ctx context.Context, q gcQuerier, progress func(string, int, int)) (*gcMarker, error) {
	roots, err := gcRoots(ctx, q)
	if err != nil {
		return nil, err
	}
	objs := db.objs
	if tx, ok := q.(*sql.Tx); ok {
		objs = db.objs.With(tx)
	}
	// extra holds the rows followed as their kind column's kind only (see
	// gcMarker.follow): one whose bytes do not decode as that kind (a
	// hostile store's) references nothing, rather than failing gc.
	extra := map[cas.ID]cas.Kind{}
	load := cas.StoreLoader(objs, true)
	w := &cas.Walker{Load: func(ctx context.Context, refs []cas.Ref, got func(*cas.Checked) error) error {
		if len(extra) == 0 { // the walk from the roots: the loader's batches
			return load(ctx, refs, got)
		}
		for _, r := range refs {
			err := load(ctx, []cas.Ref{r}, got)
			if k, ok := extra[r.ID]; ok && k == r.Kind && errors.Is(err, cas.ErrCorrupt) {
				err = got(&cas.Checked{Raw: cas.Raw{ID: r.ID, Kind: r.Kind}})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}}
	if progress != nil {
		w.Progress = func(n int) { progress("mark", n, 0) }
	}
	walk := func(roots []cas.Ref) error {
		if err := w.Walk(ctx, roots...); err != nil {
			var we *cas.WalkError
			if errors.As(err, &we) {
				return fmt.Errorf("%s %s: %w (run art verify)", we.Kind, we.ID.Short(), we.Err)
			}
			return err
		}
		return nil
	}
	if err := walk(roots); err != nil {
		return nil, err
	}
	return &gcMarker{w: w, walk: walk, extra: extra}, nil
}

// gcMarker is gc's mark: the walk from the roots, which rows found by the
// sweep's scan extend (follow).
type gcMarker struct {
	w     *cas.Walker
	walk  func([]cas.Ref) error
	extra map[cas.ID]cas.Kind
}

// twin reports whether the row of id, whose kind column is kind, is live
// but was reached only as another kind (a chunk with a manifest's bytes:
// an id names bytes). Such a row keeps what it references as its own
// kind: a pull trusts a row of a kind to have its references as that kind
// (remote receiveState).
func (m *gcMarker) twin(id cas.ID, kind int64) bool {
	if kind != int64(cas.KindManifest) && kind != int64(cas.KindTree) {
		return false
	}
	_, live := m.w.Seen[id]
	return live && !m.w.ReachedAs(id, cas.Kind(kind))
}

// follow marks what twins reference, each as its row's kind.
func (m *gcMarker) follow(twins []cas.Ref) error {
	for _, r := range twins {
		m.extra[r.ID] = r.Kind
	}
	return m.walk(twins)
}

// gcRoots lists what GC keeps, with everything under it: every event's
// root tree and file manifest, every snapshot's root, every branch's live
// trees and manifests (projection rows) and the import cache's manifests.
func gcRoots(ctx context.Context, q gcQuerier) ([]cas.Ref, error) {
	var roots []cas.Ref
	add := func(b []byte, k cas.Kind) {
		if len(b) == len(cas.ID{}) {
			if id := cas.ID(b); !id.IsZero() {
				roots = append(roots, cas.Ref{ID: id, Kind: k})
			}
		}
	}
	scan := func(query string, fn func(kind int, b []byte) error) error {
		rows, err := q.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind int
			var b []byte
			if err := rows.Scan(&kind, &b); err != nil {
				return err
			}
			if err := fn(kind, b); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	if err := scan(`SELECT kind, payload FROM events`, func(_ int, p []byte) error {
		ev, err := DecodeEvent(p)
		if err != nil {
			return fmt.Errorf("%w: an event does not decode (run art verify): %v", ErrCorrupt, err)
		}
		add(ev.Root[:], cas.KindTree)
		add(ev.Attr.Content[:], cas.KindManifest)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := scan(`SELECT 0, root FROM snapshots`, func(_ int, b []byte) error { add(b, cas.KindTree); return nil }); err != nil {
		return nil, err
	}
	if err := scan(`SELECT kind, target FROM nodes WHERE kind IN (1, 2)`, func(k int, b []byte) error {
		if cas.EntryKind(k) == cas.EntryDir {
			add(b, cas.KindTree)
		} else {
			add(b, cas.KindManifest)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	err := scan(`SELECT 0, manifest FROM import_cache`, func(_ int, b []byte) error { add(b, cas.KindManifest); return nil })
	return roots, err
}

// gcPacks gives back the space of packed bytes no row names: first the
// ranges of the objects gc just removed (in any pack, even one a writer
// still appends to: no row names them and none ever will again, as new
// bytes only go to the end), then, in every pack whose writer is gone (gc
// can lock it), every range no row names: bytes of transactions that
// rolled back or crashed, a torn tail. A pack no row names is deleted.
// Rows are read after the lock is taken: from then on the set of rows
// naming the pack can only shrink.
func (db *DB) gcPacks(ctx context.Context, dead []cas.PackRange, rep *GCReport) error {
	packs := db.packs
	before := packsAllocated(db.path)
	defer func() { rep.PackBytesFreed += max(0, before-packsAllocated(db.path)) }()
	for _, r := range dead {
		if err := packs.PunchRange(r); err != nil {
			if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EOPNOTSUPP) {
				break // the file system cannot punch: whole packs still go below
			}
			return fmt.Errorf("free pack range: %w", err)
		}
	}
	if _, err := packs.RemoveStaleTemps(); err != nil {
		return fmt.Errorf("list packs: %w", err)
	}
	nums, err := packs.List()
	if err != nil {
		return fmt.Errorf("list packs: %w", err)
	}
	mine := packs.Writing()
	for _, num := range nums {
		if num == mine {
			continue
		}
		if err := db.gcPack(ctx, num, rep); err != nil {
			return err
		}
	}
	return nil
}

// ReclaimPacks gives back the pack bytes no row names in packs whose
// writer is gone (a crashed, killed or failed writer's), as gc's first
// step does, without writing to the store or needing any free space: for
// a store whose file system is full, which SQLite cannot even open in WAL
// mode (its shared-memory index and WAL need room). The store is read
// through one connection in locking_mode=EXCLUSIVE, which keeps that index
// in memory; other processes wait for the store meanwhile. The report
// holds PackBytesFreed and PacksRemoved.
func ReclaimPacks(ctx context.Context, path string) (*GCReport, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	q := url.Values{}
	q.Set("_locking_mode", "EXCLUSIVE")
	q.Set("_query_only", "1")
	q.Set("_busy_timeout", "5000")
	q.Set("_foreign_keys", "0")
	r, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r.SetMaxOpenConns(1)
	defer r.Close()
	if v, err := checkSchema(ctx, r); err != nil || v == 0 {
		if err == nil {
			err = fmt.Errorf("%w: not an art store (no schema)", ErrCorrupt)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	packs := cas.OpenPacks(cas.PacksDir(path), true) // never appended to
	defer packs.Close()
	db := &DB{path: path, w: r, r: r, objs: cas.NewPackedStore(r, packs), packs: packs, readOnly: true}
	rep := &GCReport{FileBefore: fileSize(path)}
	if err := db.gcPacks(ctx, nil, rep); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	rep.FileAfter = fileSize(path)
	return rep, nil
}

// orphanPackBytes is the disk space that pack bytes no row names take in
// packs whose writer is gone: what gcPacks would free besides the ranges
// of the objects it removes.
func (db *DB) orphanPackBytes(ctx context.Context, q gcQuerier) (int64, error) {
	files, err := db.packs.Stat()
	if err != nil || len(files) == 0 {
		return 0, err
	}
	named := map[int64]int64{}
	rows, err := q.QueryContext(ctx, `SELECT pack, sum(pack_len) FROM objects WHERE pack != 0 GROUP BY pack`)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var num, n int64
		if err := rows.Scan(&num, &n); err != nil {
			rows.Close()
			return 0, err
		}
		named[num] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var orphan int64
	for _, f := range files {
		if f.Writing {
			continue
		}
		// Allocation is in blocks: a few KiB of a pack's last block or of
		// blocks around punched gaps are not bytes gc could free.
		if d := min(f.Allocated, f.Size) - named[f.Num]; d >= 4096 {
			orphan += d
		}
	}
	return orphan, nil
}

// gcPack compacts pack num if its writer is gone (see gcPacks).
func (db *DB) gcPack(ctx context.Context, num int64, rep *GCReport) error {
	f, ok, err := db.packs.OpenPackForGC(num)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // another gc removed it
	}
	if err != nil || !ok {
		return err
	}
	defer f.Close() // releases the lock
	// Its writer is gone: if it died with closes in its redo log, they
	// name bytes of this pack that no row names yet. Recover them first
	// (under the write lock, which the writer's death released); what a
	// log still holds - not applied yet, set aside, or unreadable here -
	// stays live all the same.
	if !db.readOnly {
		db.recoverRedo(ctx) // a log it could not apply is counted below
	}
	logged, err := db.redoPackRanges(num)
	if err != nil {
		return nil // the redo logs cannot be read: this pack is left alone
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT pack_off, pack_len FROM objects WHERE pack = ? AND pack != 0 ORDER BY pack_off`, num)
	if err != nil {
		return fmt.Errorf("pack %x: %w", num, err)
	}
	var live []cas.PackRange
	for rows.Next() {
		var r cas.PackRange
		if err := rows.Scan(&r.Off, &r.Len); err != nil {
			rows.Close()
			return err
		}
		live = append(live, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(logged) > 0 {
		live = append(live, logged...)
		slices.SortFunc(live, func(a, b cas.PackRange) int { return cmp.Compare(a.Off, b.Off) })
	}
	if len(live) == 0 {
		if err := db.packs.RemovePack(num); err != nil {
			return fmt.Errorf("remove dead pack %x: %w", num, err)
		}
		rep.PacksRemoved++
		return nil
	}
	// Punch the gaps between live ranges and after the last one. A gap
	// already punched costs one cheap call; ranges that overlap (a hostile
	// store) leave the gap empty.
	var at int64
	punch := func(end int64) error {
		if end <= at {
			return nil
		}
		return cas.PunchHole(f, at, end-at)
	}
	for _, r := range live {
		if err := punch(r.Off); err != nil {
			if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EOPNOTSUPP) {
				return nil
			}
			return fmt.Errorf("compact pack %x: %w", num, err)
		}
		at = max(at, r.Off+r.Len)
	}
	if err := punch(st.Size()); err != nil && !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("compact pack %x: %w", num, err)
	}
	return nil
}

// syncStoreFiles fsyncs the store's WAL and main file. An fsync of the WAL
// covers every frame committed before it, by any connection or process;
// frames already checkpointed are in the main file, which SQLite synced
// after the checkpoint, and is synced again here for good measure.
func syncStoreFiles(path string) error {
	for _, p := range []string{path + "-wal", path} {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sync store: %w", err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("sync store %s: %w", p, err)
		}
	}
	return nil
}
