package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// State names one state of the store: a point of a branch's chain and the
// root tree id there.
type State struct {
	BranchID int64  `json:"-"`
	Branch   string `json:"branch"`
	Seq      int64  `json:"seq"`
	Root     cas.ID `json:"root"`
	Snapshot cas.ID `json:"snapshot,omitempty"` // set when the state is exactly a snapshot
}

// Snapshot is a recorded state. ID is the hash of its snapshot event, so it
// commits to the branch's whole history.
type Snapshot struct {
	ID         cas.ID `json:"id"`
	Seq        int64  `json:"seq"`
	BranchID   int64  `json:"-"`
	Branch     string `json:"branch"`
	Root       cas.ID `json:"root"`
	Message    string `json:"message"`
	Time       int64  `json:"time_ns"`
	EventCount int64  `json:"event_count"`
}

// Branch is a named head.
type Branch struct {
	ID         int64  `json:"-"`
	Name       string `json:"name"`
	HeadSeq    int64  `json:"head_seq"`
	HeadHash   cas.ID `json:"head_hash"`
	EventCount int64  `json:"event_count"`
	Created    int64  `json:"created_ns"`
}

// Op is a running operation on one branch: an import, a run, a checkout...
// Its events share its id; `art log` lists ops and `art undo` reverts the
// last one.
type Op struct {
	db          *DB
	ID          int64
	BranchID    int64
	Branch      string
	Kind        string
	Description string
	BeforeSeq   int64

	// lead is appended before the op's first other event (SetLead).
	lead *Event
}

// SetLead makes ev (an EvBegin) the op's first event, appended only once
// the op appends another: an op that turns out to change nothing (an
// import of an unchanged workspace) records no event at all and can be
// dropped (Discard). Call before the op's first Update.
func (op *Op) SetLead(ev Event) {
	ev.Root = cas.ID{}
	op.lead = &ev
}

// LeadPending reports whether the op's lead (SetLead) is still to be
// appended: the op has recorded no event yet. Call from the goroutine that
// updates the op (inside an Update, for a Batch).
func (op *Op) LeadPending() bool { return op.lead != nil }

// Discard removes the op if it recorded no event, and reports whether it
// did: the op never happened (what it wrote outside the journal, such as
// import records, stays). Call instead of End.
func (op *Op) Discard(ctx context.Context) (bool, error) {
	var gone bool
	err := op.db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ops WHERE id = ? AND NOT EXISTS (SELECT 1 FROM events WHERE op = ?)`, op.ID, op.ID)
		if err != nil {
			return fmt.Errorf("discard op %d: %w", op.ID, err)
		}
		n, err := res.RowsAffected()
		gone = n == 1
		return err
	})
	return gone, err
}

// branchNameChars reports whether name is 1 to 100 of letters, digits and
// . _ - /, not starting with . - or /. A loop, not a regular expression:
// the {0,99} repetition compiled at package initialisation cost every art
// process (every verb, --version too) about half a millisecond of CPU.
func branchNameChars(name string) bool {
	if len(name) == 0 || len(name) > 100 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_':
		case i > 0 && (c == '.' || c == '/' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidBranchName rejects names that could be confused with revisions
// (a '~' or '@', all-hex names of 4+ characters) or paths.
func ValidBranchName(name string) error {
	if !branchNameChars(name) || strings.Contains(name, "..") || strings.Contains(name, "//") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".lock") {
		return fmt.Errorf("invalid branch name %s: use letters, digits and . _ - /", termtext.Quoted(name))
	}
	if isLowerHex(name) && len(name) >= 4 {
		return fmt.Errorf("invalid branch name %s: it would read as a snapshot id", termtext.Quoted(name))
	}
	return nil
}

const branchCols = `id, name, head_seq, head_hash, event_count, created_ns`

func scanBranch(s scanner) (Branch, error) {
	var b Branch
	var hash []byte
	var name sql.NullString
	if err := s.Scan(&b.ID, &name, &b.HeadSeq, &hash, &b.EventCount, &b.Created); err != nil {
		return b, err
	}
	b.Name = name.String
	copy(b.HeadHash[:], hash)
	return b, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func branchByName(ctx context.Context, q queryer, name string) (Branch, error) {
	b, err := scanBranch(q.QueryRowContext(ctx, `SELECT `+branchCols+` FROM branches WHERE name = ? AND deleted_ns IS NULL`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("%w: %s", ErrBranchNotFound, termtext.Quote(name))
	}
	return b, err
}

// Branch returns the branch called name.
func (db *DB) Branch(ctx context.Context, name string) (Branch, error) {
	return branchByName(ctx, db.r, name)
}

// Branches lists the live branches by name.
func (db *DB) Branches(ctx context.Context) ([]Branch, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+branchCols+` FROM branches WHERE name IS NOT NULL AND deleted_ns IS NULL
		AND substr(name, 1, 1) != '`+TempPrefix+`' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Branch
	for rows.Next() {
		b, err := scanBranch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// BeginOp starts an operation on branch. Call Update to change the branch
// and End when done.
func (db *DB) BeginOp(ctx context.Context, branch, kind, description string) (*Op, error) {
	var op *Op
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		op, err = db.beginOpTx(ctx, tx, branch, kind, description)
		return err
	})
	return op, err
}

// BeginOpWith starts an operation on branch and runs fn as its first
// update, in one transaction: the op and what fn records (a run's begin
// event) are kept together or not at all. When fn fails there is no op.
func (db *DB) BeginOpWith(ctx context.Context, branch, kind, description string, fn func(*Tx) error) (*Op, error) {
	var op *Op
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		o, err := db.beginOpTx(ctx, tx, branch, kind, description)
		if err != nil {
			return err
		}
		if err := o.updateTx(ctx, tx, fn); err != nil {
			return err
		}
		op = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	return op, nil
}

func (db *DB) beginOpTx(ctx context.Context, tx *sql.Tx, branch, kind, description string) (*Op, error) {
	b, err := branchByName(ctx, tx, branch)
	if err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO ops (branch, kind, description, before_seq, start_ns) VALUES (?,?,?,?,?)`,
		b.ID, kind, description, b.HeadSeq, db.now())
	if err != nil {
		return nil, fmt.Errorf("begin %s: %w", kind, err)
	}
	id, _ := res.LastInsertId()
	return &Op{db: db, ID: id, BranchID: b.ID, Branch: b.Name, Kind: kind, Description: description, BeforeSeq: b.HeadSeq}, nil
}

// Update runs fn in one write transaction on the op's branch. When fn
// returns an error nothing it did is kept.
func (op *Op) Update(ctx context.Context, fn func(*Tx) error) error {
	return op.db.writeTx(ctx, func(tx *sql.Tx) error { return op.updateTx(ctx, tx, fn) })
}

func (op *Op) updateTx(ctx context.Context, tx *sql.Tx, fn func(*Tx) error) error {
	t, err := op.openTx(ctx, tx)
	if err != nil {
		return err
	}
	defer t.p.close()
	if err := fn(t); err != nil {
		return err
	}
	return t.flush(tx)
}

// openTx loads the branch's head into a new Tx on tx.
func (op *Op) openTx(ctx context.Context, tx cas.DBTX) (*Tx, error) {
	return op.openTxFor(ctx, tx, true)
}

// openTxFor is openTx; with write false the transaction is only read
// (and rolled back), which a branch whose redo log waits may still do.
func (op *Op) openTxFor(ctx context.Context, tx cas.DBTX, write bool) (*Tx, error) {
	if write {
		if err := op.db.redoWaits(op.BranchID); err != nil {
			return nil, fmt.Errorf("branch %s: %w", termtext.Quote(op.Branch), err)
		}
	}
	var headSeq, count, nextIno, next int64
	var head []byte
	var deleted sql.NullInt64
	// The next seq comes along: nearly every transaction appends.
	err := tx.QueryRowContext(ctx, `SELECT head_seq, head_hash, event_count, next_ino, deleted_ns,
		max((SELECT coalesce(max(seq), 0) FROM events), (SELECT coalesce(max(to_seq), 0) FROM forgotten)) + 1
		FROM branches WHERE id = ?`, op.BranchID).
		Scan(&headSeq, &head, &count, &nextIno, &deleted, &next)
	if err != nil {
		return nil, fmt.Errorf("branch %s: %w", termtext.Quote(op.Branch), err)
	}
	if deleted.Valid {
		return nil, fmt.Errorf("%w: %s was deleted", ErrBranchNotFound, termtext.Quote(op.Branch))
	}
	p := newProj(ctx, tx, op.db.objs, op.BranchID, nextIno, op.db.now())
	t := &Tx{db: op.db, p: p, op: op, headSeq: headSeq, count: count, next: next, nextIno: nextIno}
	copy(t.head[:], head)
	return t, nil
}

// End closes the op, recording the branch head and an optional exit status.
func (op *Op) End(ctx context.Context, status *int) error {
	return op.db.writeTx(ctx, func(tx *sql.Tx) error { return op.endTx(ctx, tx, status) })
}

// EndWith runs fn as the op's last update and closes the op, in one
// transaction: what fn records (a run's end event and snapshot) and the
// op's end are kept together or not at all. When it fails the op is still
// open, and nothing of fn is kept.
func (op *Op) EndWith(ctx context.Context, status *int, fn func(*Tx) error) error {
	return op.db.writeTx(ctx, func(tx *sql.Tx) error {
		if err := op.updateTx(ctx, tx, fn); err != nil {
			return err
		}
		return op.endTx(ctx, tx, status)
	})
}

func (op *Op) endTx(ctx context.Context, tx *sql.Tx, status *int) error {
	var st any
	if status != nil {
		st = *status
	}
	_, err := tx.ExecContext(ctx, `UPDATE ops SET end_seq = (SELECT head_seq FROM branches WHERE id = ?), end_ns = ?, status = ? WHERE id = ?`,
		op.BranchID, op.db.now(), st, op.ID)
	return err
}

// Do runs fn as a whole one-transaction operation: begin, update, end.
func (db *DB) Do(ctx context.Context, branch, kind, description string, fn func(*Tx) error) (*Op, error) {
	var op *Op
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if op, err = db.beginOpTx(ctx, tx, branch, kind, description); err != nil {
			return err
		}
		if err := op.updateTx(ctx, tx, fn); err != nil {
			return err
		}
		return op.endTx(ctx, tx, nil)
	})
	return op, err
}

// TakeSnapshot records the head of branch as a snapshot.
func (db *DB) TakeSnapshot(ctx context.Context, branch, message string) (Snapshot, error) {
	var s Snapshot
	_, err := db.Do(ctx, branch, "snapshot", message, func(t *Tx) error {
		var err error
		s, err = t.Snapshot(message)
		return err
	})
	return s, err
}

// CreateBranch makes branch name start at state from. O(1): the new
// branch's projection is one collapsed root.
func (db *DB) CreateBranch(ctx context.Context, name string, from State) (Branch, error) {
	if err := ValidBranchName(name); err != nil {
		return Branch{}, err
	}
	var b Branch
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		desc := "create branch " + name
		if from.Branch != "" {
			desc += " from " + describeState(from)
		}
		b, err = db.createBranchTx(ctx, tx, name, from, desc)
		return err
	})
	return b, err
}

func describeState(s State) string {
	if !s.Snapshot.IsZero() {
		return s.Snapshot.Short()
	}
	return fmt.Sprintf("%s@%d", termtext.Quote(s.Branch), s.Seq)
}

func (db *DB) createBranchTx(ctx context.Context, tx *sql.Tx, name string, from State, desc string) (Branch, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM branches WHERE name = ?`, name).Scan(&n); err != nil {
		return Branch{}, err
	}
	if n > 0 {
		return Branch{}, fmt.Errorf("%w: %s", ErrBranchExists, termtext.Quote(name))
	}
	var zero cas.ID
	if _, err := tx.ExecContext(ctx, `INSERT INTO branches (name, head_hash, created_ns) VALUES (?,?,?)`, name, zero[:], db.now()); err != nil {
		return Branch{}, fmt.Errorf("create branch %s: %w", termtext.Quote(name), err)
	}
	op, err := db.beginOpTx(ctx, tx, name, "branch", desc)
	if err != nil {
		return Branch{}, err
	}
	if err := op.updateTx(ctx, tx, func(t *Tx) error { return t.reset(EvBranch, from, desc) }); err != nil {
		return Branch{}, err
	}
	if err := op.endTx(ctx, tx, nil); err != nil {
		return Branch{}, err
	}
	return branchByName(ctx, tx, name)
}

// DeleteBranch retires a branch name and returns the state its head was
// at (so the caller can say how to restore it: CreateBranch from that
// state, or art branch NAME --from @SEQ). Its events and snapshots stay
// (they are history, reachable by id and @seq); its projection is dropped.
// A branch a session holds is *BranchInUseError.
func (db *DB) DeleteBranch(ctx context.Context, name string) (State, error) {
	var head State
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		b, err := branchByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if err := db.checkBranchFree(name); err != nil {
			return err
		}
		// The head's tree, encoded before the projection goes, so the
		// state it names is whole in the store.
		p := newProj(ctx, tx, db.objs, b.ID, 0, db.now())
		root, err := p.computeRoot()
		p.close()
		if err != nil {
			return fmt.Errorf("delete branch %s: %w", name, err)
		}
		head = State{BranchID: b.ID, Branch: b.Name, Seq: b.HeadSeq, Root: root}
		if _, err := tx.ExecContext(ctx, `UPDATE branches SET name = NULL, deleted_ns = ? WHERE id = ?`, db.now(), b.ID); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM nodes WHERE branch = ?`, `DELETE FROM dentries WHERE branch = ?`,
			`DELETE FROM link_groups WHERE branch = ?`, `DELETE FROM import_cache WHERE branch = ?`} {
			if _, err := tx.ExecContext(ctx, q, b.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return State{}, err
	}
	head.Snapshot = db.snapshotAt(ctx, head.Seq)
	return head, nil
}

// RenameBranch gives branch from the name to. Its history, projection and
// import records go with it. A branch a session holds is
// *BranchInUseError.
func (db *DB) RenameBranch(ctx context.Context, from, to string) error {
	if err := ValidBranchName(to); err != nil {
		return err
	}
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		b, err := branchByName(ctx, tx, from)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM branches WHERE name = ?`, to).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %s", ErrBranchExists, to)
		}
		for _, name := range []string{from, to} {
			if err := db.checkBranchFree(name); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE branches SET name = ? WHERE id = ?`, to, b.ID); err != nil {
			return fmt.Errorf("rename branch %s: %w", from, err)
		}
		return nil
	})
}

// Checkout moves branch to state to by appending a checkout event: nothing
// is deleted, and Undo returns to the old head.
func (db *DB) Checkout(ctx context.Context, branch string, to State) (*Op, error) {
	desc := "checkout " + describeState(to)
	return db.Do(ctx, branch, "checkout", desc, func(t *Tx) error { return t.reset(EvCheckout, to, desc) })
}

// Undo returns branch to where it was before its last operation. Undo ops
// and ops already undone are skipped, so repeated undo walks further back.
// It returns the op that was undone.
func (db *DB) Undo(ctx context.Context, branch string) (undone OpInfo, err error) {
	// One write transaction from choosing the op to recording the undo, so
	// a concurrent write to the branch cannot slip in between and be
	// silently reverted with it.
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		b, err := branchByName(ctx, tx, branch)
		if err != nil {
			return err
		}
		row := tx.QueryRowContext(ctx, `SELECT `+opCols+` FROM ops o WHERE o.branch = ? AND o.kind NOT IN ('undo', 'snapshot')
			AND o.end_seq IS NOT NULL AND o.end_seq > o.before_seq
			AND NOT EXISTS (SELECT 1 FROM ops u WHERE u.undoes = o.id) ORDER BY o.id DESC LIMIT 1`, b.ID)
		undone, err = scanOp(row)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w on branch %s", ErrNothingToUndo, termtext.Quote(branch))
		}
		if err != nil {
			return err
		}
		if undone.Kind == "branch" || undone.BeforeSeq == 0 {
			return fmt.Errorf("%w on branch %s: its last operation created it", ErrNothingToUndo, termtext.Quote(branch))
		}
		root, err := db.materializeTx(ctx, tx, b.ID, undone.BeforeSeq, false)
		if err != nil {
			return err
		}
		to := State{BranchID: b.ID, Branch: b.Name, Seq: undone.BeforeSeq, Root: root}
		desc := fmt.Sprintf("undo op %d (%s)", undone.ID, undone.Description)
		op, err := db.beginOpTx(ctx, tx, branch, "undo", desc)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ops SET undoes = ? WHERE id = ?`, undone.ID, op.ID); err != nil {
			return err
		}
		if err := op.updateTx(ctx, tx, func(t *Tx) error { return t.reset(EvCheckout, to, desc) }); err != nil {
			return err
		}
		return op.endTx(ctx, tx, nil)
	})
	if err != nil {
		return OpInfo{}, err
	}
	return undone, nil
}

// InheritImportCache gives branch to a copy of branch from's import stat
// cache, so that the first capture of the host workspace on a new branch
// knows which host files are unchanged since from's last import (and
// leaves the branch's versions of them alone). O(files); branch creation
// itself stays O(1).
func (db *DB) InheritImportCache(ctx context.Context, to, from string) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		t, err := branchByName(ctx, tx, to)
		if err != nil {
			return err
		}
		f, err := branchByName(ctx, tx, from)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO import_cache (branch, path, size, mtime_ns, ctime_ns, host_ino, manifest, kind, mode, racy)
			SELECT ?, path, size, mtime_ns, ctime_ns, host_ino, manifest, kind, mode, racy FROM import_cache WHERE branch = ?`, t.ID, f.ID)
		if err != nil {
			return fmt.Errorf("inherit import cache of %s: %w", termtext.Quote(from), err)
		}
		return nil
	})
}
