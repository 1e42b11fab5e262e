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

// RemoteInfo is a remote known to the store (art remote add).
type RemoteInfo struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// AddRemote records remote name at url. An existing name wraps
// ErrRemoteExists.
func (db *DB) AddRemote(ctx context.Context, name, url string) error {
	if name == "" || strings.ContainsAny(name, "/:") || strings.TrimSpace(name) != name {
		return fmt.Errorf("invalid remote name %s: use letters, digits, . _ -", termtext.Quoted(name))
	}
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM remotes WHERE name = ?`, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %s", ErrRemoteExists, termtext.Quote(name))
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO remotes (name, url) VALUES (?, ?)`, name, url)
		return err
	})
}

// Remotes lists the known remotes by name.
func (db *DB) Remotes(ctx context.Context) ([]RemoteInfo, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT name, url FROM remotes ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []RemoteInfo{}
	for rows.Next() {
		var r RemoteInfo
		if err := rows.Scan(&r.Name, &r.URL); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RemoteURL returns the URL of remote name, or an error wrapping
// ErrRemoteNotFound.
func (db *DB) RemoteURL(ctx context.Context, name string) (string, error) {
	var url string
	err := db.r.QueryRowContext(ctx, `SELECT url FROM remotes WHERE name = ?`, name).Scan(&url)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: %s", ErrRemoteNotFound, termtext.Quote(name))
	}
	return url, err
}

// RemoveRemote forgets remote name; a missing one wraps ErrRemoteNotFound.
func (db *DB) RemoveRemote(ctx context.Context, name string) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM remotes WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrRemoteNotFound, termtext.Quote(name))
			}
			return err
		}
		return nil
	})
}

// ReceiveObjects runs fn with an object store inside one write transaction:
// the objects fn stores are committed together if it returns nil and none
// of them is if it fails, so a transfer that meets a bad object leaves the
// store as it was.
func (db *DB) ReceiveObjects(ctx context.Context, fn func(objs *cas.Store) error) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error { return fn(db.objs.With(tx)) })
}

// GCGeneration names the last completed art gc. A transfer reads it before
// it first looks at which objects the store has, and hands it to
// MoveBranch: objects found present in one transaction and referenced in a
// later one are safe only if no gc ran in between (see ErrGCRaced).
func (db *DB) GCGeneration(ctx context.Context) (int64, error) {
	return gcGeneration(ctx, db.r)
}

func gcGeneration(ctx context.Context, q gcQuerier) (int64, error) {
	var g int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(time_ns), 0) FROM gc_marks WHERE by_gc = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("read gc generation: %w", err)
	}
	return g, nil
}

// MoveBranch sets branch name to root by compare-and-swap: it succeeds only
// if the branch's head hash is still expect (the zero id: the branch must
// not exist, and is created). The move is an op of the given kind holding
// one checkout event, so art log shows it and undo reverts it. A head that
// moved meanwhile wraps ErrHeadMoved and changes nothing. Every object
// under root must already be in the store, and gcGen is the GCGeneration
// read before the caller first checked that: if a gc completed since, the
// move wraps ErrGCRaced and changes nothing, because an object the caller
// saw may have been collected.
func (db *DB) MoveBranch(ctx context.Context, name string, expect, root cas.ID, kind, desc string, gcGen int64) (Branch, error) {
	if err := ValidBranchName(name); err != nil {
		return Branch{}, err
	}
	var b Branch
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if g, err := gcGeneration(ctx, tx); err != nil {
			return err
		} else if g != gcGen {
			return fmt.Errorf("%w: move branch %s", ErrGCRaced, termtext.Quote(name))
		}
		cur, err := branchByName(ctx, tx, name)
		switch {
		case errors.Is(err, ErrBranchNotFound):
			if !expect.IsZero() {
				return fmt.Errorf("%w: branch %s was deleted", ErrHeadMoved, termtext.Quote(name))
			}
			b, err = db.createBranchTx(ctx, tx, name, State{Root: root}, desc)
			return err
		case err != nil:
			return err
		case cur.HeadHash != expect:
			return fmt.Errorf("%w: branch %s is at %s, expected %s", ErrHeadMoved, termtext.Quote(name), cur.HeadHash.Short(), expect.Short())
		}
		op, err := db.beginOpTx(ctx, tx, name, kind, desc)
		if err != nil {
			return err
		}
		if err := op.updateTx(ctx, tx, func(t *Tx) error { return t.reset(EvCheckout, State{Root: root}, desc) }); err != nil {
			return err
		}
		if err := op.endTx(ctx, tx, nil); err != nil {
			return err
		}
		b, err = branchByName(ctx, tx, name)
		return err
	})
	return b, err
}

// BranchRoots returns the roots recorded on branch name's chain (its
// branch, checkout and snapshot events), newest first, at most limit:
// the states the branch is known to have passed through.
func (db *DB) BranchRoots(ctx context.Context, name string, limit int) ([]cas.ID, error) {
	b, err := db.Branch(ctx, name)
	if err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT root FROM events WHERE branch = ? AND root IS NOT NULL ORDER BY seq DESC LIMIT ?`, b.ID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []cas.ID
	for rows.Next() {
		var r []byte
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		var id cas.ID
		copy(id[:], r)
		out = append(out, id)
	}
	return out, rows.Err()
}

// HasRoot reports whether root is recorded anywhere on branch name's chain,
// including snapshots art forget dropped from it.
func (db *DB) HasRoot(ctx context.Context, name string, root cas.ID) (bool, error) {
	b, err := db.Branch(ctx, name)
	if err != nil {
		return false, err
	}
	var one int
	// A snapshot art forget dropped still counts: the state was the
	// branch's, so replacing it loses nothing the user did not let go.
	err = db.r.QueryRowContext(ctx, `SELECT 1 FROM events WHERE branch = ?1 AND root = ?2
		UNION ALL SELECT 1 FROM forgotten_snapshots WHERE branch = ?1 AND root = ?2 LIMIT 1`, b.ID, root[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// PackIndexes returns the pack indexes cached for remote (by pack name).
// The caller checks them: they are remote data.
func (db *DB) PackIndexes(ctx context.Context, remote string) (map[string][]byte, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT name, idx FROM remote_packs WHERE remote = ?`, remote)
	if err != nil {
		return nil, fmt.Errorf("read pack index cache: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var name string
		var idx []byte
		if err := rows.Scan(&name, &idx); err != nil {
			return nil, fmt.Errorf("read pack index cache: %w", err)
		}
		out[name] = idx
	}
	return out, rows.Err()
}

// CachePackIndexes records pack indexes of remote (name -> bytes) in one
// transaction, replacing what was recorded under the same names.
func (db *DB) CachePackIndexes(ctx context.Context, remote string, idx map[string][]byte) error {
	if len(idx) == 0 {
		return nil
	}
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		for name, b := range idx {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO remote_packs (remote, name, idx) VALUES (?, ?, ?)`, remote, name, b); err != nil {
				return fmt.Errorf("cache pack index: %w", err)
			}
		}
		return nil
	})
}
