package journal

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// View runs fn on a Tx at the head of branch inside one read transaction:
// every read fn makes sees the same state, while other processes go on
// writing. It is for deciding, without writing, whether a write is needed
// at all (a push that finds nothing changed). Nothing fn does is kept: a
// write fails (the reader connections are query-only, as is a store opened
// ReadOnly), and so does reading a part of the branch whose projection
// would have to be written first (a collapsed directory, a live tree not
// yet encoded). View takes no write lock and records no op.
func (db *DB) View(ctx context.Context, branch string, fn func(*Tx) error) error {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	b, err := branchByName(ctx, tx, branch)
	if err != nil {
		return err
	}
	op := &Op{db: db, BranchID: b.ID, Branch: b.Name, Kind: "view", BeforeSeq: b.HeadSeq}
	t, err := op.openTx(ctx, tx)
	if err != nil {
		return err
	}
	defer t.p.close()
	return fn(t)
}

// HeadSnapshot returns the snapshot at the branch's head, and false if
// anything happened on the branch since its last snapshot (or it has
// none).
func (t *Tx) HeadSnapshot() (Snapshot, bool, error) {
	ss, err := t.db.snapshotsQ(t.p.ctx, t.p.tx, `WHERE s.branch = ? AND s.seq = ?`, t.op.BranchID, t.headSeq)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("head snapshot of %s: %w", termtext.Quote(t.op.Branch), err)
	}
	if len(ss) != 1 || ss[0].ID != t.head {
		return Snapshot{}, false, nil
	}
	return ss[0], true, nil
}

// StatCacheStats is StatCacheTree without the records' content ids (left
// zero): what deciding whether anything changed needs. SQLite hands the
// records over as one string of self-delimiting records, as the cost of
// a row scan is mostly the calls from Go into SQLite per row and column
// (measured: a third of StatCacheTree's time for the same records).
func (t *Tx) StatCacheStats(dir string, limit int) (map[string]map[string]StatCache, bool, error) {
	s, err := t.p.stmt(`SELECT count(*), coalesce(group_concat(rec, ''), '') FROM (
		SELECT length(CAST(path AS BLOB)) || ' ' || size || ' ' || mtime_ns || ' ' || ctime_ns || ' ' || host_ino || ' ' ||
			(kind | (coalesce(mode, 4294967295) << 8) | (racy << 40)) || ' ' || CAST(path AS BLOB) AS rec
		FROM import_cache WHERE branch = ? AND path >= ? AND path < ? LIMIT ?)`)
	if err != nil {
		return nil, false, err
	}
	var n int
	var recs []byte
	if err := s.QueryRowContext(t.p.ctx, t.op.BranchID, []byte(dir+"/"), []byte(dir+"0"), limit+1).Scan(&n, &recs); err != nil {
		return nil, false, fmt.Errorf("import records of %s: %w", dir, err)
	}
	if n > limit {
		return nil, false, nil
	}
	out := map[string]map[string]StatCache{}
	bad := func() (map[string]map[string]StatCache, bool, error) {
		return nil, false, fmt.Errorf("%w: import records of %s: malformed", ErrCorrupt, dir)
	}
	var nums [6]int64
	for got := 0; len(recs) > 0; got++ {
		if got == n {
			return bad()
		}
		for i := range nums {
			sp := bytes.IndexByte(recs, ' ')
			if sp < 0 {
				return bad()
			}
			v, err := strconv.ParseInt(string(recs[:sp]), 10, 64)
			if err != nil {
				return bad()
			}
			nums[i], recs = v, recs[sp+1:]
		}
		if nums[0] < 0 || nums[0] > int64(len(recs)) {
			return bad()
		}
		path := recs[:nums[0]]
		recs = recs[nums[0]:]
		i := bytes.LastIndexByte(path, '/')
		if i < len(dir) || !bytes.HasPrefix(path, []byte(dir+"/")) {
			return bad()
		}
		c := StatCache{Size: nums[1], MTime: nums[2], CTime: nums[3], Ino: uint64(nums[4]),
			Kind: cas.EntryKind(nums[5] & 0xff), Mode: uint32(nums[5] >> 8), Racy: nums[5]>>40&1 != 0}
		kids := out[string(path[:i])]
		if kids == nil {
			kids = map[string]StatCache{}
			out[string(path[:i])] = kids
		}
		kids[string(path[i+1:])] = c
	}
	return out, true, nil
}
