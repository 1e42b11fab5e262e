package journal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/artrt/art/journal"
)

// TestBeginOpWithEndWith pins the one-transaction begin and end a run
// uses: the op and its first event are kept together or not at all (a
// failed fn leaves no op), and the last event, the snapshot and the op's
// end likewise (a failed fn leaves the op open and nothing of fn), after
// which End still closes it.
func TestBeginOpWithEndWith(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	raw := rawSQL(t, db.Path())
	boom := errors.New("boom")
	events := count(t, raw, `SELECT count(*) FROM events`)

	_, err := db.BeginOpWith(ctx, journal.DefaultBranch, "run", "fails", func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvBegin, Text: "fails"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("BeginOpWith with a failing fn: %v", err)
	}
	if n := count(t, raw, `SELECT count(*) FROM ops WHERE description = 'fails'`); n != 0 {
		t.Fatalf("a failed BeginOpWith left %d ops", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM events`); n != events {
		t.Fatalf("a failed BeginOpWith left %d events", n-events)
	}

	op, err := db.BeginOpWith(ctx, journal.DefaultBranch, "run", "true", func(tx *journal.Tx) error {
		return tx.Record(journal.Event{Kind: journal.EvBegin, Text: "true"})
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(ctx, journal.EventQuery{Op: op.ID})
	if err != nil || len(evs) != 1 || evs[0].Kind != journal.EvBegin {
		t.Fatalf("the op's events after BeginOpWith: %v %v", evs, err)
	}

	status := 3
	err = op.EndWith(ctx, &status, func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvEnd, Status: 3, Text: "exit 3"}); err != nil {
			return err
		}
		if _, err := tx.Snapshot("run true"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("EndWith with a failing fn: %v", err)
	}
	if n := count(t, raw, `SELECT count(*) FROM ops WHERE id = ? AND end_ns IS NULL`, op.ID); n != 1 {
		t.Fatal("a failed EndWith ended the op")
	}
	if n := count(t, raw, `SELECT count(*) FROM events WHERE op = ?`, op.ID); n != 1 {
		t.Fatalf("a failed EndWith left %d events of the op, want 1 (the begin)", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM snapshots WHERE message = 'run true'`); n != 0 {
		t.Fatalf("a failed EndWith left %d snapshots", n)
	}

	var snap journal.Snapshot
	err = op.EndWith(ctx, &status, func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvEnd, Status: 3, Text: "exit 3"}); err != nil {
			return err
		}
		var err error
		snap, err = tx.Snapshot("run true")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := db.Ops(ctx, journal.LogQuery{Branch: journal.DefaultBranch})
	if err != nil {
		t.Fatal(err)
	}
	var got *journal.OpInfo
	for i := range ops {
		if ops[i].ID == op.ID {
			got = &ops[i]
		}
	}
	if got == nil || got.End == 0 || got.Status == nil || *got.Status != 3 || got.Events != 3 { // begin, end, snapshot
		t.Fatalf("the op after EndWith: %+v", got)
	}
	// The op's end is the head the snapshot recorded: the end is after
	// the update in the one transaction.
	if got.EndSeq != snap.Seq {
		t.Fatalf("the op ends at seq %d, its snapshot is at %d", got.EndSeq, snap.Seq)
	}
}
