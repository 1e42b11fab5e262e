package journal

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

// TestRedoChainChecked: a log whose records pass their check but whose
// events do not chain, or belong to another branch, is refused before
// anything of it is applied.
func TestRedoChainChecked(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.art"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ev := (&Event{Kind: EvCreate, Branch: 1, Op: 1, Path: []byte("x"), Attr: Attr{Kind: cas.EntryFile}}).Encode()
	good := redoEventRow{seq: 7, branch: 1, op: 1, kind: int64(EvCreate), payload: ev, prev: cas.ID{1}}
	good.hash = chainHash(good.prev, good.seq, good.payload)
	forged := good
	forged.hash[0] ^= 1
	other := good
	other.branch = 2
	unlinked := good // chains to nothing before it
	unlinked.prev = cas.ID{9}
	unlinked.hash = chainHash(unlinked.prev, unlinked.seq, unlinked.payload)
	for name, evs := range map[string][]redoEventRow{
		"forged hash":  {forged},
		"other branch": {other},
		"broken link":  {good, unlinked},
	} {
		err := db.writeTx(ctx, func(tx *sql.Tx) error {
			_, _, err := db.applyRedo(ctx, tx, &parsedRedo{branch: 1, events: evs})
			return err
		})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: applied with %v, want ErrCorrupt", name, err)
		}
	}
}

// TestRedoKeptWhenCommitFails: a close acknowledged by its redo record is
// kept even when the commit after it fails (an fdatasync of the packs,
// here): the Batch leaves its log, the process's close of the store does
// not trim the packed bytes the log names, and the next open replays it.
func TestRedoKeptWhenCommitFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.art")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	op, err := db.BeginOp(ctx, "main", "run", "test")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 1<<30)
	b.LogCloses()
	big := make([]byte, 3<<20) // packed
	rand.Read(big)
	var id cas.ID
	if err := b.Update(ctx, func(tx *Tx) error {
		var err error
		if id, _, err = tx.Objects().PutFile(ctx, bytes.NewReader(big)); err != nil {
			return err
		}
		_, err = tx.Create(RootIno, []byte("big"), Attr{Kind: cas.EntryFile, Mode: 0o644, Content: id, Size: int64(len(big))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(); err != nil || b.Logged() != 1 {
		t.Fatalf("persist: %v, %d records", err, b.Logged())
	}
	db.syncFault = func() error { return fmt.Errorf("injected: %w", syscall.EIO) }
	if err := b.Close(); err == nil {
		t.Fatal("the batch's last commit succeeded despite the failed sync")
	}
	db.syncFault = nil
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := db.Recovered(); rec.Logs != 1 || len(rec.Failed) != 0 {
		t.Fatalf("recovered %+v, want the kept log replayed", rec)
	}
	var buf bytes.Buffer
	if _, err := db.Objects().ReadFile(ctx, id, &buf); err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("the logged file after recovery: %v (%d bytes)", err, buf.Len())
	}
	st, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := db.Objects().GetTree(ctx, st.Root)
	if err != nil || len(tr.Entries) != 1 || string(tr.Entries[0].Name) != "big" || tr.Entries[0].Target != id {
		t.Fatalf("the recovered tree: %+v, %v", tr, err)
	}
}
