package journal

import (
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
	// 0. Packs: one problem per pack that is missing or shorter than its
	// rows say, holding every object in it (a store copied without its
	// .packs directory is one line per pack, not one per chunk).
	packBad, err := db.verifyPacks(ctx)
	if err != nil {
		return nil, err
	}
	// 1. Objects.
	bad, err := db.verifyObjects(ctx, packBad, rep, opts.Progress)
	if err != nil {
		return nil, err
	}
	// 2. Chains and snapshots, collecting every recorded state.
	st := &verifyStates{roots: map[cas.ID]string{}, manifests: map[cas.ID]string{}}
	branches, err := db.verifyBranches(ctx, rep, st)
	if err != nil {
		return nil, err
	}
	if err := db.verifySnapshots(ctx, rep, st); err != nil {
		return nil, err
	}
	// 3. Live heads, then reachability of every recorded state.
	for _, b := range branches {
		if b.deleted || b.name == "" {
			continue
		}
		head, err := db.Head(ctx, b.name)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{What: "projection", Branch: b.name, Detail: err.Error()})
			continue
		}
		st.roots[head.Root] = "branch " + b.name
		if opts.Rebuild {
			if err := db.rebuild(ctx, b.id, b.name, b.headSeq, rep); err != nil {
				return nil, err
			}
		}
	}
	if err := db.verifyReach(ctx, st, bad); err != nil {
		return nil, err
	}
	rep.Problems = collectProblems(rep.Problems, bad, packBad)
	return rep, nil
}

// verifyStates are the recorded states Verify walks: root trees and the
// manifests events name, each with a label for reports.
type verifyStates struct {
	roots     map[cas.ID]string
	manifests map[cas.ID]string
}

// verifyObjects re-hashes every object and returns the damaged ones, each
// with its problem (its pack's when it lies in a damaged pack).
func (db *DB) verifyObjects(ctx context.Context, packBad map[int64]*Problem, rep *VerifyReport, progress func(done, total int)) (map[cas.ID]*Problem, error) {
	bad := map[cas.ID]*Problem{}
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
		if progress != nil && (i%1024 == 0 || i == len(ids)-1) {
			progress(i+1, len(ids))
		}
	}
	rep.Objects = len(ids)
	return bad, nil
}

// verifyBranch is a branches row as Verify needs it.
type verifyBranch struct {
	id             int64
	name           string
	headSeq, count int64
	head           cas.ID
	deleted        bool
}

// verifyBranches checks every branch's chain (deleted ones too) and
// records the states its events name.
func (db *DB) verifyBranches(ctx context.Context, rep *VerifyReport, st *verifyStates) ([]verifyBranch, error) {
	var branches []verifyBranch
	rows, err := db.r.QueryContext(ctx, `SELECT id, coalesce(name, ''), head_seq, head_hash, event_count, deleted_ns IS NOT NULL FROM branches ORDER BY id`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var b verifyBranch
		var h []byte
		if err := rows.Scan(&b.id, &b.name, &b.headSeq, &h, &b.count, &b.deleted); err != nil {
			rows.Close()
			return nil, err
		}
		copy(b.head[:], h)
		branches = append(branches, b)
	}
	rows.Close()
	for _, b := range branches {
		label := b.name
		if label == "" {
			label = fmt.Sprintf("(deleted branch %d)", b.id)
		}
		if !b.deleted {
			rep.Branches++
		}
		n, err := db.verifyChain(ctx, b, label, rep, st)
		if err != nil {
			return nil, err
		}
		rep.Events += n
	}
	return branches, nil
}

// verifySnapshots checks each snapshot against its event and the chain's
// event count up to it.
func (db *DB) verifySnapshots(ctx context.Context, rep *VerifyReport, st *verifyStates) error {
	snaps, err := db.snapshots(ctx, "")
	if err != nil {
		return err
	}
	rep.Snapshots = len(snaps)
	for _, s := range snaps {
		var ev snapshotEvent
		var kind int
		err := db.r.QueryRowContext(ctx, `SELECT hash, root, branch, kind FROM events WHERE seq = ?`, s.Seq).Scan(&ev.hash, &ev.root, &ev.branch, &kind)
		switch {
		case err == sql.ErrNoRows:
			ev.missing = true
		case err != nil:
			return err
		}
		ev.kind = EventKind(kind)
		if err := db.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events WHERE branch = ?1 AND seq <= ?2)
			+ (SELECT coalesce(sum(count), 0) FROM forgotten WHERE branch = ?1 AND to_seq < ?2)`, s.BranchID, s.Seq).Scan(&ev.index); err != nil {
			return err
		}
		rep.Problems = append(rep.Problems, checkSnapshot(s, ev)...)
		st.roots[s.Root] = "snapshot " + s.ID.Short()
	}
	return nil
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

// verifyChain checks branch b's chain (chainCheck) and returns how many
// of its events are present.
func (db *DB) verifyChain(ctx context.Context, b verifyBranch, label string, rep *VerifyReport, st *verifyStates) (int, error) {
	gaps, err := db.gaps(ctx, b.id)
	if err != nil {
		return 0, err
	}
	c := &chainCheck{branch: b.id, label: label, gaps: gaps, states: st}
	rows, err := db.r.QueryContext(ctx, `SELECT seq, op, kind, time_ns, path, root, payload, prev, hash FROM events WHERE branch = ? ORDER BY seq`, b.id)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var r chainRow
		if err := rows.Scan(&r.seq, &r.op, &r.kind, &r.time, &r.path, &r.root, &r.payload, &r.prev, &r.hash); err != nil {
			return int(c.live), err
		}
		c.event(r)
	}
	if err := rows.Err(); err != nil {
		return int(c.live), err
	}
	c.finish(b.head, b.headSeq, b.count)
	rep.Problems = append(rep.Problems, c.problems...)
	return int(c.live), nil
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

// verifyReach walks every recorded state (roots in label order, then the
// manifests events name) with cas.Walker, finding the objects that are
// missing or do not decode and naming, for every damaged object, the paths
// that depend on it (see reachCheck).
func (db *DB) verifyReach(ctx context.Context, st *verifyStates, bad map[cas.ID]*Problem) error {
	rc := &reachCheck{bad: bad, pending: map[refKey][]string{}}
	w := &cas.Walker{Load: rc.loader(db.objs), Refs: rc.refs}
	// Chunks are loaded too: the loader checks that they are present.
	w.Visit = func(_ context.Context, refs []cas.Ref) ([]bool, error) {
		load := make([]bool, len(refs))
		for i := range load {
			load[i] = true
		}
		return load, nil
	}
	rc.w = w
	labels := make([]cas.ID, 0, len(st.roots))
	for r := range st.roots {
		labels = append(labels, r)
	}
	sort.Slice(labels, func(i, j int) bool { return st.roots[labels[i]] < st.roots[labels[j]] })
	for _, r := range labels {
		if err := rc.walk(ctx, cas.Ref{ID: r, Kind: cas.KindTree}, st.roots[r]+":"); err != nil {
			return err
		}
	}
	for m, label := range st.manifests {
		if err := rc.walk(ctx, cas.Ref{ID: m, Kind: cas.KindManifest}, label); err != nil {
			return err
		}
	}
	return nil
}

// loader is the walk's Load: it reads each object from objs (a chunk is
// only looked up), records one that is missing or damaged as bad with
// every path that reached it so far, and delivers it as empty so the walk
// goes on.
func (rc *reachCheck) loader(objs *cas.Store) func(context.Context, []cas.Ref, func(*cas.Checked) error) error {
	return func(ctx context.Context, refs []cas.Ref, got func(*cas.Checked) error) error {
		for _, r := range refs {
			c := &cas.Checked{Raw: cas.Raw{ID: r.ID, Kind: r.Kind}}
			var err error
			switch r.Kind {
			case cas.KindTree:
				c.Tree, err = objs.GetTree(ctx, r.ID)
			case cas.KindManifest:
				c.Manifest, err = objs.GetManifest(ctx, r.ID)
			default:
				var ok bool
				if ok, err = objs.Has(ctx, r.ID); err == nil && !ok {
					err = cas.ErrNotFound
				}
			}
			if err != nil {
				rc.damaged(r, err)
				c.Tree, c.Manifest = nil, nil
			}
			if err := got(c); err != nil {
				return err
			}
		}
		return nil
	}
}
