package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
// snapshot id no longer resolves). The branch, checkout and merge events
// stay wherever they are (forgetPlan.cut), so merge bases and the history
// graph are the same after a forget. Each removed stretch is recorded in
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

// forgetBranch applies opts.Policy to one branch in tx: it loads the
// branch's snapshots, running ops and chain, plans (planForget, no I/O)
// and, unless DryRun, applies the plan.
func (db *DB) forgetBranch(ctx context.Context, tx *sql.Tx, b Branch, opts ForgetOptions) (BranchForget, error) {
	snaps, err := db.snapshotsQ(ctx, tx, `WHERE s.branch = ?`, b.ID)
	if err != nil {
		return BranchForget{Branch: b.Name, Keep: []SnapshotDecision{}, Forget: []SnapshotDecision{}}, err
	}
	var running sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(before_seq) FROM ops WHERE branch = ? AND end_seq IS NULL`, b.ID).Scan(&running); err != nil {
		return BranchForget{Branch: b.Name, Keep: []SnapshotDecision{}, Forget: []SnapshotDecision{}}, err
	}
	in := forgetInput{Branch: b.Name, Snapshots: snaps, Policy: opts.Policy, Now: time.Unix(0, db.now())}
	if running.Valid {
		in.Running = &running.Int64
	}
	plan := planSnapshots(in)
	if len(plan.Forget) == 0 {
		return plan.BranchForget, nil
	}
	if plan.chain, err = branchChain(ctx, tx, b.ID); err != nil {
		return plan.BranchForget, err
	}
	plan.cut()
	if opts.DryRun {
		return plan.BranchForget, nil
	}
	return db.applyForget(ctx, tx, b, plan, opts)
}

// branchChain is branch's chain, oldest first (only what the cut needs).
func branchChain(ctx context.Context, tx *sql.Tx, branch int64) ([]chainEvent, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, prev, hash, root IS NOT NULL, kind IN (?, ?, ?) FROM events WHERE branch = ? ORDER BY seq`,
		int(EvBranch), int(EvCheckout), int(EvMerge), branch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var chain []chainEvent
	for rows.Next() {
		var e chainEvent
		if err := rows.Scan(&e.seq, &e.prev, &e.hash, &e.hasRoot, &e.edge); err != nil {
			return nil, err
		}
		chain = append(chain, e)
	}
	return chain, rows.Err()
}

// applyForget carries out plan in tx: an op records the forget, each
// stretch of dropped events is removed and recorded in forgotten (joined
// with a stretch an earlier forget removed right before it), each dropped
// snapshot moves to forgotten_snapshots.
func (db *DB) applyForget(ctx context.Context, tx *sql.Tx, b Branch, plan *forgetPlan, opts ForgetOptions) (BranchForget, error) {
	bf := plan.BranchForget
	bf.Events = 0 // counted as removed below
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
	for _, st := range plan.stretches() {
		if err := forgetStretch(ctx, tx, b.ID, st, op.ID, now); err != nil {
			return bf, err
		}
		bf.Events += int64(len(st))
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

// forgetStretch removes the events of st (consecutive, oldest first) and
// records the stretch in forgotten, joined with a range forgotten earlier
// that ends right before it.
func forgetStretch(ctx context.Context, tx *sql.Tx, branch int64, st []chainEvent, op, now int64) error {
	first, last := st[0], st[len(st)-1]
	var prevFrom, prevCount int64
	var prevFirst []byte
	err := tx.QueryRowContext(ctx, `SELECT from_seq, count, first_prev FROM forgotten WHERE branch = ? AND last_hash = ?`,
		branch, first.prev).Scan(&prevFrom, &prevCount, &prevFirst)
	from, count, firstPrev := first.seq, int64(len(st)), first.prev
	switch {
	case err == nil:
		from, count, firstPrev = prevFrom, count+prevCount, prevFirst
		if _, err := tx.ExecContext(ctx, `DELETE FROM forgotten WHERE branch = ? AND from_seq = ?`, branch, prevFrom); err != nil {
			return err
		}
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO forgotten (branch, from_seq, to_seq, count, first_prev, last_hash, op, time_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, branch, from, last.seq, count, firstPrev, last.hash, op, now); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM events WHERE branch = ? AND seq BETWEEN ? AND ?`, branch, first.seq, last.seq)
	return err
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
