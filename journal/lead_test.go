package journal_test

import (
	"context"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestOpLeadAndDiscard: an op's lead event is appended only with its first
// other event, also through a Batch and across a failed update; an op
// that appended nothing is discarded (gone from the log, the branch head
// unmoved); one that appended something is not.
func TestOpLeadAndDiscard(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	ops := func() int {
		t.Helper()
		o, err := db.Ops(ctx, journal.LogQuery{Branch: "main"})
		if err != nil {
			t.Fatal(err)
		}
		return len(o)
	}
	before, err := db.Branch(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	n0 := ops()

	// Nothing appended: discarded.
	op, err := db.BeginOp(ctx, "main", "import", "push /ws")
	if err != nil {
		t.Fatal(err)
	}
	op.SetLead(journal.Event{Kind: journal.EvBegin, Text: "push /ws"})
	b := op.NewBatch(0, 10)
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		_, err := tx.Lookup(journal.RootIno, []byte("nothing"))
		if err == nil {
			t.Error("found a file in an empty store")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if !op.LeadPending() {
		t.Fatal("the lead was appended without another event")
	}
	if gone, err := op.Discard(ctx); err != nil || !gone {
		t.Fatalf("Discard of an empty op = %v, %v; want true", gone, err)
	}
	if got := ops(); got != n0 {
		t.Fatalf("%d ops after a discarded one, want %d", got, n0)
	}
	if after, _ := db.Branch(ctx, "main"); after.HeadSeq != before.HeadSeq || after.HeadHash != before.HeadHash {
		t.Fatalf("head moved: %+v, was %+v", after, before)
	}

	// A failed update that appended rolls the lead back with it; the
	// next change appends it first.
	op, err = db.BeginOp(ctx, "main", "import", "push /ws")
	if err != nil {
		t.Fatal(err)
	}
	op.SetLead(journal.Event{Kind: journal.EvBegin, Text: "push /ws"})
	b = op.NewBatch(0, 10)
	failing := b.Update(ctx, func(tx *journal.Tx) error {
		if _, err := tx.Create(journal.RootIno, []byte("x"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
			return err
		}
		return context.Canceled // fails after writing
	})
	if failing == nil {
		t.Fatal("the failing update succeeded")
	}
	if !op.LeadPending() {
		t.Fatal("a rolled-back update took the lead with it")
	}
	if err := b.Update(ctx, func(tx *journal.Tx) error {
		_, err := tx.Create(journal.RootIno, []byte("d"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if op.LeadPending() {
		t.Fatal("the lead is still pending after a change")
	}
	if gone, err := op.Discard(ctx); err != nil || gone {
		t.Fatalf("Discard of an op with events = %v, %v; want false", gone, err)
	}
	if err := op.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(ctx, journal.EventQuery{Op: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []journal.EventKind
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if len(kinds) != 2 || kinds[0] != journal.EvBegin || kinds[1] != journal.EvMkdir {
		t.Fatalf("the op's events are %v, want begin then mkdir", kinds)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("verify: %v", rep.Problems)
	}
}
