package journal

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenWarmsReader pins Open's background reader connection
// (warmReader): on a new store (opened after the writer converted it to
// WAL) and on an existing one (opened beside the writer's), the warm-up
// leaves a connection in the pool (a read right after Open may have
// opened one more), and the pool keeps its limits - four open
// connections, two kept idle.
func TestOpenWarmsReader(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	for _, round := range []string{"new store", "existing store"} {
		db, err := Open(ctx, path, Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		if db.warmed == nil {
			db.Close()
			t.Fatalf("%s: no reader warm-up", round)
		}
		// At once, while the warm-up may still run.
		if _, err := db.Branch(ctx, DefaultBranch); err != nil {
			db.Close()
			t.Fatal(err)
		}
		<-db.warmed
		st := db.r.Stats()
		if st.OpenConnections < 1 || st.OpenConnections > 2 || st.MaxOpenConnections != readerConns {
			db.Close()
			t.Fatalf("%s: reader pool after the warm-up: %d open (want 1 or 2), limit %d (want %d)",
				round, st.OpenConnections, st.MaxOpenConnections, readerConns)
		}
		// All four at once, then back to the pool: two stay idle.
		var conns []*sql.Conn
		for range readerConns {
			c, err := db.r.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		if n := db.r.Stats().OpenConnections; n != readerConns {
			t.Errorf("%s: %d reader connections open at once, want %d", round, n, readerConns)
		}
		for _, c := range conns {
			c.Close()
		}
		if n := db.r.Stats().Idle; n != readerIdle {
			t.Errorf("%s: %d idle reader connections kept, want %d", round, n, readerIdle)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWarmReaderNoDeadlock: a read transaction begun right after Open,
// while the warm-up may still be waiting for a connection, that reads
// through the pool inside it (as cas does within journal.View) must not
// wait for ever. Holding the pool to one connection during the warm-up
// hung exactly so (a pull's host check, 30 minutes).
func TestWarmReaderNoDeadlock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.db")
	db, err := Open(ctx, path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for i := range 40 {
		db, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = func() error {
			tx, err := db.r.BeginTx(tctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				return err
			}
			defer tx.Rollback()
			var n int
			if err := tx.QueryRowContext(tctx, `SELECT count(*) FROM branches`).Scan(&n); err != nil {
				return err
			}
			// Through the pool, not the transaction.
			return db.r.QueryRowContext(tctx, `SELECT count(*) FROM branches`).Scan(&n)
		}()
		cancel()
		db.Close()
		if err != nil {
			t.Fatalf("open %d: a read through the pool inside a read transaction right after Open: %v", i, err)
		}
	}
}
