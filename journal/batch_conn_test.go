package journal

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

// TestBatchDropsBrokenConn pins that a Batch whose transaction ended
// behind its back (here an update commits it, so the RELEASE of its
// savepoint and then its ROLLBACK fail) reports the loss, leaves the
// writer pool usable (it drops a connection it cannot roll back), and
// fails from then on: it cannot know what it lost.
func TestBatchDropsBrokenConn(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "b.db"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op, err := db.BeginOp(ctx, "main", "test", "conn")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 0)
	mkdir := func(name string) error {
		return b.Update(ctx, func(tx *Tx) error {
			_, err := tx.Create(RootIno, []byte(name), Attr{Kind: cas.EntryDir, Mode: 0o755})
			return err
		})
	}
	if err := mkdir("a"); err != nil {
		t.Fatal(err)
	}
	err = b.Update(ctx, func(tx *Tx) error { return tx.p.exec(`COMMIT`) })
	if err == nil {
		t.Fatal("an update that ended the transaction reported no error")
	}
	// The writer pool holds one connection: a leftover transaction on it
	// would make this BEGIN fail ("cannot start a transaction within a
	// transaction").
	if err := db.writeTx(ctx, func(tx *sql.Tx) error { return nil }); err != nil {
		t.Fatalf("writer after the broken batch: %v", err)
	}
	if err := mkdir("b"); !errors.Is(err, ErrBatchFailed) {
		t.Fatalf("update after the broken batch: %v, want ErrBatchFailed", err)
	}
	if err := b.Commit(); !errors.Is(err, ErrBatchFailed) {
		t.Fatalf("commit after the broken batch: %v, want ErrBatchFailed", err)
	}
	n := 0
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM dentries d JOIN branches b ON b.id = d.branch WHERE b.name = 'main' AND d.parent = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// "a" committed with the sabotage's COMMIT; "b" was refused.
	if got, want := n, 1; got != want {
		t.Fatalf("root holds %d names, want %d", got, want)
	}
}
