package journal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artrt/art/journal"
)

// graphOf returns Graph(q) as op id -> "kind branch parents jump".
func graphOf(t *testing.T, db *journal.DB, q journal.GraphQuery) (map[int64]string, []int64) {
	t.Helper()
	ops, err := db.Graph(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	m := map[int64]string{}
	var ids []int64
	for i, o := range ops {
		if i > 0 && o.ID >= ops[i-1].ID {
			t.Errorf("ops not newest first: %d after %d", o.ID, ops[i-1].ID)
		}
		for _, p := range o.Parents {
			if p >= o.ID {
				t.Errorf("op %d has parent %d, not older", o.ID, p)
			}
		}
		s := fmt.Sprintf("%s %s %v", o.Kind, o.Branch, o.Parents)
		if o.Jump != 0 {
			s += fmt.Sprintf(" jump %d", o.Jump)
		}
		if o.Deleted {
			s += " deleted"
		}
		m[o.ID] = s
		ids = append(ids, o.ID)
	}
	return m, ids
}

// TestGraph: parents are the branch's previous op, the fork point's op for
// a branch's first op, the merged state's op for a merge; checkouts and
// undos jump; one branch's graph holds just its history.
func TestGraph(t *testing.T) {
	ctx := context.Background()
	h := newDAG(t)
	h.write("main")                                   // op 2
	base := h.snap("main")                            // op 3
	h.fork("a", base)                                 // op 4
	h.fork("b", base)                                 // op 5
	h.write("a")                                      // op 6
	mid := h.write("main")                            // op 7
	h.write("b")                                      // op 8
	h.checkout("b", base)                             // op 9: back to the base
	src := h.write("a")                               // op 10
	h.merge("main", src)                              // op 11
	h.write("a")                                      // op 12: after the merge
	h.fork("c", mid)                                  // op 13: from a state that is no snapshot
	if _, err := h.db.Undo(ctx, "main"); err != nil { // op 14: undoes the merge
		t.Fatal(err)
	}
	if _, err := h.db.DeleteBranch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	all, ids := graphOf(t, h.db, journal.GraphQuery{})
	if len(ids) != 14 {
		t.Fatalf("%d ops, want 14: %v", len(ids), all)
	}
	for id, want := range map[int64]string{
		1:  "branch main []",
		3:  "snapshot main [2]",
		4:  "branch a [3]",
		5:  "branch (deleted) [3] deleted",
		8:  "run (deleted) [5] deleted",
		9:  "checkout (deleted) [8] jump 3 deleted",
		11: "merge main [7 10]",
		12: "run a [10]",
		13: "branch c [7]",
		14: "undo main [11] jump 7",
	} {
		if all[id] != want {
			t.Errorf("op %d: %q, want %q", id, all[id], want)
		}
	}
	// main's history: its own ops, a's up to the merged state, nothing
	// of b or c, nor a's op after the merge.
	_, ids = graphOf(t, h.db, journal.GraphQuery{Branch: "main"})
	if got, want := fmt.Sprint(ids), "[14 11 10 7 6 4 3 2 1]"; got != want {
		t.Errorf("main's graph: ops %s, want %s", got, want)
	}
	_, ids = graphOf(t, h.db, journal.GraphQuery{Branch: "c"})
	if got, want := fmt.Sprint(ids), "[13 7 3 2 1]"; got != want {
		t.Errorf("c's graph: ops %s, want %s", got, want)
	}
	if _, err := h.db.Graph(ctx, journal.GraphQuery{Branch: "b"}); !errors.Is(err, journal.ErrBranchNotFound) {
		t.Errorf("graph of a deleted branch: %v, want ErrBranchNotFound", err)
	}
}
