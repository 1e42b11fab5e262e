package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// isLowerHex reports whether s is one or more of 0-9 and a-f.
func isLowerHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Resolve turns a revision into a state. Syntax:
//
//	""        the head of defaultBranch
//	NAME      the head of branch NAME
//	HEX       the snapshot whose id starts with HEX (at least 4 hex digits)
//	@SEQ      the state right after journal event SEQ, on that event's branch
//	REV~N     the N-th snapshot before REV: REV~0 is the newest snapshot at
//	          or before REV, REV~1 the one before it, following checkouts
//	          and branch points back to where the state came from
func (db *DB) Resolve(ctx context.Context, rev, defaultBranch string) (State, error) {
	if rev == "" {
		rev = defaultBranch
	}
	if i := strings.LastIndexByte(rev, '~'); i >= 0 {
		n := 1
		if s := rev[i+1:]; s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return State{}, fmt.Errorf("%w: %s: want REV~N with N >= 0", ErrBadRev, termtext.Quoted(rev))
			}
			n = v
		}
		base, err := db.Resolve(ctx, rev[:i], defaultBranch)
		if err != nil {
			return State{}, err
		}
		return db.back(ctx, base, n, rev)
	}
	if strings.HasPrefix(rev, "@") {
		seq, err := strconv.ParseInt(rev[1:], 10, 64)
		if err != nil || seq <= 0 {
			return State{}, fmt.Errorf("%w: %s: want @SEQ with SEQ a positive event number", ErrBadRev, termtext.Quoted(rev))
		}
		return db.stateAt(ctx, seq)
	}
	if _, err := db.Branch(ctx, rev); err == nil {
		return db.Head(ctx, rev)
	} else if !errors.Is(err, ErrBranchNotFound) {
		return State{}, err
	}
	if len(rev) >= 4 && isLowerHex(strings.ToLower(rev)) {
		snaps, err := db.snapshots(ctx, `WHERE lower(hex(s.id)) LIKE ?`, strings.ToLower(rev)+"%")
		if err != nil {
			return State{}, err
		}
		switch len(snaps) {
		case 0:
			if err := db.forgottenSnapshot(ctx, rev); err != nil {
				return State{}, err
			}
		case 1:
			s := snaps[0]
			return State{BranchID: s.BranchID, Branch: s.Branch, Seq: s.Seq, Root: s.Root, Snapshot: s.ID}, nil
		default:
			var ids []string
			for _, s := range snaps {
				ids = append(ids, s.ID.Short())
			}
			return State{}, fmt.Errorf("%w: %s matches snapshots %s", ErrAmbiguous, termtext.Quoted(rev), strings.Join(ids, ", "))
		}
	}
	return State{}, fmt.Errorf("%w: %s is not a branch, snapshot id or @seq", ErrRevNotFound, termtext.Quoted(rev))
}

// Head returns the state at the head of branch, encoding its dirty
// directories (a write, but no event).
func (db *DB) Head(ctx context.Context, branch string) (State, error) {
	var st State
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		b, err := branchByName(ctx, tx, branch)
		if err != nil {
			return err
		}
		p := newProj(ctx, tx, db.objs, b.ID, 0, db.now())
		defer p.close()
		root, err := p.computeRoot()
		if err != nil && db.readOnly && readOnlyRefused(err) {
			return fmt.Errorf("head of %s: the branch has changes not yet snapshotted (is a session running on it?), which a read-only open cannot encode: run art snapshot on that store, or pull when the session ends", termtext.Quote(branch))
		}
		if err != nil {
			return fmt.Errorf("head of %s: %w", termtext.Quote(branch), err)
		}
		st = State{BranchID: b.ID, Branch: b.Name, Seq: b.HeadSeq, Root: root}
		return nil
	})
	if err != nil {
		return State{}, err
	}
	st.Snapshot = db.snapshotAt(ctx, st.Seq)
	return st, nil
}

func (db *DB) snapshotAt(ctx context.Context, seq int64) cas.ID {
	var id cas.ID
	var b []byte
	if db.r.QueryRowContext(ctx, `SELECT id FROM snapshots WHERE seq = ?`, seq).Scan(&b) == nil {
		copy(id[:], b)
	}
	return id
}

func (db *DB) stateAt(ctx context.Context, seq int64) (State, error) {
	var branch int64
	err := db.r.QueryRowContext(ctx, `SELECT branch FROM events WHERE seq = ?`, seq).Scan(&branch)
	if errors.Is(err, sql.ErrNoRows) {
		if err := db.forgottenEvent(ctx, seq); err != nil {
			return State{}, err
		}
		return State{}, fmt.Errorf("%w: no event @%d", ErrRevNotFound, seq)
	}
	if err != nil {
		return State{}, err
	}
	root, err := db.Materialize(ctx, branch, seq)
	if err != nil {
		return State{}, err
	}
	return State{BranchID: branch, Branch: db.BranchName(ctx, branch), Seq: seq, Root: root, Snapshot: db.snapshotAt(ctx, seq)}, nil
}

// back walks n snapshots back from st (see Resolve).
func (db *DB) back(ctx context.Context, st State, n int, rev string) (State, error) {
	var list []Snapshot
	branch, seq := st.BranchID, st.Seq
	for hops := 0; len(list) <= n && branch != 0 && hops < 10000; hops++ {
		// The segment of this branch's chain since its last reset.
		var baseSeq, fromBranch, fromSeq int64
		var payload []byte
		err := db.r.QueryRowContext(ctx, `SELECT seq, payload FROM events WHERE branch = ? AND seq <= ? AND kind IN (?, ?)
			ORDER BY seq DESC LIMIT 1`, branch, seq, int(EvBranch), int(EvCheckout)).Scan(&baseSeq, &payload)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return State{}, err
		}
		if err == nil {
			ev, err := DecodeEvent(payload)
			if err != nil {
				return State{}, fmt.Errorf("event %d: %w", baseSeq, err)
			}
			fromBranch, fromSeq = ev.FromBranch, ev.FromSeq
		}
		snaps, err := db.snapshots(ctx, `WHERE s.branch = ? AND s.seq <= ? AND s.seq > ?`, branch, seq, baseSeq)
		if err != nil {
			return State{}, err
		}
		list = append(list, snaps...)
		branch, seq = fromBranch, fromSeq
	}
	if len(list) <= n {
		var forgot int
		db.r.QueryRowContext(ctx, `SELECT count(*) FROM forgotten_snapshots WHERE branch = ? AND seq <= ?`, st.BranchID, st.Seq).Scan(&forgot)
		if forgot > 0 {
			return State{}, fmt.Errorf("%w: %w: %s: only %d snapshots at or before %s; %d older ones were forgotten (art forget; see art log)",
				ErrRevNotFound, ErrForgotten, termtext.Quoted(rev), len(list), describeState(st), forgot)
		}
		return State{}, fmt.Errorf("%w: %s: only %d snapshots at or before %s", ErrRevNotFound, termtext.Quoted(rev), len(list), describeState(st))
	}
	s := list[n]
	return State{BranchID: s.BranchID, Branch: s.Branch, Seq: s.Seq, Root: s.Root, Snapshot: s.ID}, nil
}

// Materialize returns the root tree id of branch right after event seq:
// the nearest recorded root at or before seq (a branch point, checkout or
// snapshot) plus a replay of the events after it, in a scratch projection
// that is dropped afterwards. Tree objects it encodes are kept (they are
// content-addressed and may be shared).
func (db *DB) Materialize(ctx context.Context, branch, seq int64) (cas.ID, error) {
	var root cas.ID
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		root, err = db.materializeTx(ctx, tx, branch, seq, false)
		return err
	})
	return root, err
}

// materializeTx replays from the nearest recorded root, or with full from
// the very first event of the branch (verify --rebuild).
func (db *DB) materializeTx(ctx context.Context, tx *sql.Tx, branch, seq int64, full bool) (cas.ID, error) {
	var baseSeq int64
	var rootb []byte
	q := `SELECT seq, root FROM events WHERE branch = ? AND seq <= ? AND root IS NOT NULL ORDER BY seq DESC LIMIT 1`
	args := []any{branch, seq}
	if full {
		// From the first recorded root after the last stretch art forget
		// removed: nothing before it can be replayed.
		q = `SELECT seq, root FROM events WHERE branch = ? AND seq <= ? AND root IS NOT NULL
			AND seq > (SELECT coalesce(max(to_seq), 0) FROM forgotten WHERE branch = ? AND to_seq < ?) ORDER BY seq LIMIT 1`
		args = append(args, branch, seq)
	}
	err := tx.QueryRowContext(ctx, q, args...).Scan(&baseSeq, &rootb)
	if errors.Is(err, sql.ErrNoRows) {
		if err := forgottenAt(ctx, tx, branch, 0, seq); err != nil {
			return cas.ID{}, err
		}
		return cas.ID{}, fmt.Errorf("%w: branch %d has no state at @%d", ErrRevNotFound, branch, seq)
	}
	if err != nil {
		return cas.ID{}, err
	}
	// Replaying across events art forget removed would give a wrong
	// state without an error: refuse instead.
	if err := forgottenAt(ctx, tx, branch, baseSeq, seq); err != nil {
		return cas.ID{}, err
	}
	var base cas.ID
	copy(base[:], rootb)
	if baseSeq == seq {
		return base, nil
	}
	var zero cas.ID
	res, err := tx.ExecContext(ctx, `INSERT INTO branches (name, head_hash, created_ns, deleted_ns) VALUES (NULL, ?, ?, ?)`, zero[:], db.now(), db.now())
	if err != nil {
		return cas.ID{}, err
	}
	scratch, _ := res.LastInsertId()
	defer func() {
		for _, q := range []string{`DELETE FROM nodes WHERE branch = ?`, `DELETE FROM dentries WHERE branch = ?`,
			`DELETE FROM link_groups WHERE branch = ?`, `DELETE FROM branches WHERE id = ?`} {
			tx.ExecContext(ctx, q, scratch)
		}
	}()
	p := newProj(ctx, tx, db.objs, scratch, 2, db.now())
	defer p.close()
	if err := p.reset(base); err != nil {
		return cas.ID{}, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, payload FROM events WHERE branch = ? AND seq > ? AND seq <= ? ORDER BY seq`, branch, baseSeq, seq)
	if err != nil {
		return cas.ID{}, err
	}
	// Read the events first: replay issues its own queries on the same
	// connection.
	type rec struct {
		seq     int64
		payload []byte
	}
	var evs []rec
	for rows.Next() {
		var r rec
		if err := rows.Scan(&r.seq, &r.payload); err != nil {
			rows.Close()
			return cas.ID{}, err
		}
		evs = append(evs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return cas.ID{}, err
	}
	for _, r := range evs {
		ev, err := DecodeEvent(r.payload)
		if err != nil {
			return cas.ID{}, fmt.Errorf("event %d: %w", r.seq, err)
		}
		if err := p.replay(ev); err != nil {
			return cas.ID{}, fmt.Errorf("%w: replay of event %d (%s %s) failed: %v", ErrCorrupt, r.seq, ev.Kind, termtext.QuotePath(ev.Path), err)
		}
	}
	return p.computeRoot()
}

// replay applies one recorded event to the projection.
func (p *proj) replay(ev *Event) error {
	switch ev.Kind {
	case EvBranch, EvCheckout:
		return p.reset(ev.Root)
	case EvSnapshot, EvBegin, EvEnd, EvExec, EvSyscall, EvWriteData, EvNet, EvMerge:
		return nil
	}
	parent, name, ino, err := p.resolve(ev.Path)
	if err != nil {
		return err
	}
	switch ev.Kind {
	case EvCreate, EvMkdir, EvSymlink:
		_, err = p.mknode(parent, name, ev.Attr)
		return err
	case EvUnlink:
		err = p.unlink(parent, name)
		return err
	case EvRmdir:
		return p.rmdir(parent, name)
	}
	if ino == 0 {
		return pathErr("replay "+ev.Kind.String(), string(ev.Path), syscall.ENOENT)
	}
	if ev.Kind != EvLink && ev.Kind != EvRename {
		n, err := p.get(ino)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case EvSetattr:
			_, err = p.setattr(n, ev.Mask, ev.Attr)
		case EvWrite:
			_, err = p.write(n, ev.Attr.Content, ev.Attr.Size, ev.Attr.MTime)
		case EvSetxattr:
			_, err = p.setxattr(n, ev.Name, ev.Value)
		case EvRemovexattr:
			_, err = p.removexattr(n, ev.Name)
		default:
			err = fmt.Errorf("unknown event kind %d", ev.Kind)
		}
		return err
	}
	np, nn, _, err := p.resolve(ev.Path2)
	if err != nil {
		return err
	}
	if ev.Kind == EvLink {
		_, err = p.link(ino, np, nn)
		return err
	}
	return p.rename(parent, name, np, nn, ev.Flags)
}
