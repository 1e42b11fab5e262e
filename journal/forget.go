package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
)

// ErrForgotten reports a revision that names history art forget removed.
// It also wraps ErrRevNotFound for callers that only know that one.
var ErrForgotten = errclass.New(errclass.NotFound, "forgotten")

// Retention says which snapshots of a branch art forget keeps; a snapshot
// any rule selects is kept (restic's semantics). The buckets count back
// from the newest snapshot: Daily 7 keeps the newest snapshot of each of
// the last 7 days that have one, in local time.
type Retention struct {
	Last    int           `json:"keep_last,omitempty"`
	Within  time.Duration `json:"keep_within,omitempty"`
	Hourly  int           `json:"keep_hourly,omitempty"`
	Daily   int           `json:"keep_daily,omitempty"`
	Weekly  int           `json:"keep_weekly,omitempty"`
	Monthly int           `json:"keep_monthly,omitempty"`
	// Snapshots are kept by id, whatever the other rules say.
	Snapshots []cas.ID `json:"keep_snapshots,omitempty"`
}

// Empty reports whether r keeps nothing by itself.
func (r Retention) Empty() bool {
	return r.Last <= 0 && r.Within <= 0 && r.Hourly <= 0 && r.Daily <= 0 && r.Weekly <= 0 && r.Monthly <= 0 && len(r.Snapshots) == 0
}

// String is the policy in flag form, for the op log.
func (r Retention) String() string {
	var p []string
	add := func(name string, n int) {
		if n > 0 {
			p = append(p, fmt.Sprintf("--keep-%s %d", name, n))
		}
	}
	add("last", r.Last)
	if r.Within > 0 {
		p = append(p, "--keep-within "+r.Within.String())
	}
	add("hourly", r.Hourly)
	add("daily", r.Daily)
	add("weekly", r.Weekly)
	add("monthly", r.Monthly)
	for _, id := range r.Snapshots {
		p = append(p, "--keep-snapshot "+id.Short())
	}
	return strings.Join(p, " ")
}

// ForgetOptions configure Forget.
type ForgetOptions struct {
	// Branches to apply the policy to; with All, every branch.
	Branches []string
	All      bool
	Policy   Retention
	DryRun   bool
	// Who is recorded in the forget op's description (user, pid, command).
	Who string
}

// SnapshotDecision is one snapshot and why Forget keeps or drops it.
type SnapshotDecision struct {
	ID      cas.ID   `json:"id"`
	Seq     int64    `json:"seq"`
	Root    cas.ID   `json:"root"`
	Time    int64    `json:"time_ns"`
	Message string   `json:"message"`
	Reasons []string `json:"reasons,omitempty"` // why kept
}

// BranchForget is what Forget did (or would do) to one branch.
type BranchForget struct {
	Branch    string             `json:"branch"`
	Keep      []SnapshotDecision `json:"keep"`
	Forget    []SnapshotDecision `json:"forget"`
	Events    int64              `json:"events_forgotten"`
	Anchors   int                `json:"anchors"` // dropped snapshots whose event stays as a replay base
	Op        int64              `json:"op,omitempty"`
	Protected string             `json:"protected,omitempty"` // why some history was kept regardless
}

// ForgetReport is the result of Forget.
type ForgetReport struct {
	DryRun   bool           `json:"dry_run"`
	Policy   string         `json:"policy"`
	Branches []BranchForget `json:"branches"`
	Seconds  float64        `json:"seconds"`
}

// ForgottenRange is a stretch of a branch's chain that art forget removed.
type ForgottenRange struct {
	Branch  string `json:"branch"`
	FromSeq int64  `json:"from_seq"`
	ToSeq   int64  `json:"to_seq"`
	Events  int64  `json:"events"`
	Op      int64  `json:"op"`
	Time    int64  `json:"time_ns"`
}

func (f ForgottenRange) String() string {
	return fmt.Sprintf("@%d..@%d (%d events) forgotten by op %d on %s", f.FromSeq, f.ToSeq, f.Events, f.Op,
		time.Unix(0, f.Time).Format("2006-01-02 15:04"))
}

// Forget drops the snapshots of the chosen branches that opts.Policy does
// not keep, together with the events only they need, in one transaction.
//
// A branch's chain is cut into units at its snapshots: a snapshot's unit is
// its own event and the events since the previous snapshot (what the
// session that took it did). Kept snapshots keep their units, so @SEQ,
// blame and log stay exact within them; the events after the newest
// snapshot (the branch's live work) and everything since a running op on
// the branch began are always kept. A dropped unit's events go; when the
// unit after it is kept, the dropped snapshot's own event stays as the
// root the kept events replay from (an anchor: its tree stays, its
// snapshot id no longer resolves). Each removed stretch is recorded in
// `forgotten` (count and boundary hashes, so art verify still checks the
// chain across it), each dropped snapshot in `forgotten_snapshots`, and
// the forget itself as an op without events. Objects only the removed
// events referenced become garbage for art gc.
func (db *DB) Forget(ctx context.Context, opts ForgetOptions) (*ForgetReport, error) {
	start := time.Now()
	if opts.Policy.Empty() {
		return nil, errors.New("forget: no --keep rule given: it would keep no snapshot")
	}
	if !opts.All && len(opts.Branches) == 0 {
		return nil, errors.New("forget: name a branch or all")
	}
	if db.readOnly && !opts.DryRun {
		return nil, errors.New("forget: store opened read-only")
	}
	rep := &ForgetReport{DryRun: opts.DryRun, Policy: opts.Policy.String()}
	run := func(tx *sql.Tx) error {
		names := opts.Branches
		if opts.All {
			names = nil
			rows, err := tx.QueryContext(ctx, `SELECT name FROM branches WHERE name IS NOT NULL AND deleted_ns IS NULL ORDER BY name`)
			if err != nil {
				return err
			}
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					rows.Close()
					return err
				}
				names = append(names, n)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for _, name := range names {
			b, err := branchByName(ctx, tx, name)
			if err != nil {
				return err
			}
			bf, err := db.forgetBranch(ctx, tx, b, opts)
			if err != nil {
				return fmt.Errorf("forget on %s: %w", termtext.Quote(name), err)
			}
			rep.Branches = append(rep.Branches, bf)
		}
		return nil
	}
	var err error
	if opts.DryRun {
		// A write transaction that is rolled back: the same code path
		// decides, nothing is kept.
		err = db.writeTx(ctx, func(tx *sql.Tx) error {
			if err := run(tx); err != nil {
				return err
			}
			return errDryRun
		})
		if errors.Is(err, errDryRun) {
			err = nil
		}
	} else {
		err = db.writeTx(ctx, run)
	}
	if err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

var errDryRun = errors.New("dry run")

// keepSnapshots applies a policy to snapshots sorted newest first and
// returns the reasons each kept one is kept (nil: dropped).
func keepSnapshots(snaps []Snapshot, r Retention, now time.Time) [][]string {
	reasons := make([][]string, len(snaps))
	why := func(i int, s string) { reasons[i] = append(reasons[i], s) }
	for i := range snaps {
		if i < r.Last {
			why(i, fmt.Sprintf("last %d", r.Last))
		}
		if r.Within > 0 && now.Sub(time.Unix(0, snaps[i].Time)) <= r.Within {
			why(i, "within "+r.Within.String())
		}
		for _, id := range r.Snapshots {
			if id == snaps[i].ID {
				why(i, "named")
			}
		}
	}
	bucket := func(n int, name string, key func(t time.Time) string) {
		if n <= 0 {
			return
		}
		last, used := "", 0
		for i := range snaps {
			k := key(time.Unix(0, snaps[i].Time).Local())
			if k == last {
				continue
			}
			last = k
			if used >= n {
				return
			}
			used++
			why(i, fmt.Sprintf("%s %d", name, n))
		}
	}
	bucket(r.Hourly, "hourly", func(t time.Time) string { return t.Format("2006-01-02 15") })
	bucket(r.Daily, "daily", func(t time.Time) string { return t.Format("2006-01-02") })
	bucket(r.Weekly, "weekly", func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-%d", y, w) })
	bucket(r.Monthly, "monthly", func(t time.Time) string { return t.Format("2006-01") })
	return reasons
}

// chainEvent is one event of a branch's chain, as Forget needs it.
type chainEvent struct {
	seq     int64
	prev    []byte
	hash    []byte
	hasRoot bool
}

func (db *DB) forgetBranch(ctx context.Context, tx *sql.Tx, b Branch, opts ForgetOptions) (BranchForget, error) {
	bf := BranchForget{Branch: b.Name, Keep: []SnapshotDecision{}, Forget: []SnapshotDecision{}}
	snaps, err := db.snapshotsQ(ctx, tx, `WHERE s.branch = ?`, b.ID)
	if err != nil {
		return bf, err
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Seq > snaps[j].Seq }) // newest first
	reasons := keepSnapshots(snaps, opts.Policy, time.Unix(0, db.now()))
	// The state where the earliest running op on the branch began, and
	// everything since, stays: its session may still undo to there. That
	// is every snapshot at or after that point, and the last one before it
	// as the base its state replays from (unless one is exactly there).
	var running sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(before_seq) FROM ops WHERE branch = ? AND end_seq IS NULL`, b.ID).Scan(&running); err != nil {
		return bf, err
	}
	if running.Valid {
		base := true
		for i := range snaps { // newest first
			need := snaps[i].Seq >= running.Int64
			if !need && base {
				need, base = true, false
			}
			if snaps[i].Seq == running.Int64 {
				base = false
			}
			if need && reasons[i] == nil {
				reasons[i] = []string{"a running operation needs it"}
				bf.Protected = "history since a running operation began is kept"
			}
		}
	}
	// Oldest first from here.
	n := len(snaps)
	keep := make([]bool, n)
	for i := range snaps {
		d := SnapshotDecision{ID: snaps[i].ID, Seq: snaps[i].Seq, Root: snaps[i].Root, Time: snaps[i].Time, Message: snaps[i].Message, Reasons: reasons[i]}
		keep[n-1-i] = reasons[i] != nil
		if reasons[i] != nil {
			bf.Keep = append(bf.Keep, d)
		} else {
			bf.Forget = append(bf.Forget, d)
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Seq < snaps[j].Seq })
	if len(bf.Forget) == 0 {
		return bf, nil
	}
	// The chain, oldest first (only what the cut needs).
	rows, err := tx.QueryContext(ctx, `SELECT seq, prev, hash, root IS NOT NULL FROM events WHERE branch = ? ORDER BY seq`, b.ID)
	if err != nil {
		return bf, err
	}
	var chain []chainEvent
	for rows.Next() {
		var e chainEvent
		if err := rows.Scan(&e.seq, &e.prev, &e.hash, &e.hasRoot); err != nil {
			rows.Close()
			return bf, err
		}
		chain = append(chain, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return bf, err
	}
	// Mark the events to remove: unit i is (snaps[i-1].Seq, snaps[i].Seq].
	// A kept snapshot's event stays; the rest of its unit stays only when
	// the state it replays from stays too (the previous snapshot is kept,
	// or it is the branch's first unit, which starts at the branch's own
	// root). A dropped snapshot's unit goes, except the newest snapshot's
	// event when dropped: the live events after it replay from it.
	drop := make([]bool, len(chain))
	anchors := map[int]bool{}
	j := 0
	for i := range snaps {
		lo := int64(0)
		if i > 0 {
			lo = snaps[i-1].Seq
		}
		whole := keep[i] && (i == 0 || keep[i-1])
		for ; j < len(chain) && chain[j].seq <= snaps[i].Seq; j++ {
			switch {
			case chain[j].seq <= lo || whole:
			case chain[j].seq == snaps[i].Seq && keep[i]:
			case chain[j].seq == snaps[i].Seq && i+1 == n:
				anchors[j] = true
			default:
				drop[j] = true
			}
		}
	}
	// An anchor is needed only if the next event kept after it replays
	// from it; if that event records a root of its own (a kept snapshot,
	// a checkout, an anchor left by an earlier forget), the anchor would
	// only keep a tree alive. Backwards, so each decision sees the final
	// state of the chain after it. The branch's last event always stays:
	// it is the head.
	for k := len(chain) - 1; k >= 0; k-- {
		if !anchors[k] {
			continue
		}
		m := k + 1
		for m < len(chain) && drop[m] {
			m++
		}
		if m < len(chain) && chain[m].hasRoot {
			drop[k] = true
		} else {
			bf.Anchors++
		}
	}
	if opts.DryRun {
		for _, d := range drop {
			if d {
				bf.Events++
			}
		}
		return bf, nil
	}
	desc := fmt.Sprintf("forget %d snapshots of %s (%s)", len(bf.Forget), b.Name, opts.Policy)
	if opts.Who != "" {
		desc += " by " + opts.Who
	}
	op, err := db.beginOpTx(ctx, tx, b.Name, "forget", desc)
	if err != nil {
		return bf, err
	}
	bf.Op = op.ID
	now := db.now()
	for k := 0; k < len(chain); {
		if !drop[k] {
			k++
			continue
		}
		e := k
		for e+1 < len(chain) && drop[e+1] {
			e++
		}
		first, last := chain[k], chain[e]
		// Join with a range forgotten earlier that ends right before this one.
		var prevFrom, prevCount int64
		var prevFirst []byte
		err := tx.QueryRowContext(ctx, `SELECT from_seq, count, first_prev FROM forgotten WHERE branch = ? AND last_hash = ?`,
			b.ID, first.prev).Scan(&prevFrom, &prevCount, &prevFirst)
		from, count, firstPrev := first.seq, int64(e-k+1), first.prev
		switch {
		case err == nil:
			from, count, firstPrev = prevFrom, count+prevCount, prevFirst
			if _, err := tx.ExecContext(ctx, `DELETE FROM forgotten WHERE branch = ? AND from_seq = ?`, b.ID, prevFrom); err != nil {
				return bf, err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return bf, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO forgotten (branch, from_seq, to_seq, count, first_prev, last_hash, op, time_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, b.ID, from, last.seq, count, firstPrev, last.hash, op.ID, now); err != nil {
			return bf, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE branch = ? AND seq BETWEEN ? AND ?`, b.ID, first.seq, last.seq); err != nil {
			return bf, err
		}
		bf.Events += int64(e - k + 1)
		k = e + 1
	}
	for _, d := range bf.Forget {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO forgotten_snapshots (id, branch, seq, root, message, op, time_ns) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			d.ID[:], b.ID, d.Seq, d.Root[:], d.Message, op.ID, now); err != nil {
			return bf, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, d.ID[:]); err != nil {
			return bf, err
		}
	}
	return bf, op.endTx(ctx, tx, nil)
}

// Forgotten lists the stretches of branch's chain ("" every branch) that
// art forget removed, oldest first.
func (db *DB) Forgotten(ctx context.Context, branch string) ([]ForgottenRange, error) {
	q, args := `SELECT branch, from_seq, to_seq, count, op, time_ns FROM forgotten`, []any{}
	if branch != "" {
		b, err := db.Branch(ctx, branch)
		if err != nil {
			return nil, err
		}
		q, args = q+` WHERE branch = ?`, append(args, b.ID)
	}
	rows, err := db.r.QueryContext(ctx, q+` ORDER BY from_seq`, args...)
	if err != nil {
		return nil, err
	}
	var out []ForgottenRange
	var ids []int64
	for rows.Next() {
		var f ForgottenRange
		var id int64
		if err := rows.Scan(&id, &f.FromSeq, &f.ToSeq, &f.Events, &f.Op, &f.Time); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, f)
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Branch = db.BranchName(ctx, ids[i])
	}
	return out, nil
}

// forgottenAt explains why branch has no state at seq when a forgotten
// range covers it: the error for @SEQ, undo and materialize. It returns
// nil when seq's state is intact (no forgotten range lies between the base
// root at baseSeq and seq).
func forgottenAt(ctx context.Context, q queryer, branch, baseSeq, seq int64) error {
	var from, to, op, t int64
	err := q.QueryRowContext(ctx, `SELECT from_seq, to_seq, op, time_ns FROM forgotten WHERE branch = ? AND to_seq > ? AND from_seq <= ?
		ORDER BY from_seq LIMIT 1`, branch, baseSeq, seq).Scan(&from, &to, &op, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %w: the state at @%d was forgotten (events @%d..@%d removed by op %d, art forget, on %s)",
		ErrRevNotFound, ErrForgotten, seq, from, to, op, time.Unix(0, t).Format("2006-01-02 15:04"))
}

// forgottenSnapshot explains a snapshot id prefix that names a forgotten
// snapshot; nil when none does.
func (db *DB) forgottenSnapshot(ctx context.Context, prefix string) error {
	var id []byte
	var seq, op, t int64
	err := db.r.QueryRowContext(ctx, `SELECT id, seq, op, time_ns FROM forgotten_snapshots WHERE lower(hex(id)) LIKE ? LIMIT 1`,
		strings.ToLower(prefix)+"%").Scan(&id, &seq, &op, &t)
	if err != nil {
		return nil
	}
	var sid cas.ID
	copy(sid[:], id)
	return fmt.Errorf("%w: %w: snapshot %s (@%d) was forgotten by op %d (art forget) on %s", ErrRevNotFound, ErrForgotten,
		sid.Short(), seq, op, time.Unix(0, t).Format("2006-01-02 15:04"))
}

// forgottenEvent explains an @SEQ that names a removed event; nil when no
// forgotten range holds it.
func (db *DB) forgottenEvent(ctx context.Context, seq int64) error {
	var branch int64
	err := db.r.QueryRowContext(ctx, `SELECT branch FROM forgotten WHERE from_seq <= ? AND to_seq >= ? LIMIT 1`, seq, seq).Scan(&branch)
	if err != nil {
		return nil
	}
	return forgottenAt(ctx, db.r, branch, 0, seq)
}
