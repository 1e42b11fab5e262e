package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

func TestBatchSavepoints(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op, err := db.BeginOp(ctx, "main", "test", "batch")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 0)
	mkdir := func(name string) error {
		return b.Update(ctx, func(tx *journal.Tx) error {
			_, err := tx.Create(journal.RootIno, []byte(name), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
			return err
		})
	}
	if err := mkdir("a"); err != nil {
		t.Fatal(err)
	}
	// An update that appends an event and then fails leaves nothing.
	boom := errors.New("boom")
	err = b.Update(ctx, func(tx *journal.Tx) error {
		if _, err := tx.Create(journal.RootIno, []byte("ghost"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if err := mkdir("a"); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second mkdir a: %v, want EEXIST", err)
	}
	if err := mkdir("b"); err != nil {
		t.Fatal(err)
	}
	// Nothing is visible to other connections before Commit.
	if evs, _ := db.Events(ctx, journal.EventQuery{Branch: "main", Op: op.ID}); len(evs) != 0 {
		t.Fatalf("%d events visible before commit", len(evs))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(ctx, journal.EventQuery{Branch: "main", Op: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range evs {
		names = append(names, string(e.Path))
	}
	if got, want := len(names), 2; got != want || names[0] != "a" || names[1] != "b" {
		t.Fatalf("events after commit: %q, want [a b] (the failed update must leave none)", names)
	}
	// The timer commits on its own.
	b2 := op.NewBatch(10*time.Millisecond, 0)
	if err := b2.Update(ctx, func(tx *journal.Tx) error {
		_, err := tx.Create(journal.RootIno, []byte("c"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs, _ := db.Events(ctx, journal.EventQuery{Branch: "main", Path: []byte("c")})
		if len(evs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("timer did not commit the batch")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := op.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify after batches: %v %+v", err, rep)
	}
}
