package journal

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/artrt/art/cas"
)

// Problem is one piece of damage found by Verify.
type Problem struct {
	What   string   `json:"what"` // "object", "chain", "snapshot", "projection"
	Object string   `json:"object,omitempty"`
	Branch string   `json:"branch,omitempty"`
	Seq    int64    `json:"seq,omitempty"`
	Detail string   `json:"detail"`
	Paths  []string `json:"paths,omitempty"` // states and paths that depend on the damaged object (the first maxAffected)
	// Affected counts the distinct paths that depend on it (Paths holds
	// the first few); States names the branches and snapshots they are in.
	Affected int      `json:"affected,omitempty"`
	States   []string `json:"states,omitempty"`
	// Objects lists the objects a damaged pack held ("pack" problems),
	// and Bytes their stored size.
	Objects []string `json:"objects,omitempty"`
	Bytes   int64    `json:"bytes,omitempty"`

	seen map[string]bool // paths counted in Affected
}

// addPath records that where (a "STATE:PATH" label) depends on p.
func (p *Problem) addPath(where string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if p.seen[where] {
		return
	}
	p.seen[where] = true
	p.Affected++
	if len(p.Paths) < maxAffected {
		p.Paths = append(p.Paths, where)
	}
	state, _, _ := strings.Cut(where, ":")
	if !slices.Contains(p.States, state) && len(p.States) < maxAffected {
		p.States = append(p.States, state)
	}
}

// VerifyReport is the result of Verify.
type VerifyReport struct {
	Objects   int       `json:"objects"`
	Events    int       `json:"events"`
	Branches  int       `json:"branches"`
	Snapshots int       `json:"snapshots"`
	Rebuilt   []string  `json:"rebuilt,omitempty"` // branches whose projection was replaced by the journal's state
	Problems  []Problem `json:"problems"`
}

// OK reports whether nothing is damaged.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Rebuild replays every branch's whole chain and compares the result
	// with its live projection; a projection that disagrees is replaced
	// by the journal's state (the journal is the source of truth).
	Rebuild bool
	// Progress, when set, is called as objects are checked.
	Progress func(done, total int)
}

const maxAffected = 8

// Verify re-hashes every object, re-checks every hash chain and snapshot,
// and walks every recorded state to find missing objects and to name the
// paths that damaged objects affect. Damage is reported, not returned as
// an error; the error is for failures to read at all.
func (db *DB) Verify(ctx context.Context, opts VerifyOptions) (*VerifyReport, error) {
	if opts.Rebuild && db.readOnly {
		return nil, fmt.Errorf("verify --rebuild replays each branch into a scratch projection in the store: %w", ErrReadOnly)
	}
	rep := &VerifyReport{Problems: []Problem{}}
	bad := map[cas.ID]*Problem{}

	// 0. Packs: one problem per pack that is missing or shorter than its
	// rows say, holding every object in it (a store copied without its
	// .packs directory is one line per pack, not one per chunk).
	packBad, err := db.verifyPacks(ctx)
	if err != nil {
		return nil, err
	}

	// 1. Objects.
	var ids []cas.ID
	if err := db.objs.Each(ctx, func(id cas.ID, _ cas.Kind) error { ids = append(ids, id); return nil }); err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	for i, id := range ids {
		if err := db.objs.Verify(ctx, id); err != nil {
			if p := db.inBadPack(ctx, id, packBad); p != nil {
				bad[id] = p
				p.Objects = append(p.Objects, id.String())
			} else {
				bad[id] = &Problem{What: "object", Object: id.String(), Detail: err.Error()}
			}
		}
		if opts.Progress != nil && (i%1024 == 0 || i == len(ids)-1) {
			opts.Progress(i+1, len(ids))
		}
	}
	rep.Objects = len(ids)

	// 2. Chains and snapshots.
	type br struct {
		id             int64
		name           string
		headSeq, count int64
		head           cas.ID
		deleted        bool
	}
	var branches []br
	rows, err := db.r.QueryContext(ctx, `SELECT id, coalesce(name, ''), head_seq, head_hash, event_count, deleted_ns IS NOT NULL FROM branches ORDER BY id`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var b br
		var h []byte
		if err := rows.Scan(&b.id, &b.name, &b.headSeq, &h, &b.count, &b.deleted); err != nil {
			rows.Close()
			return nil, err
		}
		copy(b.head[:], h)
		branches = append(branches, b)
	}
	rows.Close()
	roots := map[cas.ID]string{} // state root -> a label for reports
	manifests := map[cas.ID]string{}
	for _, b := range branches {
		label := b.name
		if label == "" {
			label = fmt.Sprintf("(deleted branch %d)", b.id)
		}
		if !b.deleted {
			rep.Branches++
		}
		n, err := db.verifyChain(ctx, b.id, label, b.head, b.headSeq, b.count, rep, roots, manifests)
		if err != nil {
			return nil, err
		}
		rep.Events += n
	}
	snaps, err := db.snapshots(ctx, "")
	if err != nil {
		return nil, err
	}
	rep.Snapshots = len(snaps)
	for _, s := range snaps {
		var payloadHash, root []byte
		var branch int64
		var kind int
		err := db.r.QueryRowContext(ctx, `SELECT hash, root, branch, kind FROM events WHERE seq = ?`, s.Seq).Scan(&payloadHash, &root, &branch, &kind)
		switch {
		case err == sql.ErrNoRows:
			rep.Problems = append(rep.Problems, Problem{What: "snapshot", Object: s.ID.String(), Seq: s.Seq, Detail: "its event is missing"})
		case err != nil:
			return nil, err
		case EventKind(kind) != EvSnapshot || branch != s.BranchID || !bytes.Equal(payloadHash, s.ID[:]) || !bytes.Equal(root, s.Root[:]):
			rep.Problems = append(rep.Problems, Problem{What: "snapshot", Object: s.ID.String(), Seq: s.Seq, Detail: "does not match its event"})
		}
		var idx int64
		if err := db.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events WHERE branch = ?1 AND seq <= ?2)
			+ (SELECT coalesce(sum(count), 0) FROM forgotten WHERE branch = ?1 AND to_seq < ?2)`, s.BranchID, s.Seq).Scan(&idx); err != nil {
			return nil, err
		}
		if idx != s.EventCount {
			rep.Problems = append(rep.Problems, Problem{What: "snapshot", Object: s.ID.String(), Seq: s.Seq,
				Detail: fmt.Sprintf("chain has %d events up to it, snapshot recorded %d (events removed?)", idx, s.EventCount)})
		}
		roots[s.Root] = "snapshot " + s.ID.Short()
	}

	// 3. Live heads, then reachability of every recorded state.
	for _, b := range branches {
		if b.deleted || b.name == "" {
			continue
		}
		st, err := db.Head(ctx, b.name)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{What: "projection", Branch: b.name, Detail: err.Error()})
			continue
		}
		roots[st.Root] = "branch " + b.name
		if opts.Rebuild {
			if err := db.rebuild(ctx, b.id, b.name, b.headSeq, rep); err != nil {
				return nil, err
			}
		}
	}
	w := walker{db: db, ctx: ctx, bad: bad, seen: map[cas.ID]bool{}, rep: rep}
	labels := make([]cas.ID, 0, len(roots))
	for r := range roots {
		labels = append(labels, r)
	}
	sort.Slice(labels, func(i, j int) bool { return roots[labels[i]] < roots[labels[j]] })
	for _, r := range labels {
		w.tree(r, roots[r]+":", cas.KindTree)
	}
	for m, label := range manifests {
		w.manifest(m, label)
	}
	done := map[*Problem]bool{} // a pack's problem stands for all its objects
	for _, p := range bad {
		if !done[p] {
			done[p] = true
			rep.Problems = append(rep.Problems, *p)
		}
	}
	for _, p := range packBad {
		if !done[p] { // its objects were not damaged after all (rows beyond the end none of which is read)
			rep.Problems = append(rep.Problems, *p)
		}
	}
	sort.SliceStable(rep.Problems, func(i, j int) bool {
		a, b := rep.Problems[i], rep.Problems[j]
		if a.What != b.What {
			return a.What < b.What
		}
		return a.Object < b.Object
	})
	return rep, nil
}

// packExtent is what the rows of one pack name.
type packExtent struct {
	objects   int
	end, size int64 // the end of the last range named; the stored bytes named
}

// verifyPacks returns a problem for every pack the objects table names
// that is missing, not a regular file, or shorter than the ranges its rows
// name.
func (db *DB) verifyPacks(ctx context.Context) (map[int64]*Problem, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT pack, count(*), max(pack_off + pack_len), sum(pack_len) FROM objects WHERE pack != 0 GROUP BY pack`)
	if err != nil {
		return nil, fmt.Errorf("list packs: %w", err)
	}
	named := map[int64]packExtent{}
	var nums []int64
	for rows.Next() {
		var num int64
		var e packExtent
		if err := rows.Scan(&num, &e.objects, &e.end, &e.size); err != nil {
			rows.Close()
			return nil, err
		}
		named[num] = e
		nums = append(nums, num)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := map[int64]*Problem{}
	if len(nums) == 0 {
		return out, nil
	}
	dirGone := ""
	if _, err := os.Lstat(db.packs.Dir()); err != nil {
		dirGone = fmt.Sprintf("the pack directory %s is missing (%v)", db.packs.Dir(), errors.Unwrap(err))
		if errors.Is(err, fs.ErrNotExist) {
			dirGone = fmt.Sprintf("the pack directory %s is missing", db.packs.Dir())
		}
	}
	for _, num := range nums {
		e := named[num]
		var detail string
		switch size, err := db.packs.Size(num); {
		case dirGone != "":
			detail = fmt.Sprintf("missing: %s; %d objects were in it", dirGone, e.objects)
		case errors.Is(err, fs.ErrNotExist):
			detail = fmt.Sprintf("missing from %s; %d objects were in it", db.packs.Dir(), e.objects)
		case err != nil:
			detail = fmt.Sprintf("unreadable: %v; %d objects are in it", err, e.objects)
		case size < e.end:
			var past int
			if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM objects WHERE pack = ? AND pack != 0 AND pack_off + pack_len > ?`, num, size).Scan(&past); err != nil {
				return nil, err
			}
			detail = fmt.Sprintf("short: holds %d bytes, its rows name %d; %d of its %d objects lie past its end", size, e.end, past, e.objects)
		default:
			continue
		}
		out[num] = &Problem{What: "pack", Object: cas.PackName(num), Bytes: e.size, Detail: detail}
	}
	return out, nil
}

// inBadPack returns the problem of the damaged pack that holds object id
// past the pack's end (or anywhere in it, if it is missing), or nil.
func (db *DB) inBadPack(ctx context.Context, id cas.ID, packBad map[int64]*Problem) *Problem {
	if len(packBad) == 0 {
		return nil
	}
	var pack int64
	if db.r.QueryRowContext(ctx, `SELECT pack FROM objects WHERE id = ?`, id[:]).Scan(&pack) != nil {
		return nil
	}
	return packBad[pack]
}

// gap is a stretch of a chain art forget removed (table forgotten).
type gap struct {
	from, to, count   int64
	firstPrev, lastID cas.ID
}

func (db *DB) gaps(ctx context.Context, branch int64) ([]gap, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT from_seq, to_seq, count, first_prev, last_hash FROM forgotten WHERE branch = ? ORDER BY from_seq`, branch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []gap
	for rows.Next() {
		var g gap
		var fp, lh []byte
		if err := rows.Scan(&g.from, &g.to, &g.count, &fp, &lh); err != nil {
			return nil, err
		}
		copy(g.firstPrev[:], fp)
		copy(g.lastID[:], lh)
		out = append(out, g)
	}
	return out, rows.Err()
}

func (db *DB) verifyChain(ctx context.Context, branch int64, label string, head cas.ID, headSeq, count int64,
	rep *VerifyReport, roots, manifests map[cas.ID]string) (int, error) {
	gaps, err := db.gaps(ctx, branch)
	if err != nil {
		return 0, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT seq, op, kind, time_ns, path, root, payload, prev, hash FROM events WHERE branch = ? ORDER BY seq`, branch)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var prev cas.ID
	var n, live int64
	var last int64
	fail := func(seq int64, detail string) {
		rep.Problems = append(rep.Problems, Problem{What: "chain", Branch: label, Seq: seq, Detail: detail})
	}
	// skipGaps steps the chain over the stretches art forget removed
	// before seq: each must start where the chain is and ends at its
	// recorded last hash. The event after a gap must record a root, or
	// its state could not be replayed.
	skipGaps := func(seq int64) bool {
		crossed := false
		for len(gaps) > 0 && gaps[0].to < seq {
			g := gaps[0]
			gaps = gaps[1:]
			if g.firstPrev != prev || g.from <= last {
				fail(g.from, "a forgotten stretch of the chain does not join the events before it")
			}
			prev, last, n, crossed = g.lastID, g.to, n+g.count, true
		}
		return crossed
	}
	for rows.Next() {
		var seq, op, timeNS int64
		var kind int
		var path, root, payload, p, h []byte
		if err := rows.Scan(&seq, &op, &kind, &timeNS, &path, &root, &payload, &p, &h); err != nil {
			return int(live), err
		}
		if skipGaps(seq) && root == nil {
			fail(seq, "the event after a forgotten stretch records no root to replay from")
		}
		n++
		live++
		last = seq
		if !bytes.Equal(p, prev[:]) {
			fail(seq, "previous-hash link broken (an event was removed, reordered or altered)")
		}
		want := chainHash(cas.ID(p), seq, payload)
		if !bytes.Equal(h, want[:]) {
			fail(seq, "event hash does not match its contents")
		}
		copy(prev[:], h)
		ev, err := DecodeEvent(payload)
		if err != nil {
			fail(seq, err.Error())
			continue
		}
		if ev.Branch != branch || ev.Op != op || int(ev.Kind) != kind || ev.Time != timeNS || !bytes.Equal(rootColumn(ev), root) ||
			(isPathEvent(ev.Kind) && !bytes.Equal(ev.Path, path)) {
			fail(seq, "event columns disagree with its hashed payload")
		}
		// An ancestry edge points back in time (DB.MergeBase walks them).
		if (ev.Kind == EvBranch || ev.Kind == EvMerge) && ev.FromSeq >= seq {
			fail(seq, fmt.Sprintf("%s event names a source @%d that is not older than itself", ev.Kind, ev.FromSeq))
		}
		if ev.Kind == EvMerge && (ev.FromBranch <= 0 || ev.FromSeq <= 0) {
			fail(seq, "merge event names no source state")
		}
		if !ev.Root.IsZero() {
			if _, ok := roots[ev.Root]; !ok {
				roots[ev.Root] = fmt.Sprintf("%s@%d", label, seq)
			}
		}
		if ev.Kind == EvWrite || ev.Kind == EvWriteData || (ev.Kind == EvCreate && ev.Attr.Kind == cas.EntryFile) {
			manifests[ev.Attr.Content] = fmt.Sprintf("%s@%d:%s", label, seq, ev.Path)
		}
	}
	if err := rows.Err(); err != nil {
		return int(live), err
	}
	skipGaps(headSeq + 1)
	if len(gaps) > 0 {
		fail(gaps[0].from, "a forgotten stretch lies past the branch head")
	}
	if n != count {
		fail(last, fmt.Sprintf("branch records %d events, chain has %d (truncated?)", count, n))
	}
	if prev != head || last != headSeq {
		fail(last, "branch head does not match the last event of its chain")
	}
	return int(live), nil
}

// rebuild replays branch's whole chain and compares the result with the
// live projection, re-encoded from its rows: the tree ids cached in clean
// directories are not trusted, or damage below them would go unseen.
func (db *DB) rebuild(ctx context.Context, branch int64, name string, headSeq int64, rep *VerifyReport) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		root, err := db.materializeTx(ctx, tx, branch, headSeq, true)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{What: "chain", Branch: name, Detail: "replay: " + err.Error()})
			return nil
		}
		var next int64
		if err := tx.QueryRowContext(ctx, `SELECT next_ino FROM branches WHERE id = ?`, branch).Scan(&next); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET state = ? WHERE branch = ? AND state = ?`, dirDirty, branch, dirClean); err != nil {
			return err
		}
		p := newProj(ctx, tx, db.objs, branch, next, db.now())
		defer p.close()
		live, err := p.computeRoot()
		if err == nil && live == root {
			return nil
		}
		detail := fmt.Sprintf("live tree %s differs from the journal's replay %s", live.Short(), root.Short())
		if err != nil {
			detail = fmt.Sprintf("live tree unreadable (%v)", err)
		}
		rep.Problems = append(rep.Problems, Problem{What: "projection", Branch: name,
			Detail: detail + "; projection rebuilt from the journal"})
		rep.Rebuilt = append(rep.Rebuilt, name)
		if err := p.reset(root); err != nil {
			return err
		}
		// reset loads the directories of hard-linked files, allocating inodes.
		_, err = tx.ExecContext(ctx, `UPDATE branches SET next_ino = ? WHERE id = ?`, p.nextIno, branch)
		return err
	})
}

// walker visits trees and manifests once each, attributing damage to paths.
type walker struct {
	db   *DB
	ctx  context.Context
	bad  map[cas.ID]*Problem
	seen map[cas.ID]bool
	rep  *VerifyReport
}

func (w *walker) affected(id cas.ID, kind cas.Kind, where string, err error) bool {
	p, ok := w.bad[id]
	if !ok && err == nil {
		return false
	}
	if !ok {
		p = &Problem{What: "object", Object: id.String(), Detail: fmt.Sprintf("%s: %v", kind, err)}
		w.bad[id] = p
	}
	p.addPath(where)
	return true
}

func (w *walker) tree(id cas.ID, where string, kind cas.Kind) {
	if _, isBad := w.bad[id]; !isBad && w.seen[id] {
		return
	}
	w.seen[id] = true
	t, err := w.db.objs.GetTree(w.ctx, id)
	if w.affected(id, kind, where, err) || t == nil {
		return
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		p := where + string(e.Name)
		switch e.Kind {
		case cas.EntryDir:
			w.tree(e.Target, p+"/", cas.KindTree)
		case cas.EntryFile:
			w.manifest(e.Target, p)
		}
	}
}

func (w *walker) manifest(id cas.ID, where string) {
	if _, isBad := w.bad[id]; !isBad && w.seen[id] {
		return
	}
	w.seen[id] = true
	m, err := w.db.objs.GetManifest(w.ctx, id)
	if w.affected(id, cas.KindManifest, where, err) || m == nil {
		return
	}
	for _, x := range m.Extents {
		if x.ID.IsZero() {
			continue
		}
		if p, ok := w.bad[x.ID]; ok {
			p.addPath(where)
			continue
		}
		if w.seen[x.ID] {
			continue
		}
		w.seen[x.ID] = true
		if ok, err := w.db.objs.Has(w.ctx, x.ID); err != nil || !ok {
			if err == nil {
				err = cas.ErrNotFound
			}
			w.affected(x.ID, cas.KindChunk, where, err)
		}
	}
}
