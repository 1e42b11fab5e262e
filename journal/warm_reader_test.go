package journal

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestOpenWarmsReader pins Open's background reader connection
// (warmReader): on a new store (opened after the writer converted it to
// WAL) and on an existing one (opened beside the writer's), a read right
// after Open shares the warmed connection instead of opening a second,
// and once the warm-up is over the pool has its limits back - four open
// connections, two kept idle - not the one it was held to meanwhile.
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
		if st.OpenConnections != 1 || st.MaxOpenConnections != readerConns {
			db.Close()
			t.Fatalf("%s: reader pool after the warm-up: %d open (want 1), limit %d (want %d)",
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
