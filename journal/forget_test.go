package journal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// sessions runs n sessions on branch: each writes a big file of its own
// random content (so each session's content is distinct and gc can tell
// it apart), deletes the previous one, touches a shared file, and ends
// with a snapshot. It returns the snapshots, oldest first.
func sessions(t testing.TB, db *journal.DB, branch string, from, n int) []journal.Snapshot {
	t.Helper()
	ctx := context.Background()
	var out []journal.Snapshot
	for i := from; i < from+n; i++ {
		r := rand.New(rand.NewSource(int64(i)))
		big := make([]byte, 200_000)
		r.Read(big)
		mustDo(t, db, branch, func(tx *journal.Tx) error {
			if err := writeFile(tx, fmt.Sprintf("big%d", i), string(big), int64(i)); err != nil {
				return err
			}
			return writeFile(tx, "log", fmt.Sprintf("session %d\n", i), int64(i))
		})
		if i > 0 {
			mustDo(t, db, branch, func(tx *journal.Tx) error {
				err := tx.Unlink(journal.RootIno, []byte(fmt.Sprintf("big%d", i-1)))
				if errors.Is(err, syscall.ENOENT) {
					return nil
				}
				return err
			})
		}
		s, err := db.TakeSnapshot(ctx, branch, fmt.Sprintf("session %d", i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// liveSeqs lists the seqs of branch's remaining events.
func liveSeqs(t testing.TB, db *journal.DB, branch string) []int64 {
	t.Helper()
	evs, err := db.Events(context.Background(), journal.EventQuery{Branch: branch})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func TestForgetKeepsChosenStatesAndFreesTheRest(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	snaps := sessions(t, db, "main", 0, 6)
	// Live work after the last snapshot: always kept.
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "live", "after the last snapshot", 99) })
	head := headRoot(t, db, "main")
	// Every state from the older kept snapshot on, by seq, before forget:
	// the newest kept unit replays from it; the events that led to it go
	// with the snapshots before it.
	keepFrom := snaps[4].Seq
	want := map[int64]map[string]string{}
	var dropped []int64
	for _, seq := range liveSeqs(t, db, "main") {
		if seq < keepFrom {
			dropped = append(dropped, seq)
			continue
		}
		want[seq] = treeMap(t, db.Objects(), resolve(t, db, fmt.Sprintf("@%d", seq)).Root, true)
	}
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil { // the scratch trees of the resolves above
		t.Fatal(err)
	}
	before, err := db.GC(ctx, journal.GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}

	dry, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Last: 2}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Branches) != 1 || len(dry.Branches[0].Forget) != 4 || len(dry.Branches[0].Keep) != 2 || dry.Branches[0].Events == 0 {
		t.Fatalf("dry run: %+v", dry.Branches)
	}
	if got, _ := db.Snapshots(ctx, "main"); len(got) != 6 {
		t.Fatalf("dry run removed snapshots: %d left", len(got))
	}

	rep, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Last: 2}, Who: "test"})
	if err != nil {
		t.Fatal(err)
	}
	bf := rep.Branches[0]
	if len(bf.Forget) != 4 || bf.Events != dry.Branches[0].Events || bf.Anchors != 0 || bf.Op == 0 {
		t.Fatalf("forget: %+v", bf)
	}
	mustVerify(t, db)
	if got := headRoot(t, db, "main"); got != head {
		t.Fatalf("head changed: %s -> %s", head.Short(), got.Short())
	}
	for seq, st := range want {
		if d := mapDiff(st, treeMap(t, db.Objects(), resolve(t, db, fmt.Sprintf("@%d", seq)).Root, true)); d != "" {
			t.Fatalf("kept state @%d changed:\n%s", seq, d)
		}
	}
	// The kept snapshots resolve; forgotten ones, their events and REV~N
	// past them say so.
	for _, s := range snaps[4:] {
		if got := resolve(t, db, s.ID.String()[:12]).Root; got != s.Root {
			t.Fatalf("kept snapshot %s resolves to %s", s.ID.Short(), got.Short())
		}
	}
	for _, rev := range []string{snaps[0].ID.String()[:12], snaps[3].ID.String()[:12], fmt.Sprintf("@%d", dropped[1]),
		fmt.Sprintf("@%d", snaps[4].Seq-1), "main~3"} {
		_, err := db.Resolve(ctx, rev, "main")
		if !errors.Is(err, journal.ErrForgotten) || !errors.Is(err, journal.ErrRevNotFound) || !strings.Contains(err.Error(), "forgotten") {
			t.Fatalf("resolve %s after forget: %v", rev, err)
		}
	}
	fr, err := db.Forgotten(ctx, "main")
	if err != nil || len(fr) == 0 || fr[0].Op != bf.Op {
		t.Fatalf("forgotten ranges: %v %+v", err, fr)
	}
	ops, err := db.Ops(ctx, journal.LogQuery{Branch: "main", Limit: 1})
	if err != nil || ops[0].Kind != "forget" || !strings.Contains(ops[0].Description, "by test") {
		t.Fatalf("op log: %v %+v", err, ops)
	}

	// gc now frees the forgotten sessions' content: four 200 KB files.
	after, err := db.GC(ctx, journal.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.BytesAfter > before.BytesAfter-3*200_000 {
		t.Fatalf("gc after forget: %d stored bytes, was %d; want >= 600 KB less", after.BytesAfter, before.BytesAfter)
	}
	mustVerify(t, db)
	if rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true}); err != nil || !rep.OK() {
		t.Fatalf("verify --rebuild: %v %+v", err, rep)
	}
	allStates(t, db) // every remaining event's state materializes

	// Writing on, undoing the last op and forgetting again (ranges join).
	more := sessions(t, db, "main", 6, 2)
	if _, err := db.Undo(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Forget(ctx, journal.ForgetOptions{All: true, Policy: journal.Retention{Last: 1}}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
	if got := resolve(t, db, more[1].ID.String()[:12]).Root; got != more[1].Root {
		t.Fatal("newest snapshot lost")
	}
	allStates(t, db)
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
	allStates(t, db)
}

// A policy that keeps every snapshot changes nothing.
func TestForgetKeepAllIsANoop(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	sessions(t, db, "main", 0, 3)
	n := len(liveSeqs(t, db, "main"))
	rep, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Last: 10}})
	if err != nil || len(rep.Branches[0].Forget) != 0 || rep.Branches[0].Events != 0 {
		t.Fatalf("forget keep-last 10: %v %+v", err, rep)
	}
	if m := len(liveSeqs(t, db, "main")); m != n {
		t.Fatalf("%d events before, %d after", n, m)
	}
	if _, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}}); err == nil {
		t.Fatal("forget without a rule succeeded")
	}
}

// History since a running operation began stays, whatever the policy.
func TestForgetKeepsWhatARunningOpNeeds(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	snaps := sessions(t, db, "main", 0, 2)
	op, err := db.BeginOp(ctx, "main", "run", "a session still running")
	if err != nil {
		t.Fatal(err)
	}
	more := sessions(t, db, "main", 2, 3)
	rep, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Last: 1}})
	if err != nil {
		t.Fatal(err)
	}
	bf := rep.Branches[0]
	// The op began right at snaps[1]: that snapshot and all after it stay,
	// the one before it is not needed.
	if len(bf.Forget) != 1 || bf.Forget[0].ID != snaps[0].ID || len(bf.Keep) != 4 || bf.Protected == "" {
		t.Fatalf("forget with a running op: %+v", bf)
	}
	if _, err := db.Resolve(ctx, fmt.Sprintf("@%d", op.BeforeSeq), "main"); err != nil {
		t.Fatalf("the running op's starting state: %v", err)
	}
	for _, s := range more {
		resolve(t, db, s.ID.String()[:12])
	}
	mustVerify(t, db)
}

// verify still notices a chain cut behind forget's back.
func TestVerifyNoticesEventsRemovedAfterForget(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	sessions(t, db, "main", 0, 4)
	if _, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Last: 2}}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
	seqs := liveSeqs(t, db, "main")
	raw := rawSQL(t, db.Path())
	if _, err := raw.Exec(`DELETE FROM events WHERE seq = ?`, seqs[len(seqs)/2]); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	rep, err := db.Verify(ctx, journal.VerifyOptions{})
	if err != nil || rep.OK() {
		t.Fatalf("verify after removing an event: %v %+v", err, rep)
	}
}

// When the newest snapshot is dropped, its event stays as the root the
// live work after it replays from.
func TestForgetNewestSnapshotLeavesAnAnchor(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	snaps := sessions(t, db, "main", 0, 3)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "live", "live work", 7) })
	seqs := liveSeqs(t, db, "main")
	last := seqs[len(seqs)-1]
	want := treeMap(t, db.Objects(), resolve(t, db, fmt.Sprintf("@%d", last)).Root, true)
	rep, err := db.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Snapshots: []cas.ID{snaps[0].ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if bf := rep.Branches[0]; len(bf.Forget) != 2 || bf.Anchors != 1 {
		t.Fatalf("forget: %+v", bf)
	}
	mustVerify(t, db)
	if d := mapDiff(want, treeMap(t, db.Objects(), resolve(t, db, fmt.Sprintf("@%d", last)).Root, true)); d != "" {
		t.Fatalf("live state changed:\n%s", d)
	}
	if _, err := db.Resolve(ctx, fmt.Sprintf("@%d", snaps[2].Seq-1), "main"); !errors.Is(err, journal.ErrForgotten) {
		t.Fatalf("a dropped unit's event: %v", err)
	}
	allStates(t, db)
}

// TestForgetKeepsMergeBases: art forget keeps the branch, checkout and
// merge events, so after the middle history of two forked and merged
// branches is forgotten (and gc has run) the merge base is the same state
// with the same, still readable, root; undo's cut is kept too; the history
// graph's edges are unchanged; verify passes.
func TestForgetKeepsMergeBases(t *testing.T) {
	ctx := context.Background()
	h := newDAG(t)
	db := h.db
	s := sessions(t, db, "main", 0, 2)
	fork := journal.State{BranchID: s[1].BranchID, Branch: "main", Seq: s[1].Seq, Root: s[1].Root, Snapshot: s[1].ID}
	h.fork("f", fork)
	h.fork("g", fork)
	sessions(t, db, "main", 2, 2)
	sessions(t, db, "f", 10, 2)
	sessions(t, db, "g", 20, 1)
	h.merge("g", h.head("main")) // g's base with main becomes main's head
	h.merge("main", h.head("f")) // merged, then undone: f is not merged
	if _, err := db.Undo(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	sessions(t, db, "main", 4, 2)
	sessions(t, db, "f", 12, 2)
	sessions(t, db, "g", 21, 2)
	pairs := [][2]string{{"main", "f"}, {"main", "g"}, {"f", "g"}}
	bases := func() []journal.State {
		var out []journal.State
		for _, p := range pairs {
			got, ok, err := db.MergeBase(ctx, h.head(p[0]), h.head(p[1]))
			if err != nil || !ok {
				t.Fatalf("MergeBase(%s, %s): %v %v", p[0], p[1], ok, err)
			}
			out = append(out, got)
		}
		return out
	}
	before := bases()
	if before[0].Seq != fork.Seq || before[0].Root != fork.Root {
		t.Fatalf("base of main and f before forget: @%d, want the fork point @%d", before[0].Seq, fork.Seq)
	}
	graphBefore, _ := graphOf(t, db, journal.GraphQuery{})
	rep, err := db.Forget(ctx, journal.ForgetOptions{All: true, Policy: journal.Retention{Last: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bf := range rep.Branches {
		if bf.Events == 0 {
			t.Fatalf("forget removed nothing of %s: %+v", bf.Branch, bf)
		}
	}
	if _, err := db.Resolve(ctx, fork.Snapshot.String(), "main"); !errors.Is(err, journal.ErrForgotten) {
		t.Fatalf("the fork point's snapshot after forget: %v, want it forgotten", err)
	}
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
	after := bases()
	for i, p := range pairs {
		b, a := before[i], after[i]
		if a.BranchID != b.BranchID || a.Seq != b.Seq || a.Root != b.Root {
			t.Errorf("MergeBase(%s, %s) after forget: %s@%d root %s, before %s@%d root %s", p[0], p[1],
				a.Branch, a.Seq, a.Root.Short(), b.Branch, b.Seq, b.Root.Short())
		}
		if d := mapDiff(treeMap(t, db.Objects(), b.Root, true), treeMap(t, db.Objects(), a.Root, true)); d != "" {
			t.Errorf("base of %s and %s unreadable after gc: %s", p[0], p[1], d)
		}
	}
	graphAfter, _ := graphOf(t, db, journal.GraphQuery{})
	for id, want := range graphBefore {
		if graphAfter[id] != want {
			t.Errorf("graph op %d after forget: %q, want %q", id, graphAfter[id], want)
		}
	}
}

// TestMergeBaseRefusesAHistoryForgottenWithItsBranchPoint: a store an
// older art forgot dropped branch events; the merge base cannot be known
// then, and MergeBase says so (ErrForgotten) instead of answering with an
// older state or none.
func TestMergeBaseRefusesAHistoryForgottenWithItsBranchPoint(t *testing.T) {
	ctx := context.Background()
	h := newDAG(t)
	h.fork("f", h.snap(h.writeThen("main")))
	h.write("main")
	fHead := h.write("f")
	evs, err := h.db.Events(ctx, journal.EventQuery{Branch: "f", Kind: journal.EvBranch})
	if err != nil || len(evs) != 1 {
		t.Fatalf("branch events: %v %d", err, len(evs))
	}
	raw := rawSQL(t, h.db.Path())
	if _, err := raw.Exec(`DELETE FROM events WHERE seq = ?`, evs[0].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO forgotten (branch, from_seq, to_seq, count, first_prev, last_hash, op, time_ns) VALUES (?, ?, ?, 1, zeroblob(32), zeroblob(32), 1, 0)`,
		fHead.BranchID, evs[0].Seq, evs[0].Seq); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.db.MergeBase(ctx, h.head("main"), fHead); !errors.Is(err, journal.ErrForgotten) {
		t.Fatalf("MergeBase with f's branch point forgotten: %v, want ErrForgotten", err)
	}
}
