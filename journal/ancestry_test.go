package journal_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/journal"
)

// dag builds a store's branches for the ancestry tests, one step per
// call.
type dag struct {
	t  *testing.T
	db *journal.DB
	n  int
}

func newDAG(t *testing.T) *dag {
	return &dag{t: t, db: openStore(t)}
}

// write changes a file on branch and returns the head after it.
func (h *dag) write(branch string) journal.State {
	h.t.Helper()
	h.n++
	mustDo(h.t, h.db, branch, func(tx *journal.Tx) error {
		return writeFile(tx, fmt.Sprintf("%s-%d", branch, h.n), fmt.Sprint(h.n), int64(h.n))
	})
	return h.head(branch)
}

func (h *dag) head(branch string) journal.State {
	h.t.Helper()
	st, err := h.db.Head(context.Background(), branch)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *dag) snap(branch string) journal.State {
	h.t.Helper()
	s, err := h.db.TakeSnapshot(context.Background(), branch, "snap of "+branch)
	if err != nil {
		h.t.Fatal(err)
	}
	return journal.State{BranchID: s.BranchID, Branch: s.Branch, Seq: s.Seq, Root: s.Root, Snapshot: s.ID}
}

func (h *dag) fork(name string, from journal.State) {
	h.t.Helper()
	if _, err := h.db.CreateBranch(context.Background(), name, from); err != nil {
		h.t.Fatal(err)
	}
}

// merge simulates a merge op of from into branch: the marker, then a change.
func (h *dag) merge(branch string, from journal.State) journal.State {
	h.t.Helper()
	h.n++
	_, err := h.db.Do(context.Background(), branch, "merge", "merge", func(tx *journal.Tx) error {
		if err := tx.MarkMerge(from, "merge "+from.Branch); err != nil {
			return err
		}
		return writeFile(tx, fmt.Sprintf("merged-%d", h.n), "m", int64(h.n))
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.head(branch)
}

func (h *dag) checkout(branch string, to journal.State) {
	h.t.Helper()
	if _, err := h.db.Checkout(context.Background(), branch, to); err != nil {
		h.t.Fatal(err)
	}
}

// TestMergeBase: the newest state two histories share, by the ancestry
// rule of docs/architecture.md ("History graph and merge bases").
func TestMergeBase(t *testing.T) {
	for _, tc := range []struct {
		name string
		// build returns the two states and the base wanted (zero Seq:
		// none).
		build func(h *dag) (a, b, want journal.State)
	}{
		{"fork at a snapshot", func(h *dag) (a, b, want journal.State) {
			h.write("main")
			s1 := h.snap("main")
			h.fork("f", s1)
			h.write("main")
			return h.write("main"), h.write("f"), s1
		}},
		{"fork at a seq that is no snapshot", func(h *dag) (a, b, want journal.State) {
			h.snap("main")
			at := h.write("main")
			h.fork("f", at)
			h.write("f")
			return h.write("main"), h.write("f"), at
		}},
		{"fork of a fork, against the root branch", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f1", s1)
			h.fork("f2", h.write("f1"))
			h.write("f1")
			return h.write("main"), h.write("f2"), s1
		}},
		{"fork of a fork, against its source", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f1", s1)
			at := h.write("f1")
			h.fork("f2", at)
			return h.write("f1"), h.write("f2"), at
		}},
		{"one side is an ancestor of the other", func(h *dag) (a, b, want journal.State) {
			old := h.write("main")
			h.write("main")
			return old, h.write("main"), old
		}},
		{"merged, then both go on", func(h *dag) (a, b, want journal.State) {
			h.fork("f", h.snap(h.writeThen("main")))
			h.write("main")
			m := h.write("f")
			h.merge("main", m)
			h.write("f")
			return h.write("main"), h.write("f"), m
		}},
		{"merged twice: the second merge's source", func(h *dag) (a, b, want journal.State) {
			h.fork("f", h.snap(h.writeThen("main")))
			h.merge("main", h.write("f"))
			m2 := h.write("f")
			h.merge("main", m2)
			return h.write("main"), h.write("f"), m2
		}},
		{"criss-cross picks the greatest seq", func(h *dag) (a, b, want journal.State) {
			h.fork("f", h.snap(h.writeThen("main")))
			fromMain := h.write("main")
			fromF := h.write("f")
			h.merge("main", fromF)
			h.merge("f", fromMain)
			return h.write("main"), h.write("f"), fromF
		}},
		{"criss-cross the other way round", func(h *dag) (a, b, want journal.State) {
			h.fork("f", h.snap(h.writeThen("main")))
			fromF := h.write("f")
			fromMain := h.write("main")
			h.merge("main", fromF)
			h.merge("f", fromMain)
			return h.write("main"), h.write("f"), fromMain
		}},
		{"merge of the target into the source: the target's head", func(h *dag) (a, b, want journal.State) {
			h.fork("f", h.snap(h.writeThen("main")))
			h.write("f")
			m := h.write("main")
			h.merge("f", m)
			return m, h.write("f"), m
		}},
		{"checkout back on one side drops what it moved away from", func(h *dag) (a, b, want journal.State) {
			s0 := h.snap(h.writeThen("main"))
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.write("main")
			h.checkout("main", s0)
			return h.write("main"), h.write("f"), s0
		}},
		{"checkout to another branch's state takes its history", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.write("main")
			at := h.write("f")
			h.checkout("main", at)
			return h.write("main"), h.write("f"), at
		}},
		{"checkout to a third branch's state", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.fork("g", s1)
			h.write("f")
			h.write("main")
			at := h.write("g")
			h.checkout("f", at)
			h.write("g")
			// main's history meets f's only at the fork point, g's
			// state lies after it.
			return h.write("main"), h.write("f"), s1
		}},
		{"checkout to the empty tree keeps nothing", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.write("f")
			h.checkout("f", journal.State{Root: h.state0().Root})
			return h.write("main"), h.write("f"), journal.State{}
		}},
		{"undo returns to the history before the op", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.write("main")
			if _, err := h.db.Undo(context.Background(), "main"); err != nil {
				h.t.Fatal(err)
			}
			return h.head("main"), h.write("f"), s1
		}},
		{"undo of a merge: the merged state is no ancestor", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.merge("main", h.write("f"))
			if _, err := h.db.Undo(context.Background(), "main"); err != nil {
				h.t.Fatal(err)
			}
			return h.write("main"), h.write("f"), s1
		}},
		{"undo of a merge, then merged again", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.merge("main", h.write("f"))
			if _, err := h.db.Undo(context.Background(), "main"); err != nil {
				h.t.Fatal(err)
			}
			m := h.write("f")
			h.merge("main", m)
			return h.write("main"), h.write("f"), m
		}},
		{"merge after a checkout: both histories", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			h.fork("g", s1)
			h.merge("main", h.write("f"))
			if _, err := h.db.Undo(context.Background(), "main"); err != nil {
				h.t.Fatal(err)
			}
			fromG := h.write("g")
			h.merge("main", fromG)
			// f's merge was undone: against f only the fork point is
			// shared; against g, the state merged after the undo.
			if got, _, err := h.db.MergeBase(context.Background(), h.head("main"), h.head("f")); err != nil || got.Seq != s1.Seq {
				h.t.Errorf("base of main and f: @%d, %v; want @%d", got.Seq, err, s1.Seq)
			}
			h.write("g")
			return h.write("main"), h.head("g"), fromG
		}},
		{"undo of an undo restores the merge", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f", s1)
			m := h.write("f")
			merged := h.merge("main", m)
			if _, err := h.db.Undo(context.Background(), "main"); err != nil {
				h.t.Fatal(err)
			}
			h.checkout("main", merged) // what art checkout of the merged state does
			h.write("f")
			return h.write("main"), h.head("f"), m
		}},
		{"criss-cross after an undo on one side", func(h *dag) (a, b, want journal.State) {
			h.fork("f", h.snap(h.writeThen("main")))
			fromMain := h.write("main")
			fromF := h.write("f")
			h.merge("main", fromF)
			h.merge("f", fromMain)
			// main undoes its merge of f: f's merge of main stays, so
			// the newest shared state is main's own.
			if _, err := h.db.Undo(context.Background(), "main"); err != nil {
				h.t.Fatal(err)
			}
			return h.write("main"), h.write("f"), fromMain
		}},
		{"deleted source branch is walked through", func(h *dag) (a, b, want journal.State) {
			s1 := h.snap(h.writeThen("main"))
			h.fork("f1", s1)
			at := h.write("f1")
			h.fork("f2", at)
			gone, err := h.db.DeleteBranch(context.Background(), "f1")
			if err != nil {
				h.t.Fatal(err)
			}
			if got, _, err := h.db.MergeBase(context.Background(), gone, h.head("main")); err != nil || got.Seq != s1.Seq {
				h.t.Errorf("base of the deleted branch's head and main: @%d, %v; want @%d", got.Seq, err, s1.Seq)
			}
			h.write("main")
			want = at
			want.Branch = "" // its branch has no name any more
			return h.write("f2"), gone, want
		}},
		{"unrelated branches share nothing", func(h *dag) (a, b, want journal.State) {
			h.write("main")
			empty := h.state0()
			h.fork("other", journal.State{Root: empty.Root})
			return h.write("main"), h.write("other"), journal.State{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDAG(t)
			a, b, want := tc.build(h)
			for _, pair := range [][2]journal.State{{a, b}, {b, a}} {
				got, ok, err := h.db.MergeBase(context.Background(), pair[0], pair[1])
				if err != nil {
					t.Fatal(err)
				}
				if ok != (want.Seq != 0) {
					t.Fatalf("MergeBase(@%d, @%d) ok = %v, want %v (got @%d)", pair[0].Seq, pair[1].Seq, ok, want.Seq != 0, got.Seq)
				}
				if !ok {
					continue
				}
				if got.Seq != want.Seq || got.BranchID != want.BranchID || got.Branch != want.Branch || got.Root != want.Root || got.Snapshot != want.Snapshot {
					t.Errorf("MergeBase(@%d, @%d) = %s@%d root %s snap %s, want %s@%d root %s snap %s", pair[0].Seq, pair[1].Seq,
						got.Branch, got.Seq, got.Root.Short(), got.Snapshot.Short(), want.Branch, want.Seq, want.Root.Short(), want.Snapshot.Short())
				}
			}
			if rep, err := h.db.Verify(context.Background(), journal.VerifyOptions{Rebuild: true}); err != nil || !rep.OK() {
				t.Errorf("verify: %v %+v", err, rep)
			}
		})
	}
}

// writeThen writes on branch and returns the branch's name (for chaining
// into snap).
func (h *dag) writeThen(branch string) string {
	h.write(branch)
	return branch
}

// state0 is the store's first state (main's empty root).
func (h *dag) state0() journal.State {
	st, err := h.db.Resolve(context.Background(), "@1", "main")
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// TestMarkMerge: the marker is recorded with its source, changes no tree
// (the branch's state right after it is the state before it, not the
// source's root it names), replays and verifies.
func TestMarkMerge(t *testing.T) {
	ctx := context.Background()
	h := newDAG(t)
	h.fork("f", h.snap(h.writeThen("main")))
	src := h.write("f")
	before := h.write("main")
	op, err := h.db.Do(ctx, "main", "merge", "merge f", func(tx *journal.Tx) error {
		return tx.MarkMerge(src, "merge f\x1b[31m")
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := h.db.Events(ctx, journal.EventQuery{Op: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != journal.EvMerge || evs[0].FromBranch != src.BranchID || evs[0].FromSeq != src.Seq ||
		evs[0].Root != src.Root || evs[0].Text != "merge f\x1b[31m" {
		t.Fatalf("merge op's events: %+v", evs)
	}
	if got := journal.EvMerge.String(); got != "merge" {
		t.Errorf("EvMerge.String() = %q", got)
	}
	after := h.head("main")
	if after.Root != before.Root {
		t.Errorf("head root after the marker %s, want the branch's own %s", after.Root.Short(), before.Root.Short())
	}
	// Replay: from the nearest recorded root, which the marker must not be.
	root, err := h.db.Materialize(ctx, after.BranchID, evs[0].Seq)
	if err != nil || root != before.Root {
		t.Errorf("materialize right after the marker: %s, %v; want %s", root.Short(), err, before.Root.Short())
	}
	later := h.write("main")
	if root, err := h.db.Materialize(ctx, later.BranchID, later.Seq); err != nil || root != later.Root {
		t.Errorf("materialize after a change past the marker: %s, %v; want %s", root.Short(), err, later.Root.Short())
	}
	if rep, err := h.db.Verify(ctx, journal.VerifyOptions{Rebuild: true}); err != nil || !rep.OK() {
		t.Errorf("verify: %v %+v", err, rep)
	}
	for _, bad := range []journal.State{{}, {BranchID: src.BranchID}, {BranchID: src.BranchID, Seq: later.Seq + 100}} {
		_, err := h.db.Do(ctx, "main", "merge", "m", func(tx *journal.Tx) error { return tx.MarkMerge(bad, "m") })
		if err == nil {
			t.Errorf("MarkMerge(%s@%d) succeeded", bad.Branch, bad.Seq)
		}
	}
}

// TestMarkMergeNeedsNoBranchLock: the marker changes no tree, so a branch
// another session holds accepts it (the merge's changes after it are
// refused, as every tree change is).
func TestMarkMergeNeedsNoBranchLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.art")
	open := func() *journal.DB {
		db, err := journal.Open(ctx, path, journal.Options{Create: true, LockDir: filepath.Join(dir, "locks")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	holder, other := open(), open()
	mustDo(t, holder, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "one", 1) })
	src, err := holder.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := holder.LockBranch(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := other.Do(ctx, "main", "merge", "m", func(tx *journal.Tx) error { return tx.MarkMerge(src, "m") }); err != nil {
		t.Errorf("marker on a held branch: %v", err)
	}
	_, err = other.Do(ctx, "main", "merge", "m", func(tx *journal.Tx) error {
		if err := tx.MarkMerge(src, "m"); err != nil {
			return err
		}
		return writeFile(tx, "b", "x", 2)
	})
	if !inUse(err) {
		t.Errorf("a merge's change on a held branch: %v, want BranchInUseError", err)
	}
}

// TestMergeBaseHostileStore: ancestry edges (merge and checkout events)
// that do not point back in time (a cycle, or a source at or after the
// event) or name no branch are ErrCorrupt with the event named, not an
// endless walk; verify reports them.
func TestMergeBaseHostileStore(t *testing.T) {
	ctx := context.Background()
	type forge struct {
		name string
		// from returns the FromBranch/FromSeq to forge into f's event at
		// seq.
		from func(mainID, fID, seq int64) (int64, int64)
	}
	forges := []forge{
		{"source after the event", func(mainID, fID, seq int64) (int64, int64) { return mainID, seq + 5 }},
		{"source is the event itself (a cycle)", func(mainID, fID, seq int64) (int64, int64) { return fID, seq }},
		{"no source branch", func(mainID, fID, seq int64) (int64, int64) { return 0, seq - 1 }},
	}
	for _, kind := range []journal.EventKind{journal.EvMerge, journal.EvCheckout} {
		for _, tc := range forges {
			t.Run(kind.String()+"/"+tc.name, func(t *testing.T) { hostileEdge(t, ctx, kind, tc.from) })
		}
	}
}

// hostileEdge forges f's event of kind (f merged main, then checked out
// its own state after the merge) and checks MergeBase and verify.
func hostileEdge(t *testing.T, ctx context.Context, kind journal.EventKind, from func(mainID, fID, seq int64) (int64, int64)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := &dag{t: t, db: db}
	h.fork("f", h.snap(h.writeThen("main")))
	mainHead := h.write("main")
	h.checkout("f", h.merge("f", mainHead))
	h.write("main")
	fHead := h.head("f")
	evs, err := db.Events(ctx, journal.EventQuery{Branch: "f", Kind: kind})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%s events: %v %d", kind, err, len(evs))
	}
	ev := evs[0]
	ev.FromBranch, ev.FromSeq = from(mainHead.BranchID, fHead.BranchID, ev.Seq)
	raw := rawSQL(t, path)
	if _, err := raw.Exec(`UPDATE events SET payload = ? WHERE seq = ?`, ev.Encode(), ev.Seq); err != nil {
		t.Fatal(err)
	}
	_, _, err = db.MergeBase(ctx, h.head("main"), fHead)
	if !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("MergeBase over a forged edge: %v, want ErrCorrupt", err)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || (p.Seq == ev.Seq && p.What == "chain" && strings.Contains(p.Detail, "source"))
	}
	if !found {
		t.Errorf("verify did not name event %d: %+v", ev.Seq, rep.Problems)
	}
}
