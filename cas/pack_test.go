package cas

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A large file stored through PutSparseFile (hashed on the workers,
// putDataParallel) gets the manifest PutFile gives the same bytes, stores
// a repeated chunk once, packs the chunks past packFrom and reads back
// verified through the packs.
func TestPutSparseFileParallelPacked(t *testing.T) {
	ctx := context.Background()
	a := randBytes(21, 3<<20)
	data := append(append(append([]byte{}, a...), a...), randBytes(22, 2<<20)...)
	data = append(data, make([]byte, 1<<20)...) // zeros as data: tiny frames stay inline
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	serial, _ := newTestStore(t)
	wantID, wantSt, err := serial.PutFile(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t)
	packs := OpenPacks(filepath.Join(t.TempDir(), "store.packs"), false)
	t.Cleanup(func() { packs.Close() })
	s := NewPackedStore(db, packs)
	id, st, err := s.PutSparseFile(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if id != wantID || st.Chunks != wantSt.Chunks || st.NewChunks != wantSt.NewChunks || st.Size != wantSt.Size {
		t.Fatalf("PutSparseFile = %s %+v, PutFile = %s %+v", id.Short(), st, wantID.Short(), wantSt)
	}
	if err := packs.Sync(); err != nil {
		t.Fatal(err)
	}
	var packed, dups int
	if err := db.QueryRow(`SELECT count(*) FROM objects WHERE pack != 0`).Scan(&packed); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) - count(DISTINCT id) FROM objects`).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if packed < 100 || dups != 0 {
		t.Fatalf("%d objects packed, %d duplicates", packed, dups)
	}
	var small int
	if err := db.QueryRow(`SELECT count(*) FROM objects WHERE pack != 0 AND pack_len < ?`, minPackStored).Scan(&small); err != nil || small != 0 {
		t.Fatalf("%d packed objects under %d bytes: %v", small, minPackStored, err)
	}
	var out bytes.Buffer
	if _, err := s.ReadFile(ctx, id, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("read back: %v (equal %v)", err, bytes.Equal(out.Bytes(), data))
	}
	if err := s.Each(ctx, func(id ID, _ Kind) error { return s.Verify(ctx, id) }); err != nil {
		t.Fatal(err)
	}
	// A store without packs reads nothing packed: each is a CorruptError.
	if _, err := NewStore(db).ReadFile(ctx, id, &out); err == nil {
		t.Fatal("packed objects read without packs")
	}
}

// A cancelled PutSparseFile of large content fails and stores no manifest.
func TestPutSparseFileParallelCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, randBytes(23, 6<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, db := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.PutSparseFile(ctx, f); err == nil {
		t.Fatal("cancelled PutSparseFile succeeded")
	}
	var manifests int
	if err := db.QueryRow(`SELECT count(*) FROM objects WHERE kind = ?`, KindManifest).Scan(&manifests); err != nil || manifests != 0 {
		t.Fatalf("%d manifests stored: %v", manifests, err)
	}
}
