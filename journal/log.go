package journal

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// OpInfo describes one operation for `art log`.
type OpInfo struct {
	ID          int64      `json:"id"`
	Branch      string     `json:"branch"`
	Kind        string     `json:"kind"`
	Description string     `json:"description"`
	BeforeSeq   int64      `json:"before_seq"`
	EndSeq      int64      `json:"end_seq"`
	Start       int64      `json:"start_ns"`
	End         int64      `json:"end_ns"`
	Status      *int       `json:"status,omitempty"`
	Undoes      int64      `json:"undoes,omitempty"`
	Events      int64      `json:"events"`
	Snapshots   []Snapshot `json:"snapshots,omitempty"`
}

const opCols = `o.id, coalesce((SELECT name FROM branches b WHERE b.id = o.branch), '(deleted)'), o.kind, o.description,
	o.before_seq, coalesce(o.end_seq, 0), o.start_ns, coalesce(o.end_ns, 0), o.status, coalesce(o.undoes, 0),
	(SELECT count(*) FROM events e WHERE e.op = o.id)`

func scanOp(s scanner) (OpInfo, error) {
	var o OpInfo
	var st sql.NullInt64
	err := s.Scan(&o.ID, &o.Branch, &o.Kind, &o.Description, &o.BeforeSeq, &o.EndSeq, &o.Start, &o.End, &st, &o.Undoes, &o.Events)
	if st.Valid {
		v := int(st.Int64)
		o.Status = &v
	}
	return o, err
}

// LogQuery selects operations for Ops.
type LogQuery struct {
	Branch string // "" = all branches
	Limit  int    // 0 = no limit
}

// Ops lists operations newest first, each with the snapshots it took.
func (db *DB) Ops(ctx context.Context, q LogQuery) ([]OpInfo, error) {
	where, args := "", []any{}
	if q.Branch != "" {
		b, err := db.Branch(ctx, q.Branch)
		if err != nil {
			return nil, err
		}
		where, args = "WHERE o.branch = ?", append(args, b.ID)
	}
	query := `SELECT ` + opCols + ` FROM ops o ` + where + ` ORDER BY o.id DESC`
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OpInfo
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		snaps, err := db.snapshots(ctx, `WHERE s.seq IN (SELECT seq FROM events WHERE op = ? AND kind = ?)`, out[i].ID, int(EvSnapshot))
		if err != nil {
			return nil, err
		}
		out[i].Snapshots = snaps
	}
	return out, nil
}

// Op returns operation id, without its snapshots (sql.ErrNoRows, wrapped,
// when there is none).
func (db *DB) Op(ctx context.Context, id int64) (OpInfo, error) {
	o, err := scanOp(db.r.QueryRowContext(ctx, `SELECT `+opCols+` FROM ops o WHERE o.id = ?`, id))
	if err != nil {
		return OpInfo{}, fmt.Errorf("op %d: %w", id, err)
	}
	return o, nil
}

// Snapshots lists a branch's snapshots (all branches for ""), newest first.
func (db *DB) Snapshots(ctx context.Context, branch string) ([]Snapshot, error) {
	if branch == "" {
		return db.snapshots(ctx, "")
	}
	b, err := db.Branch(ctx, branch)
	if err != nil {
		return nil, err
	}
	return db.snapshots(ctx, `WHERE s.branch = ?`, b.ID)
}

func (db *DB) snapshots(ctx context.Context, where string, args ...any) ([]Snapshot, error) {
	return db.snapshotsQ(ctx, db.r, where, args...)
}

func (db *DB) snapshotsQ(ctx context.Context, q queryer, where string, args ...any) ([]Snapshot, error) {
	rows, err := q.QueryContext(ctx, `SELECT s.id, s.seq, s.branch, coalesce((SELECT name FROM branches b WHERE b.id = s.branch), '(deleted)'),
		s.root, s.message, s.time_ns, s.event_count FROM snapshots s `+where+` ORDER BY s.seq DESC`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Snapshot
	for rows.Next() {
		var s Snapshot
		var id, root []byte
		if err := rows.Scan(&id, &s.Seq, &s.BranchID, &s.Branch, &root, &s.Message, &s.Time, &s.EventCount); err != nil {
			return nil, err
		}
		copy(s.ID[:], id)
		copy(s.Root[:], root)
		out = append(out, s)
	}
	return out, rows.Err()
}

// EventQuery selects events for Events.
type EventQuery struct {
	Branch   string // "" = all branches
	Path     []byte // events whose Path or Path2 is this path or below it
	Op       int64
	Kind     EventKind // 0 = every kind
	AfterSeq int64
	Limit    int
}

// Events lists events in seq order.
func (db *DB) Events(ctx context.Context, q EventQuery) ([]Event, error) {
	var conds []string
	var args []any
	if q.Branch != "" {
		b, err := db.Branch(ctx, q.Branch)
		if err != nil {
			return nil, err
		}
		conds, args = append(conds, "branch = ?"), append(args, b.ID)
	}
	if q.Op != 0 {
		conds, args = append(conds, "op = ?"), append(args, q.Op)
	}
	if q.Kind != 0 {
		conds, args = append(conds, "kind = ?"), append(args, int(q.Kind))
	}
	if q.AfterSeq != 0 {
		conds, args = append(conds, "seq > ?"), append(args, q.AfterSeq)
	}
	if q.Path != nil {
		// Path equality uses the index; renames and links also match on
		// their destination, which only the payload holds.
		conds = append(conds, "(path = ? OR (path >= ? AND path < ?) OR kind IN (?, ?))")
		lo := append(append([]byte{}, q.Path...), '/')
		hi := append(append([]byte{}, q.Path...), '/'+1)
		args = append(args, q.Path, lo, hi, int(EvRename), int(EvLink))
	}
	query := `SELECT seq, payload, prev, hash FROM events`
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	query += " ORDER BY seq"
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var seq int64
		var payload, prev, hash []byte
		if err := rows.Scan(&seq, &payload, &prev, &hash); err != nil {
			return nil, err
		}
		ev, err := DecodeEvent(payload)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		ev.Seq = seq
		copy(ev.Prev[:], prev)
		copy(ev.Hash[:], hash)
		if q.Path != nil && (ev.Kind == EvRename || ev.Kind == EvLink) && !under(ev.Path, q.Path) && !under(ev.Path2, q.Path) {
			continue
		}
		out = append(out, *ev)
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	return out, rows.Err()
}

// under reports whether path is p or below it.
func under(path, p []byte) bool {
	if len(p) == 0 {
		return true
	}
	return string(path) == string(p) || strings.HasPrefix(string(path), string(p)+"/")
}

// BranchName returns the current name of branch id ("" when deleted).
func (db *DB) BranchName(ctx context.Context, id int64) string {
	var name sql.NullString
	db.r.QueryRowContext(ctx, `SELECT name FROM branches WHERE id = ?`, id).Scan(&name)
	return name.String
}
