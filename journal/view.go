package journal

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

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

// StatRecord is one import record of StatCacheStats: a directory's
// child's name and what was recorded of it.
type StatRecord struct {
	Name string
	StatCache
}

// StatCacheStats is StatCacheTree without the records' content ids (left
// zero), each directory's records as a slice in name order (byte order,
// as a sorted host listing): what deciding whether anything changed
// needs, and it can be compared with a listing in one pass without a map
// per directory. SQLite hands the records over as one string of
// self-delimiting records, as the cost of a row scan is mostly the calls
// from Go into SQLite per row and column (measured: a third of
// StatCacheTree's time for the same records); the names are substrings
// of it. A record out of order (a duplicate, a store whose index lies)
// or not of the form written here is ErrCorrupt.
func (t *Tx) StatCacheStats(dir string, limit int) (map[string][]StatRecord, bool, error) {
	lo, hi := []byte(dir+"/"), []byte(dir+"0")
	// The bound first, apart: a LIMIT on the records themselves needs a
	// subquery, which SQLite materializes (measured: it doubled the
	// query's time).
	more, err := t.p.stmt(`SELECT 1 FROM import_cache WHERE branch = ? AND path >= ? AND path < ? LIMIT 1 OFFSET ?`)
	if err != nil {
		return nil, false, err
	}
	var one int
	switch err := more.QueryRowContext(t.p.ctx, t.op.BranchID, lo, hi, limit).Scan(&one); {
	case err == nil:
		return nil, false, nil
	case err != sql.ErrNoRows:
		return nil, false, fmt.Errorf("import records of %s: %w", dir, err)
	}
	// Rows come in path order (the range scan of the primary key);
	// parseStatRecords refuses any other.
	s, err := t.p.stmt(`SELECT count(*), coalesce(group_concat(
		length(CAST(path AS BLOB)) || ' ' || size || ' ' || mtime_ns || ' ' || ctime_ns || ' ' || host_ino || ' ' ||
			(kind | (coalesce(mode, 4294967295) << 8) | (racy << 40)) || ' ' || CAST(path AS BLOB), ''), '')
		FROM import_cache WHERE branch = ? AND path >= ? AND path < ?`)
	if err != nil {
		return nil, false, err
	}
	var n int
	// A string: the driver's own copy of SQLite's text is handed over
	// as it is (a []byte would be copied once more).
	var recs string
	if err := s.QueryRowContext(t.p.ctx, t.op.BranchID, lo, hi).Scan(&n, &recs); err != nil {
		return nil, false, fmt.Errorf("import records of %s: %w", dir, err)
	}
	if n > limit {
		return nil, false, nil // written since the bound was read: not in a read transaction
	}
	out, ok := parseStatRecords(recs, dir+"/", n)
	if !ok {
		return nil, false, fmt.Errorf("%w: import records of %s: malformed", ErrCorrupt, dir)
	}
	return out, true, nil
}

// parseStatRecords parses StatCacheStats's string of n records below
// prefix ("/ws/"). Records come in path order, so a directory's come in
// name order, interleaved with its subdirectories'. Two passes: the first
// counts each directory's records, so that all of them go into one array,
// each directory's a part of it, with no slice grown (records are parsed
// on every capture check); each run of one directory's records costs one
// map access, not each record.
func parseStatRecords(recs, prefix string, n int) (map[string][]StatRecord, bool) {
	index := map[string]int{} // directory -> its number
	var counts []int
	// each calls f with every record's directory number and the position
	// of its fields (the length's), and returns false if one is malformed.
	each := func(f func(dir, at int, path string) bool) bool {
		cur, curDir := -1, ""
		got := 0
		for pos := 0; pos < len(recs); got++ {
			if got == n {
				return false
			}
			at := pos
			l, next, ok := parseDecimal(recs, pos)
			if !ok {
				return false
			}
			pos = next
			for range 5 {
				sp := strings.IndexByte(recs[pos:], ' ')
				if sp < 0 {
					return false
				}
				pos += sp + 1
			}
			if l < 0 || l > int64(len(recs)-pos) {
				return false
			}
			path := recs[pos : pos+int(l)]
			pos += int(l)
			i := strings.LastIndexByte(path, '/')
			if i < len(prefix)-1 || !strings.HasPrefix(path, prefix) {
				return false
			}
			if d := path[:i]; cur < 0 || d != curDir {
				k, ok := index[d]
				if !ok {
					k = len(counts)
					index[d] = k
					counts = append(counts, 0)
				}
				cur, curDir = k, d
			}
			if !f(cur, at, path) {
				return false
			}
		}
		return got == n
	}
	if !each(func(dir, _ int, _ string) bool { counts[dir]++; return true }) {
		return nil, false
	}
	all := make([]StatRecord, n)
	next := make([]int, len(counts)) // where each directory's next record goes
	for k, sum := 0, 0; k < len(counts); k++ {
		next[k], sum = sum, sum+counts[k]
	}
	start := slices.Clone(next)
	var nums [6]int64
	ok := each(func(dir, at int, path string) bool {
		for i := range nums {
			v, after, ok := parseDecimal(recs, at)
			if !ok {
				return false
			}
			nums[i], at = v, after
		}
		name := path[strings.LastIndexByte(path, '/')+1:]
		j := next[dir]
		if j > start[dir] && all[j-1].Name >= name {
			return false // out of order, or a duplicate
		}
		next[dir]++
		all[j] = StatRecord{Name: name, StatCache: StatCache{Size: nums[1], MTime: nums[2], CTime: nums[3], Ino: uint64(nums[4]),
			Kind: cas.EntryKind(nums[5] & 0xff), Mode: uint32(nums[5] >> 8), Racy: nums[5]>>40&1 != 0}}
		return true
	})
	if !ok {
		return nil, false
	}
	out := make(map[string][]StatRecord, len(index))
	for d, k := range index {
		out[d] = all[start[k]:next[k]:next[k]]
	}
	return out, true
}

// parseDecimal parses the signed decimal integer at s[pos:] ended by a
// space, and returns it and the position after the space.
func parseDecimal(s string, pos int) (int64, int, bool) {
	neg := pos < len(s) && s[pos] == '-'
	if neg {
		pos++
	}
	start := pos
	var v uint64
	for ; pos < len(s) && s[pos] != ' '; pos++ {
		c := s[pos] - '0'
		if c > 9 || pos-start >= 19 { // 19 digits cannot overflow a uint64
			return 0, 0, false
		}
		v = v*10 + uint64(c)
	}
	if pos == start || pos == len(s) {
		return 0, 0, false
	}
	if neg {
		if v > 1<<63 {
			return 0, 0, false
		}
		return -int64(v), pos + 1, true
	}
	if v > 1<<63-1 {
		return 0, 0, false
	}
	return int64(v), pos + 1, true
}
