package journal_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// Node numbers reserved for creates answered before their update
// (Batch.ReserveInos) are never given to another node: not by a create
// in the same transaction, nor in a later one, nor after a reopen; a
// create given a number outside a reservation is refused; and the
// numbers the reserved creates were given are the ones the journal
// keeps.
func TestReserveInos(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op, err := db.BeginOp(ctx, "main", "test", "reserve")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 0)
	create := func(name string, ino int64) (journal.Node, error) {
		var n journal.Node
		err := b.Update(ctx, func(tx *journal.Tx) error {
			var err error
			n, err = tx.CreateAt(journal.RootIno, []byte(name), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}, ino, 12345)
			return err
		})
		return n, err
	}
	lo, err := b.ReserveInos(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	// A create of its own, in the same transaction: past the block.
	n, err := create("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n.Ino >= lo && n.Ino < lo+4 {
		t.Fatalf("an ordinary create took inode %d of the reserved block [%d,%d)", n.Ino, lo, lo+4)
	}
	// The reserved numbers, out of order, as given.
	for i, ino := range []int64{lo + 2, lo} {
		n, err := create("r"+string(rune('a'+i)), ino)
		if err != nil {
			t.Fatal(err)
		}
		if n.Ino != ino || n.CTime != 12345 {
			t.Fatalf("CreateAt(%d) made inode %d ctime %d", ino, n.Ino, n.CTime)
		}
	}
	// A number never reserved is refused, and leaves no name.
	if _, err := create("bad", n.Ino+1000); err == nil {
		t.Fatal("CreateAt of an inode never reserved succeeded")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	// The next transaction reads the branch's next_ino, reservation included.
	n2, err := create("after", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n2.Ino < lo+4 || n2.Ino == n.Ino {
		t.Fatalf("a create after the commit took inode %d (block [%d,%d), plain %d)", n2.Ino, lo, lo+4, n.Ino)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"plain": n.Ino, "ra": lo + 2, "rb": lo, "after": n2.Ino}
	for name, ino := range want {
		var got journal.Node
		if err := op.Update(ctx, func(tx *journal.Tx) error {
			var err error
			got, err = tx.Lookup(journal.RootIno, []byte(name))
			return err
		}); err != nil {
			t.Fatalf("lookup %s: %v", name, err)
		}
		if got.Ino != ino {
			t.Fatalf("%s is inode %d, want %d", name, got.Ino, ino)
		}
	}
	var bad journal.Node
	if err := op.Update(ctx, func(tx *journal.Tx) error {
		var err error
		bad, err = tx.Lookup(journal.RootIno, []byte("bad"))
		return err
	}); err == nil && bad.Ino != 0 {
		t.Fatalf("the refused create left bad as inode %d", bad.Ino)
	}
	if err := op.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Rebuilt) > 0 {
		t.Fatalf("verify: %+v, rebuilt %v", rep.Problems, rep.Rebuilt)
	}
}
