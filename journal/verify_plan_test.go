package journal

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
)

func TestCheckSnapshot(t *testing.T) {
	s := Snapshot{ID: cas.Sum([]byte("snap")), Seq: 5, BranchID: 2, Root: cas.Sum([]byte("root")), EventCount: 5}
	good := snapshotEvent{hash: s.ID[:], root: s.Root[:], branch: 2, kind: EvSnapshot, index: 5}
	for _, c := range []struct {
		name string
		ev   func(e *snapshotEvent)
		want []string
	}{
		{"sound", func(*snapshotEvent) {}, nil},
		{"event missing", func(e *snapshotEvent) { *e = snapshotEvent{missing: true, index: 5} }, []string{"its event is missing"}},
		{"another kind", func(e *snapshotEvent) { e.kind = EvMkdir }, []string{"does not match its event"}},
		{"another branch", func(e *snapshotEvent) { e.branch = 3 }, []string{"does not match its event"}},
		{"another hash", func(e *snapshotEvent) { e.hash = e.hash[:31] }, []string{"does not match its event"}},
		{"another root", func(e *snapshotEvent) { e.root = nil }, []string{"does not match its event"}},
		{"events removed", func(e *snapshotEvent) { e.index = 4 }, []string{"chain has 4 events up to it, snapshot recorded 5 (events removed?)"}},
		{"missing and removed", func(e *snapshotEvent) { *e = snapshotEvent{missing: true} },
			[]string{"its event is missing", "chain has 0 events up to it, snapshot recorded 5 (events removed?)"}},
	} {
		ev := good
		c.ev(&ev)
		var got []string
		for _, p := range checkSnapshot(s, ev) {
			if p.What != "snapshot" || p.Seq != 5 || p.Object != s.ID.String() {
				t.Errorf("%s: problem %+v does not name the snapshot", c.name, p)
			}
			got = append(got, p.Detail)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// testChain is the rows of a chain of mkdirs on branch 1, seqs 1..n; the
// events in roots are snapshots recording a root.
func testChain(n int64, roots ...int64) []chainRow {
	return testChainMerges(n, nil, roots...)
}

// testChainMerges is testChain with merge markers (merging branch 2's
// @1) at the seqs in merges.
func testChainMerges(n int64, merges []int64, roots ...int64) []chainRow {
	var prev cas.ID
	var out []chainRow
	for seq := int64(1); seq <= n; seq++ {
		ev := &Event{Branch: 1, Op: 1, Time: seq, Kind: EvMkdir, Path: []byte(fmt.Sprint("d", seq))}
		if slices.Contains(roots, seq) {
			ev = &Event{Branch: 1, Op: 1, Time: seq, Kind: EvSnapshot, Root: cas.Sum([]byte(fmt.Sprint("root", seq)))}
		}
		if slices.Contains(merges, seq) {
			ev = &Event{Branch: 1, Op: 1, Time: seq, Kind: EvMerge, Root: cas.Sum([]byte("merged")), FromBranch: 2, FromSeq: 1}
		}
		payload := ev.Encode()
		h := chainHash(prev, seq, payload)
		r := chainRow{seq: seq, op: 1, time: seq, kind: int(ev.Kind), path: ev.Path, payload: payload, prev: append([]byte(nil), prev[:]...), hash: h[:]}
		r.root = rootColumn(ev)
		out = append(out, r)
		prev = h
	}
	return out
}

func TestChainCheck(t *testing.T) {
	full := testChain(6, 4)
	hash := func(i int) cas.ID { return cas.ID(full[i-1].hash) }
	without := func(from, to int64) []chainRow {
		var out []chainRow
		for _, r := range full {
			if r.seq < from || r.seq > to {
				out = append(out, r)
			}
		}
		return out
	}
	// merged: a merge marker at 3 kept between two forgotten stretches
	// (art forget keeps ancestry edges), then a root at 5 or none.
	merged := func(roots ...int64) ([]chainRow, []gap) {
		c := testChainMerges(6, []int64{3}, roots...)
		h := func(i int) cas.ID { return cas.ID(c[i-1].hash) }
		return []chainRow{c[0], c[2], c[4], c[5]}, []gap{{from: 2, to: 2, count: 1, firstPrev: h(1), lastID: h(2)},
			{from: 4, to: 4, count: 1, firstPrev: h(3), lastID: h(4)}}
	}
	mergedRoot, mergedGaps := merged(5)
	mergedNoRoot, _ := merged()
	mergedNoRootGaps := func() []gap { _, g := merged(); return g }()
	for _, c := range []struct {
		name        string
		rows        []chainRow
		gaps        []gap
		head        cas.ID
		headSeq     int64
		count, live int64
		want        []string
	}{
		{name: "sound", rows: full, head: hash(6), headSeq: 6, count: 6, live: 6},
		{name: "an event removed", rows: without(3, 3), head: hash(6), headSeq: 6, count: 6, live: 5,
			want: []string{"@4 previous-hash link broken", "@6 branch records 6 events, chain has 5"}},
		{name: "truncated", rows: without(6, 6), head: hash(6), headSeq: 6, count: 6, live: 5,
			want: []string{"@5 branch records 6 events, chain has 5", "@5 branch head does not match"}},
		{name: "a forgotten stretch joined, replayed from a root", rows: without(2, 3), head: hash(6), headSeq: 6, count: 6, live: 4,
			gaps: []gap{{from: 2, to: 3, count: 2, firstPrev: hash(1), lastID: hash(3)}}},
		{name: "a forgotten stretch with no root after it", rows: without(4, 5), head: hash(6), headSeq: 6, count: 6, live: 4,
			gaps: []gap{{from: 4, to: 5, count: 2, firstPrev: hash(3), lastID: hash(5)}},
			want: []string{"@6 the event after a forgotten stretch records no root"}},
		{name: "a forgotten stretch that does not join", rows: without(2, 3), head: hash(6), headSeq: 6, count: 6, live: 4,
			gaps: []gap{{from: 2, to: 3, count: 2, firstPrev: hash(2), lastID: hash(3)}},
			want: []string{"@2 a forgotten stretch of the chain does not join"}},
		{name: "a merge marker amid forgotten stretches, a root after", rows: mergedRoot, head: cas.ID(mergedRoot[3].hash), headSeq: 6, count: 6, live: 4,
			gaps: mergedGaps},
		{name: "a merge marker after a forgotten stretch, no root after", rows: mergedNoRoot, head: cas.ID(mergedNoRoot[3].hash), headSeq: 6, count: 6, live: 4,
			gaps: mergedNoRootGaps, want: []string{"@5 the event after a forgotten stretch records no root"}},
		{name: "a forgotten stretch past the head", rows: full, head: hash(6), headSeq: 6, count: 6, live: 6,
			gaps: []gap{{from: 8, to: 9, count: 2}}, want: []string{"@8 a forgotten stretch lies past the branch head"}},
	} {
		st := &verifyStates{roots: map[cas.ID]string{}, manifests: map[cas.ID]string{}}
		ch := &chainCheck{branch: 1, label: "main", gaps: c.gaps, states: st}
		for _, r := range c.rows {
			ch.event(r)
		}
		ch.finish(c.head, c.headSeq, c.count)
		var got []string
		for _, p := range ch.problems {
			got = append(got, fmt.Sprintf("@%d %s", p.Seq, p.Detail))
		}
		ok := len(got) == len(c.want) && ch.live == c.live
		for i := range c.want {
			ok = ok && strings.HasPrefix(got[i], c.want[i])
		}
		if !ok {
			t.Errorf("%s: %q (%d live), want %q (%d)", c.name, got, ch.live, c.want, c.live)
		}
		if slices.ContainsFunc(c.rows, func(r chainRow) bool { return r.seq == 4 }) && st.roots[cas.Sum([]byte("root4"))] != "main@4" {
			t.Errorf("%s: roots %v, want main@4's", c.name, st.roots)
		}
	}
}

// TestReachCheckNamesDamagedPaths: a missing manifest two states share,
// a missing chunk, and an object re-hashing found damaged, each with the
// paths that depend on it.
func TestReachCheckNamesDamagedPaths(t *testing.T) {
	ctx := context.Background()
	raw, err := sql.Open(driverName, filepath.Join(t.TempDir(), "objs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if _, err := raw.Exec(cas.ObjectsSchema); err != nil {
		t.Fatal(err)
	}
	objs := cas.NewStore(raw)
	put := func(k cas.Kind, b []byte) cas.ID {
		id, _, err := objs.Put(ctx, k, b)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	tree := func(es ...cas.Entry) cas.ID {
		id, _, err := objs.PutTree(ctx, &cas.Tree{Entries: es})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	goneManifest, goneChunk, hashBad := cas.Sum([]byte("m")), cas.Sum([]byte("c")), cas.Sum([]byte("bad"))
	withGoneChunk := put(cas.KindManifest, (&cas.Manifest{Size: 3, Extents: []cas.Extent{{ID: goneChunk, Len: 3}}}).Encode())
	shared := tree(cas.Entry{Name: []byte("f"), Kind: cas.EntryFile, Mode: 0o644, Size: 1, Target: goneManifest})
	rootA := tree(cas.Entry{Name: []byte("d"), Kind: cas.EntryDir, Mode: 0o755, Target: shared},
		cas.Entry{Name: []byte("g"), Kind: cas.EntryFile, Mode: 0o644, Size: 3, Target: withGoneChunk},
		cas.Entry{Name: []byte("h"), Kind: cas.EntryFile, Mode: 0o644, Size: 1, Target: goneManifest})
	rootB := tree(cas.Entry{Name: []byte("e"), Kind: cas.EntryDir, Mode: 0o755, Target: shared},
		cas.Entry{Name: []byte("x"), Kind: cas.EntryFile, Mode: 0o644, Size: 1, Target: hashBad})
	st := &verifyStates{roots: map[cas.ID]string{rootA: "branch a", rootB: "branch b"},
		manifests: map[cas.ID]string{goneManifest: "a@3:old", withGoneChunk: "a@2:g"}}
	bad := map[cas.ID]*Problem{hashBad: {What: "object", Object: hashBad.String(), Detail: "hash mismatch"}}
	db := &DB{objs: objs}
	if err := db.verifyReach(ctx, st, bad); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id     cas.ID
		paths  []string
		states []string
	}{
		// shared is sound and walked once, from the first state (by label).
		{goneManifest, []string{"branch a:h", "branch a:d/f", "a@3:old"}, []string{"branch a", "a@3"}},
		{goneChunk, []string{"branch a:g"}, []string{"branch a"}},
		{hashBad, []string{"branch b:x"}, []string{"branch b"}},
	} {
		p := bad[c.id]
		if p == nil {
			t.Errorf("%s: not found damaged", c.id.Short())
			continue
		}
		got := slices.Clone(p.Paths)
		slices.Sort(got)
		want := slices.Clone(c.paths)
		slices.Sort(want)
		if !slices.Equal(got, want) || p.Affected != len(c.paths) || len(p.States) != len(c.states) {
			t.Errorf("%s: paths %q (%d affected), states %q; want %q, %q", c.id.Short(), p.Paths, p.Affected, p.States, c.paths, c.states)
		}
	}
	if len(bad) != 3 {
		t.Errorf("%d damaged objects, want 3", len(bad))
	}
}
