package cas

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// randBytes returns n deterministic pseudo-random bytes (splitmix64 from
// seed), independent of math/rand so pinned values never drift.
func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n+7)
	s := seed
	for i := 0; i < n; i += 8 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		for j := 0; j < 8; j++ {
			b[i+j] = byte(z >> (8 * j))
		}
	}
	return b[:n:n]
}

// openDB opens a fresh store database with the objects table.
func openDB(tb testing.TB) *sql.DB {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "store.db")
	db, err := sql.Open("sqlite3", path+"?_journal_mode=WAL")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(context.Background(), ObjectsSchema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	return db
}

func newTestStore(tb testing.TB) (*Store, *sql.DB) {
	db := openDB(tb)
	return NewStore(db), db
}
