package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote/s3api"
)

// Garbage collection of a remote (docs/remotes.md, "Garbage collection").
//
// A store file is collected by journal.DB.GC: marking and sweeping run in
// one write transaction, and a push whose Has answers predate a completed
// gc is refused by MoveBranch (journal.ErrGCRaced) and retried by Push.
//
// S3 has no locks, so a round has two phases, separated by a grace period:
//
//  1. Mark: read every ref (and, with History, its most recent earlier
//     roots), walk the trees and manifests under them (fetched, verified),
//     keep the packs that are mostly live (see gcMark), copy the live
//     objects of the others into new packs, then create the round marker
//     PREFIX/packs/gc.json (If-None-Match: *, so one round at a time)
//     naming the condemned packs. From then on every reader treats objects
//     found only in condemned packs as absent (Has false, never a delta
//     base): new pushes send them again rather than refer to them.
//  2. Delete, once the marker is older than the grace period by the
//     server's clock: read the refs again, then list the packs, and walk
//     from the refs and from every pack written since the mark; an object
//     needed there that only a condemned pack holds saves that pack (the
//     "rescue", with the saved pack's own objects walked in turn). The
//     marker is rewritten (If-Match) with the final list, claiming the
//     deletion; then each condemned pack's index is deleted, then its
//     pack, and the marker last.
//
// Writers keep their side of the bargain in S3Remote.checkMarker: a pack
// or a ref is written only within markerWindow of a look at the marker
// that found no round the writer did not know when it loaded the index.
// With grace > markerWindow, every write that trusted a condemned pack
// happened before phase 2 listed the packs and read the refs.

// gcMarkerName is the round marker's key under PREFIX. It lives under
// packs/ so that the listing a push or pull makes anyway finds it.
const gcMarkerName = "packs/gc.json"

// minOrphanAge is the least age of a .pack without an index before gc
// deletes it (a variable for tests).
var minOrphanAge = time.Hour

// maxMarker bounds the marker's size (pack names are 70 bytes each in it).
const maxMarker = 64 << 20

// gcMarker is the JSON of the round marker.
type gcMarker struct {
	Version int    `json:"version"`
	Round   string `json:"round"`
	// State is "marked" (phase 1 done), "deleting" (phase 2 claimed the
	// deletion of Condemned, which no longer changes) or "done" (the round
	// is over; the marker stays so that its ETag changes with every round
	// and a writer can tell that one happened since it looked).
	State     string   `json:"state"`
	History   int      `json:"history"`
	Condemned []string `json:"condemned"`
	// Orphans are .pack objects without an index, older than the grace
	// and than minOrphanAge at the mark (an interrupted push or gc): only
	// the .pack is deleted.
	Orphans []string `json:"orphans,omitempty"`
	// Kept are the packs the mark found closed: every object in them is
	// live and held in a kept pack, with its delta base.
	Kept []string `json:"kept"`
}

func (m *gcMarker) condemnedSet() map[string]bool {
	out := make(map[string]bool, len(m.Condemned))
	for _, n := range m.Condemned {
		out[n] = true
	}
	return out
}

// unwritable is the set of pack names a writer under m's round must not
// write (S3Remote.avoid): the packs it condemns and its orphans, which
// the round deletes.
func (m *gcMarker) unwritable() map[string]bool {
	out := m.condemnedSet()
	for _, n := range m.Orphans {
		out[n] = true
	}
	return out
}

func validPackName(n string) bool {
	b, err := hex.DecodeString(n)
	return err == nil && len(b) == len(cas.ID{})
}

// readMarker reads the round marker: (nil, "", nil) when there is none.
func (s *S3Remote) readMarker(ctx context.Context) (*gcMarker, string, error) {
	key := s.key(gcMarkerName)
	b, etag, err := s.get(ctx, key, maxMarker)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", s.where(key), err)
	}
	if b == nil {
		return nil, "", nil
	}
	var m gcMarker
	if err := json.Unmarshal(b, &m); err != nil || m.Version != 1 || (m.State != "marked" && m.State != "deleting" && m.State != "done") {
		return nil, "", fmt.Errorf("%w: %s: not a version 1 gc marker", ErrMalformed, s.where(key))
	}
	for _, list := range [][]string{m.Condemned, m.Orphans, m.Kept} {
		for _, n := range list {
			if !validPackName(n) {
				return nil, "", fmt.Errorf("%w: %s names pack %q", ErrMalformed, s.where(key), n)
			}
		}
	}
	if etag == "" {
		etag = "-"
	}
	return &m, etag, nil
}

// writeMarker creates the marker (etag "") or replaces the version read
// (etag). A lost race is ErrRefChanged.
func (s *S3Remote) writeMarker(ctx context.Context, m *gcMarker, etag string) (string, error) {
	key := s.key(gcMarkerName)
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	opts := s3api.PutOptions{ContentType: "application/json"}
	if etag == "" {
		opts.IfNoneMatch = true
	} else {
		opts.IfMatch = etag
	}
	info, err := s.c.PutObject(ctx, s.bucket, key, b, opts)
	if err != nil {
		if s3api.IsPreconditionFailed(err) {
			return "", fmt.Errorf("write %s: %w (another gc is running)", s.where(key), ErrRefChanged)
		}
		return "", fmt.Errorf("write %s: %w", s.where(key), err)
	}
	return info.ETag, nil
}

// markerAge is how long ago, by the server's clock, the marker was
// written: its Last-Modified against the Date of the same response.
func (s *S3Remote) markerAge(ctx context.Context) (time.Duration, error) {
	key := s.key(gcMarkerName)
	info, err := s.c.StatObject(ctx, s.bucket, key)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", s.where(key), err)
	}
	now := s.clock.last.Load()
	if now == nil {
		return 0, nil // no Date header: never old enough without --wait
	}
	return max(now.Sub(info.LastModified), 0), nil
}

// GCOptions configure GC.
type GCOptions struct {
	// DryRun reports what a round would condemn; nothing is written.
	DryRun bool
	// Grace is how long a round's marker must be old before its packs
	// are deleted (S3), or protects recently written objects (a store
	// file, see journal.GCOptions).
	Grace time.Duration
	// Wait makes GC wait out the grace period of the round it starts (or
	// finds) and finish it, instead of leaving phase 2 to a later run.
	Wait bool
	// History keeps, for each ref, its History most recent earlier roots
	// live too (S3; a store file keeps every recorded state).
	History int
	// Progress, when set, is called as phases advance.
	Progress func(phase string, done, total int)

	// stop, set by tests only, is called after each named step; an error
	// ends GC there, as a kill would.
	stop func(step string) error
}

// GCReport is the result of GC.
type GCReport struct {
	Remote        string `json:"remote"`
	DryRun        bool   `json:"dry_run"`
	ObjectsBefore int64  `json:"objects_before"`
	ObjectsAfter  int64  `json:"objects_after"`
	PacksBefore   int    `json:"packs_before"` // S3: packs with an index
	PacksAfter    int    `json:"packs_after"`
	BytesBefore   int64  `json:"bytes_before"` // S3: packs and indexes; file: stored object bytes
	BytesAfter    int64  `json:"bytes_after"`
	Live          int64  `json:"live"` // objects the refs need
	// Rewritten: packs written to hold the live objects of condemned
	// packs, and those objects.
	Rewritten        int   `json:"rewritten"`
	RewrittenObjects int64 `json:"rewritten_objects"`
	// Condemned: packs this run's new round marked for deletion.
	Condemned      int   `json:"condemned"`
	CondemnedBytes int64 `json:"condemned_bytes"`
	// Rescued: condemned packs phase 2 kept because a ref or a newer pack
	// needed an object only they held.
	Rescued int `json:"rescued"`
	// Deleted: packs (and orphan .pack objects) phase 2 deleted; for a
	// store file, objects.
	Deleted      int   `json:"deleted"`
	DeletedBytes int64 `json:"deleted_bytes"`
	// Pending is set when a round waits for its grace period: the seconds
	// left before a gc can finish it.
	Pending        bool    `json:"pending"`
	PendingSeconds float64 `json:"pending_seconds,omitempty"`
	Seconds        float64 `json:"seconds"`
	// File is the store file's own report (store-file remotes).
	File *journal.GCReport `json:"file,omitempty"`
}

// GC collects the objects of r that no ref needs (see the comment at the
// top of this file). r must have been opened writable.
func GC(ctx context.Context, r Remote, opts GCOptions) (*GCReport, error) {
	switch r := r.(type) {
	case *FileRemote:
		return r.gc(ctx, opts)
	case *S3Remote:
		return r.gc(ctx, opts)
	}
	return nil, fmt.Errorf("gc: %T cannot be collected", r)
}

func (f *FileRemote) gc(ctx context.Context, opts GCOptions) (*GCReport, error) {
	jr, err := f.db.GC(ctx, journal.GCOptions{DryRun: opts.DryRun, Grace: opts.Grace, Progress: opts.Progress})
	if err != nil {
		return nil, fmt.Errorf("gc %s: %w", f.db.Path(), err)
	}
	return &GCReport{Remote: f.db.Path(), DryRun: jr.DryRun, ObjectsBefore: jr.ObjectsBefore, ObjectsAfter: jr.ObjectsAfter,
		BytesBefore: jr.BytesBefore, BytesAfter: jr.BytesAfter, Live: jr.Reachable,
		Deleted: int(jr.Removed), DeletedBytes: jr.RemovedBytes, Seconds: jr.Seconds, File: jr}, nil
}

// gcEnt is one index entry, as gc needs it.
type gcEnt struct {
	id     cas.ID
	kind   cas.Kind
	codec  uint8
	base   cas.ID
	length int64
}

// gcView is every pack of the remote with its entries.
type gcView struct {
	ents map[string][]gcEnt
}

// gcLoad reads every pack index afresh (and the marker), keeping the
// entries of each pack.
func (s *S3Remote) gcLoad(ctx context.Context) (*gcView, error) {
	s.reset()
	v := &gcView{ents: map[string][]gcEnt{}}
	var perr error
	s.perPack = func(name string, idx []byte) {
		var ents []gcEnt
		err := parseIndex(idx, func(id cas.ID, e packEntry) {
			ents = append(ents, gcEnt{id: id, kind: e.kind, codec: e.codec, base: e.base, length: e.length})
		})
		if err != nil && perr == nil {
			perr = err
		}
		v.ents[name] = ents
	}
	defer func() { s.perPack = nil }()
	if err := s.loadIndex(ctx); err != nil {
		return nil, err
	}
	return v, perr
}

func (s *S3Remote) gcStep(opts GCOptions, step string) error {
	if opts.stop != nil {
		return opts.stop(step)
	}
	return nil
}

func (s *S3Remote) gc(ctx context.Context, opts GCOptions) (*GCReport, error) {
	start := time.Now()
	rep := &GCReport{Remote: s.URL(), DryRun: opts.DryRun}
	defer func() { rep.Seconds = time.Since(start).Seconds() }()
	progress := func(phase string, done, total int) {
		if opts.Progress != nil {
			opts.Progress(phase, done, total)
		}
	}
	v, err := s.gcLoad(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	count := func() (packs int, objects, size int64) {
		for name, p := range s.packs {
			packs++
			size += p.packBytes + p.idxBytes
			objects += int64(len(v.ents[name]))
		}
		for _, p := range s.orphans {
			size += p.packBytes
		}
		return
	}
	rep.PacksBefore, rep.ObjectsBefore, rep.BytesBefore = count()
	after := func() error {
		if opts.DryRun {
			return nil
		}
		var err error
		if v, err = s.gcLoad(ctx); err != nil {
			return err
		}
		rep.PacksAfter, rep.ObjectsAfter, rep.BytesAfter = count()
		return nil
	}
	// An earlier round first: finish it if its grace is over.
	m, etag, err := s.readMarker(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	if m != nil && m.State != "done" {
		done, err := s.gcFinish(ctx, m, etag, time.Time{}, opts, rep, progress)
		if err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
		if !done || opts.DryRun {
			rep.PacksAfter, rep.ObjectsAfter, rep.BytesAfter = rep.PacksBefore, rep.ObjectsBefore, rep.BytesBefore
			return rep, nil
		}
		if _, etag, err = s.readMarker(ctx); err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
	}
	// A new round: mark. prev is the ETag of the finished round's marker
	// ("" for none), which the new marker replaces.
	prev := etag
	m, err = s.gcMark(ctx, opts, rep, progress)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	if m == nil || opts.DryRun {
		if opts.DryRun {
			rep.PacksAfter, rep.ObjectsAfter, rep.BytesAfter = rep.PacksBefore, rep.ObjectsBefore, rep.BytesBefore
			return rep, nil
		}
		return rep, after()
	}
	if etag, err = s.writeMarker(ctx, m, prev); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	marked := time.Now()
	if err := s.gcStep(opts, "marker"); err != nil {
		return rep, err
	}
	if opts.Grace == 0 || opts.Wait {
		if _, err := s.gcFinish(ctx, m, etag, marked, opts, rep, progress); err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
	} else {
		rep.Pending, rep.PendingSeconds = true, opts.Grace.Seconds()
	}
	return rep, after()
}

// roots are the trees the refs need: each ref's root and its history
// most recent earlier roots.
func (s *S3Remote) gcRoots(ctx context.Context, history int) ([]cas.ID, error) {
	refs, err := s.Refs(ctx)
	if err != nil {
		return nil, err
	}
	var roots []cas.ID
	for _, r := range refs {
		roots = append(roots, r.Root)
		roots = append(roots, r.History[:min(history, len(r.History))]...)
	}
	return roots, nil
}

// gcMark runs phase 1 up to (not including) writing the marker: it
// returns the marker to write, nil when there is nothing to collect.
//
// Which packs stay: a pack with live objects whose dead objects are at
// most a quarter of its bytes (rewriting it would cost more than it
// frees). Every object in a pack that stays remains visible to Has, so
// its closure (children, and the delta base of a delta, with the base's
// closure) is retained too: the retained set is the live set plus the
// closure of everything in the kept packs. Retained objects that no kept
// pack holds are copied into new packs; every other pack is condemned.
func (s *S3Remote) gcMark(ctx context.Context, opts GCOptions, rep *GCReport, progress func(string, int, int)) (*gcMarker, error) {
	// The refs first, then the packs: a ref read names objects sent
	// before it moved, so the listing that follows has them.
	roots, err := s.gcRoots(ctx, opts.History)
	if err != nil {
		return nil, err
	}
	v, err := s.gcLoad(ctx)
	if err != nil {
		return nil, err
	}
	lm := s.newMarkWalk(progress)
	if err := lm.walk(ctx, v, roots); err != nil {
		return nil, err
	}
	live := lm.w.Seen
	rep.Live = int64(len(live))
	if err := s.gcStep(opts, "mark"); err != nil {
		return nil, err
	}
	names := sortedPacks(v.ents)
	kept, retained, err := s.gcRetain(ctx, v, names, lm, progress)
	if err != nil {
		return nil, err
	}
	plan := planMarker(markInput{names: names, ents: v.ents, kept: kept, retained: retained, packs: s.packs, orphans: s.orphans,
		now: s.clock.last.Load(), grace: opts.Grace, round: randomHex(), history: opts.History})
	for _, id := range plan.copy {
		if _, ok := s.loc(id); !ok {
			return nil, &ObjectError{ID: id, Err: fmt.Errorf("%w on the remote (nothing collected)", cas.ErrNotFound)}
		}
	}
	rep.CondemnedBytes += plan.condemnedBytes
	rep.Condemned = plan.condemned()
	if rep.Condemned == 0 {
		return nil, nil
	}
	m := plan.marker
	if opts.DryRun {
		rep.RewrittenObjects = int64(len(plan.copy))
		return m, nil
	}
	// A copy must not bear the name of a pack this round condemns: a
	// condemned pack whose objects are all retained (kept packs' dead
	// objects need them, though few are live) is copied in its own order,
	// byte for byte, and the deletion would then take the copy too.
	if s.avoid == nil {
		s.avoid = map[string]bool{}
	}
	maps.Copy(s.avoid, m.unwritable())
	newPacks, err := s.gcCopy(ctx, plan.copy, retained, opts, rep, progress)
	if err != nil {
		return nil, err
	}
	m.Kept = append(m.Kept, newPacks...)
	sort.Strings(m.Kept)
	return m, nil
}

// markWalk is gc's walk: trees and manifests are fetched and verified,
// chunks are leaves whose presence is checked.
type markWalk struct {
	w *cas.Walker
	// lenient is nil during the walk from the roots given; then it holds
	// the ids walked as their index kind only (see walk), which are
	// allowed not to decode as that kind.
	lenient map[cas.ID]cas.Kind
}

func (s *S3Remote) newMarkWalk(progress func(string, int, int)) *markWalk {
	m := &markWalk{}
	m.w = &cas.Walker{Batch: fetchBatch,
		Load: fetchLoaderLenient(s, nil, nil, func(r cas.Ref) bool {
			k, ok := m.lenient[r.ID]
			return ok && k == r.Kind
		}),
		Progress: func(n int) { progress("mark", n, 0) },
		Visit: func(_ context.Context, refs []cas.Ref) ([]bool, error) {
			load := make([]bool, len(refs))
			for i, r := range refs {
				if m.lenient != nil {
					// Under an object walked as its index kind only: what
					// is absent is no ref's (see walk); skip it.
					_, ok := s.loc(r.ID)
					load[i] = ok && r.Kind != cas.KindChunk
				} else if r.Kind != cas.KindChunk {
					load[i] = true
				} else if _, ok := s.loc(r.ID); !ok {
					return nil, &ObjectError{ID: r.ID, Kind: r.Kind, Err: fmt.Errorf("%w on the remote (a ref's state is incomplete; nothing collected)", cas.ErrNotFound)}
				}
			}
			return load, nil
		}}
	return m
}

// walk adds to m.w.Seen everything under roots (root trees) and more, and
// then everything under each object reached whose index entry (in any
// pack of v) is a manifest or tree it was not reached as. An id names
// bytes, not a kind: a chunk with a manifest's bytes is reached as a chunk
// while its entry may say manifest (it was sent as one). Has offers every
// object it holds with its closure as the kind its entry says (see
// checkClosure in the tests; a push trusts it), so that closure must stay
// too, even where no ref needs it. Those extra objects are walked
// leniently: one that does not decode as its entry's kind (a hostile
// push's) references nothing, and what is absent under them is skipped
// (no ref's state needs it).
func (m *markWalk) walk(ctx context.Context, v *gcView, roots []cas.ID, more ...cas.Ref) error {
	for _, r := range roots {
		more = append(more, cas.Ref{ID: r, Kind: cas.KindTree})
	}
	m.lenient = nil
	if err := m.w.Walk(ctx, more...); err != nil {
		return fmt.Errorf("mark: %w", objectError(err))
	}
	m.lenient = map[cas.ID]cas.Kind{}
	for {
		var extra []cas.Ref
		for _, name := range sortedPacks(v.ents) {
			for _, e := range v.ents[name] {
				if e.kind != cas.KindManifest && e.kind != cas.KindTree {
					continue
				}
				if _, ok := m.w.Seen[e.id]; ok && !m.w.ReachedAs(e.id, e.kind) {
					extra = append(extra, cas.Ref{ID: e.id, Kind: e.kind})
					m.lenient[e.id] = e.kind
				}
			}
		}
		if len(extra) == 0 {
			return nil
		}
		if err := m.w.Walk(ctx, extra...); err != nil {
			return fmt.Errorf("mark: %w", objectError(err))
		}
	}
}

// gcRetain decides which packs stay and what is retained with them.
// Every object in a pack that stays remains visible to Has, so its closure
// (children, and the delta base of a delta, with the base's closure) is
// retained too: the retained set is the live set plus the closure of
// everything in the kept packs. Keep the mostly-live packs (keepPacks) and
// retain the closure of their objects; a kept pack holding a delta whose
// base that leaves unretained is dropped (its objects are copied, that
// delta whole), which may shrink the retained set, so again. After three
// passes only packs closed as they are (closedPacks) are kept.
//
// Each pass extends a copy of the live walk lm, with the kinds it reached
// each id as: a kept manifest reached only as a chunk (an id names bytes)
// is walked as a manifest there, and its chunks are retained.
func (s *S3Remote) gcRetain(ctx context.Context, v *gcView, names []string, lm *markWalk, progress func(string, int, int)) (map[string]bool, map[cas.ID]struct{}, error) {
	live := lm.w.Seen
	dropped := map[string]bool{}
	for pass := 0; pass < 3; pass++ {
		kept := keepPacks(names, v.ents, live, dropped)
		rm := s.newMarkWalk(progress)
		rm.w.CopyReached(lm.w)
		if err := rm.walk(ctx, v, nil, keptRefs(names, v.ents, kept)...); err != nil {
			return nil, nil, err
		}
		retained := rm.w.Seen
		baseless := baselessPacks(names, v.ents, kept, retained)
		if len(baseless) == 0 {
			return kept, retained, nil
		}
		for _, name := range baseless {
			dropped[name] = true
		}
	}
	return closedPacks(names, v.ents, live), live, nil
}

// gcCopy writes the objects ids into new packs, in their stored form,
// except that a delta whose base is not live is written whole. It returns
// the new packs' names. live is the retained set.
func (s *S3Remote) gcCopy(ctx context.Context, ids []cas.ID, live map[cas.ID]struct{}, opts GCOptions, rep *GCReport, progress func(string, int, int)) ([]string, error) {
	// In pack order, so reads are ranged runs of the old packs.
	sort.Slice(ids, func(i, j int) bool {
		a, _ := s.loc(ids[i])
		b, _ := s.loc(ids[j])
		if a.pack != b.pack {
			return a.pack < b.pack
		}
		return a.offset < b.offset
	})
	var whole, stored []cas.ID
	for _, id := range ids {
		l, _ := s.loc(id)
		if _, ok := live[l.base]; l.codec == codecDelta && !ok {
			whole = append(whole, id)
		} else {
			stored = append(stored, id)
		}
	}
	var names []string
	var raws []cas.Raw
	var bases []cas.ID
	var size int64
	flush := func() error {
		if len(raws) == 0 {
			return nil
		}
		name, _, err := s.putPack(ctx, raws, bases)
		if err != nil {
			return err
		}
		names = append(names, name)
		rep.Rewritten++
		rep.RewrittenObjects += int64(len(raws))
		progress("copy", int(rep.RewrittenObjects), len(ids))
		raws, bases, size = nil, nil, 0
		return s.gcStep(opts, "copy")
	}
	add := func(r cas.Raw, base cas.ID) error {
		r.Data = append([]byte(nil), r.Data...) // fetch callbacks must not retain
		raws = append(raws, r)
		bases = append(bases, base)
		if size += int64(len(r.Data)); size >= packTarget {
			return flush()
		}
		return nil
	}
	for lo := 0; lo < len(stored); lo += fetchBatch {
		batch := stored[lo:min(lo+fetchBatch, len(stored))]
		if _, err := s.fetchStored(ctx, batch, func(r cas.Raw) error {
			var base cas.ID
			if r.Codec == codecDelta {
				l, _ := s.loc(r.ID)
				base = l.base
			}
			return add(r, base)
		}); err != nil {
			return nil, fmt.Errorf("copy: %w", err)
		}
	}
	for lo := 0; lo < len(whole); lo += fetchBatch {
		batch := whole[lo:min(lo+fetchBatch, len(whole))]
		if _, err := s.Fetch(ctx, batch, func(r cas.Raw) error {
			if _, err := cas.CheckRaw(r); err != nil {
				return &ObjectError{ID: r.ID, Kind: r.Kind, Err: err}
			}
			return add(r, cas.ID{})
		}); err != nil {
			return nil, fmt.Errorf("copy: %w", err)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return names, nil
}

func randomHex() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// gcFinish runs phase 2 of the round m (read with etag) if its grace is
// over: rescue, claim, delete. marked, when set, is when this process
// wrote m (its own monotonic clock then measures the grace). It reports
// whether the round is finished.
func (s *S3Remote) gcFinish(ctx context.Context, m *gcMarker, etag string, marked time.Time, opts GCOptions, rep *GCReport, progress func(string, int, int)) (bool, error) {
	if m.State == "marked" {
		for {
			var age time.Duration
			if !marked.IsZero() {
				age = time.Since(marked)
			} else {
				var err error
				if age, err = s.markerAge(ctx); err != nil {
					return false, err
				}
			}
			if age >= opts.Grace {
				break
			}
			if !opts.Wait {
				rep.Pending, rep.PendingSeconds = true, (opts.Grace - age).Seconds()
				return false, nil
			}
			progress("wait", int(age.Seconds()), int(opts.Grace.Seconds()))
			// The server's clock has whole seconds: wait a little past.
			t := time.NewTimer(min(opts.Grace-age+time.Second, 10*time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return false, ctx.Err()
			case <-t.C:
			}
		}
		if opts.DryRun {
			rep.Condemned = len(m.Condemned) + len(m.Orphans)
			return false, nil
		}
		var err error
		if m, etag, err = s.gcRescue(ctx, m, etag, opts, rep, progress); err != nil {
			return false, err
		}
		if m == nil {
			return false, nil // another gc claimed it
		}
	} else if opts.DryRun {
		return false, nil
	}
	// Delete: each index before its pack, so no reader finds an index
	// naming a missing pack it has not just read (Fetch reloads the
	// indexes when a pack vanishes under it); the marker is set "done"
	// last, so a kill leaves the list for the next gc.
	total := len(m.Condemned) + len(m.Orphans)
	del := func(key string) error {
		if err := s.c.RemoveObject(ctx, s.bucket, key); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete %s: %w", s.where(key), err)
		}
		return nil
	}
	sizes := s.packs
	for i, name := range m.Condemned {
		if err := del(s.key("packs/", name, ".idx")); err != nil {
			return false, err
		}
		if err := s.gcStep(opts, "delete-idx"); err != nil {
			return false, err
		}
		if err := del(s.key("packs/", name, ".pack")); err != nil {
			return false, err
		}
		rep.Deleted++
		rep.DeletedBytes += sizes[name].packBytes + sizes[name].idxBytes
		progress("delete", i+1, total)
		if err := s.gcStep(opts, "delete-pack"); err != nil {
			return false, err
		}
	}
	for _, name := range m.Orphans {
		if _, ok := s.packs[name]; ok {
			continue // it has an index now: not an orphan (see checkMarker)
		}
		if err := del(s.key("packs/", name, ".pack")); err != nil {
			return false, err
		}
		rep.Deleted++
		rep.DeletedBytes += s.orphans[name].packBytes
	}
	done := &gcMarker{Version: 1, Round: m.Round, State: "done"}
	if _, err := s.writeMarker(ctx, done, etag); err != nil && !errors.Is(err, ErrRefChanged) {
		return false, err
	}
	return true, s.gcStep(opts, "done")
}

// gcRescue is the start of phase 2: with the grace over, it reads the refs,
// then the packs, and saves every condemned pack that holds the only copy
// of an object the refs or a pack written since the mark need; it then
// claims the deletion by rewriting the marker (state "deleting"). It
// returns the claimed marker, or nil if another gc claimed it first.
func (s *S3Remote) gcRescue(ctx context.Context, m *gcMarker, etag string, opts GCOptions, rep *GCReport, progress func(string, int, int)) (*gcMarker, string, error) {
	roots, err := s.gcRoots(ctx, m.History) // before listing: see docs/remotes.md
	if err != nil {
		return nil, "", err
	}
	v, err := s.gcLoad(ctx)
	if err != nil {
		return nil, "", err
	}
	plan := newRescuePlan(v.ents, m)
	if err := s.rescueWalk(ctx, plan, roots, m.Round, progress); err != nil {
		return nil, "", err
	}
	rep.Rescued += len(plan.rescued)
	final := plan.claim(m)
	newEtag, err := s.writeMarker(ctx, final, etag)
	if errors.Is(err, ErrRefChanged) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if err := s.gcStep(opts, "claim"); err != nil {
		return nil, "", err
	}
	return final, newEtag, nil
}

// rescueWalk walks from roots and from what plan makes visible, asking
// plan about each object reached (see rescuePlan).
func (s *S3Remote) rescueWalk(ctx context.Context, plan *rescuePlan, roots []cas.ID, round string, progress func(string, int, int)) error {
	w := &cas.Walker{Batch: fetchBatch, Load: fetchLoader(s, nil, nil),
		Progress: func(n int) { progress("check", n, 0) },
		Visit: func(_ context.Context, refs []cas.Ref) ([]bool, error) {
			load := make([]bool, len(refs))
			for i, r := range refs {
				var ok bool
				if load[i], ok = plan.reach(r); !ok {
					return nil, &ObjectError{ID: r.ID, Kind: r.Kind, Err: fmt.Errorf("%w on the remote, but a ref or a pack needs it; round %s left in place", cas.ErrNotFound, round)}
				}
			}
			return load, nil
		}}
	next := plan.pending
	for _, r := range roots {
		next = append(next, cas.Ref{ID: r, Kind: cas.KindTree})
	}
	for len(next) > 0 {
		plan.pending = nil
		if err := w.Walk(ctx, next...); err != nil {
			return fmt.Errorf("rescue: %w", objectError(err))
		}
		next = plan.pending
	}
	return nil
}
