package journal_test

import (
	"context"
	"slices"
	"testing"

	"github.com/artrt/art/journal"
)

// TestBlameAttribution pins how art blame names the command behind a
// change: the latest exec of the pid in the same operation before the
// change, else the first after it (tracer records arrive in batches);
// an exec without a JSON value (older stores) is read from its Text; a
// change no process made names its operation; the first snapshot at or
// after a change holds it.
func TestBlameAttribution(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	run := mustDo(t, db, "main", func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvExec, PID: 7, Text: "sh\x00-c\x00old",
			Value: []byte(`{"kind":"exec","pid":7,"argv":["sh","-c","old"],"cwd":"/home/agent/ws","source":"trace"}`)}); err != nil {
			return err
		}
		tx.SetPID(7)
		if err := writeFile(tx, "f", "one", 1); err != nil {
			return err
		}
		tx.SetPID(8) // pid 8's exec reaches the journal after its change
		if err := writeFile(tx, "f", "two", 2); err != nil {
			return err
		}
		tx.SetPID(0)
		if err := tx.Record(journal.Event{Kind: journal.EvExec, PID: 8, Text: "cp\x00a\x00f"}); err != nil {
			return err
		}
		_, err := tx.Snapshot("after")
		return err
	})
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "f", "three", 3) })

	lines, err := db.Blame(ctx, "main", "f")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(lines), 3; got != want {
		t.Fatalf("blame f: %d lines, want %d: %+v", got, want, lines)
	}
	first, second, third := lines[0], lines[1], lines[2]
	if got, want := first.Kind, "create"; got != want {
		t.Errorf("first change kind %q, want %q", got, want)
	}
	if got, want := first.Argv, []string{"sh", "-c", "old"}; !slices.Equal(got, want) || first.Cwd != "/home/agent/ws" || first.PID != 7 {
		t.Errorf("first change: argv %q cwd %q pid %d; want %q in /home/agent/ws by pid 7", got, first.Cwd, first.PID, want)
	}
	if got, want := second.Argv, []string{"cp", "a", "f"}; !slices.Equal(got, want) || second.Cwd != "" {
		t.Errorf("second change: argv %q cwd %q; want %q from the exec's Text, no cwd", got, second.Cwd, want)
	}
	if first.Snapshot == "" || first.Snapshot != second.Snapshot {
		t.Errorf("snapshots %q, %q: want both held by the snapshot after them", first.Snapshot, second.Snapshot)
	}
	if first.Op != run.ID || first.OpKind != "run" {
		t.Errorf("first change op %d %q, want %d run", first.Op, first.OpKind, run.ID)
	}
	if third.Argv != nil || third.PID != 0 || third.Snapshot != "" || third.Op == run.ID || third.Op == 0 {
		t.Errorf("third change %+v: want no process, no snapshot yet, its own op", third)
	}

	// The attribution is per operation: pid 7 in a later op is not the
	// sh of the first.
	evs, err := db.Events(ctx, journal.EventQuery{Branch: "main", Path: []byte("f")})
	if err != nil {
		t.Fatal(err)
	}
	attr, err := db.LoadAttribution(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	other := evs[0]
	other.Op = run.ID + 100
	if v, ok := attr.Command(&other); ok {
		t.Errorf("a change of another op by pid 7 is attributed to %q", v.Argv)
	}
	if !journal.IsChange(journal.EvWrite) || journal.IsChange(journal.EvExec) || journal.IsChange(journal.EvSnapshot) {
		t.Errorf("IsChange: write must be a change, exec and snapshot must not")
	}
}
