package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// A pack directory that is a symbolic link (a hostile store's
// STORE.packs -> /elsewhere) is refused before anything in it is read,
// listed, locked or removed: nothing outside the store is touched.
func TestPacksRefuseSymlinkedDir(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "store.packs")
	db := openDB(t)
	packs := OpenPacks(dir, false)
	s := NewPackedStore(db, packs)
	data := append(randBytes(31, 3<<20), randBytes(32, 3<<20)...)
	path := filepath.Join(base, "big")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := s.PutSparseFile(ctx, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := packs.Close(); err != nil {
		t.Fatal(err)
	}
	nums, err := OpenPacks(dir, true).List()
	if err != nil || len(nums) == 0 {
		t.Fatalf("no pack written (%v): the test would prove nothing", err)
	}
	// Move the real directory away and leave a link in its place, plus
	// a stale-looking temp file in the target that gc would remove.
	elsewhere := filepath.Join(base, "elsewhere")
	if err := os.Rename(dir, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(elsewhere, packName(nums[0])+".tmp")
	if err := os.WriteFile(tmp, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := OpenPacks(dir, false)
	t.Cleanup(func() { linked.Close() })
	var buf bytes.Buffer
	if _, err := NewPackedStore(db, linked).ReadFile(ctx, id, &buf); err == nil || !strings.Contains(err.Error(), ErrPacksNotDir.Error()) {
		t.Errorf("read through a linked pack dir: %v, want %q", err, ErrPacksNotDir)
	}
	if _, err := linked.List(); !errors.Is(err, ErrPacksNotDir) {
		t.Errorf("List: %v, want ErrPacksNotDir", err)
	}
	if _, err := linked.RemoveStaleTemps(); !errors.Is(err, ErrPacksNotDir) {
		t.Errorf("RemoveStaleTemps: %v, want ErrPacksNotDir", err)
	}
	if _, _, err := linked.OpenPackForGC(nums[0]); !errors.Is(err, ErrPacksNotDir) {
		t.Errorf("OpenPackForGC: %v, want ErrPacksNotDir", err)
	}
	if err := linked.PunchRange(PackRange{Pack: nums[0], Off: 0, Len: 4096}); !errors.Is(err, ErrPacksNotDir) {
		t.Errorf("PunchRange: %v, want ErrPacksNotDir", err)
	}
	if err := linked.RemovePack(nums[0]); !errors.Is(err, ErrPacksNotDir) {
		t.Errorf("RemovePack: %v, want ErrPacksNotDir", err)
	}
	for _, name := range []string{tmp, filepath.Join(elsewhere, packName(nums[0]))} {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("%s was touched through the link: %v", name, err)
		}
	}
}

// Appends staged in the writer's buffer read back before any Sync (read
// writes them out), across many buffer write-outs, concurrently, through
// O_DIRECT where the file system takes it and through the page cache
// otherwise; after Close a fresh reader finds every byte and the pack is
// exactly as long as what was appended (no padding left).
func TestPackStagedAppends(t *testing.T) {
	for _, mode := range []string{"direct", "buffered"} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store.packs")
			p := OpenPacks(dir, false)
			if mode == "buffered" {
				// The first append creates the writer; switch it to the
				// page-cache path before anything is staged.
				if _, _, err := p.append(nil); err != nil {
					t.Fatal(err)
				}
				p.w.mu.Lock()
				if p.w.direct >= 0 {
					syscall.Close(p.w.direct)
					p.w.direct = -1
				}
				p.w.mu.Unlock()
			} else if _, _, err := p.append(nil); err != nil {
				t.Fatal(err)
			} else if p.w.direct < 0 {
				t.Skipf("%s: the file system takes no O_DIRECT writes with %d-byte alignment", dir, dioAlign)
			}
			type rec struct {
				num, off int64
				data     []byte
			}
			const workers = 4
			recs := make([][]rec, workers)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 150 {
						// Sizes around the alignment and the buffer:
						// 1 byte to 96 KiB, some of them reread at once.
						data := randBytes(uint64(1000*w+i), 1+(i*7919+w*104729)%(96<<10))
						num, off, err := p.append(data)
						if err != nil {
							errs <- err
							return
						}
						recs[w] = append(recs[w], rec{num, off, data})
						if i%5 == 0 {
							got, err := p.read(num, off, int64(len(data)))
							if err != nil || !bytes.Equal(got, data) {
								errs <- fmt.Errorf("read back append %d/%d at %d: %v", w, i, off, err)
								return
							}
						}
						if i%40 == 0 {
							if err := p.Sync(); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			end := p.w.next
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			q := OpenPacks(dir, true)
			defer q.Close()
			var total int64
			for _, rs := range recs {
				for _, r := range rs {
					got, err := q.read(r.num, r.off, int64(len(r.data)))
					if err != nil || !bytes.Equal(got, r.data) {
						t.Fatalf("append at %d (%d bytes) reads back wrong after close: %v", r.off, len(r.data), err)
					}
					total += int64(len(r.data))
				}
			}
			nums, err := q.List()
			if err != nil || len(nums) != 1 {
				t.Fatalf("packs %v: %v", nums, err)
			}
			st, err := os.Stat(filepath.Join(dir, packName(nums[0])))
			if err != nil {
				t.Fatal(err)
			}
			if total != end || st.Size() != end {
				t.Fatalf("appended %d bytes, writer's end %d, pack file %d bytes", total, end, st.Size())
			}
		})
	}
}

// A buffer whose background write fails is gone with its bytes: from then
// on every Sync and append fails, so no transaction can commit a row
// naming bytes the pack does not hold.
func TestPackFailedWriteIsSticky(t *testing.T) {
	p := OpenPacks(filepath.Join(t.TempDir(), "store.packs"), false)
	defer p.Close()
	if _, _, err := p.append(randBytes(61, 1000)); err != nil {
		t.Fatal(err)
	}
	if p.w.direct < 0 {
		t.Skip("the file system takes no O_DIRECT writes")
	}
	// Break the descriptor the buffer is written through.
	p.w.mu.Lock()
	syscall.Close(p.w.direct)
	p.w.direct = int(^uint(0) >> 1) // no such descriptor: EBADF
	p.w.mu.Unlock()
	big := randBytes(62, packBufSize+10)
	if _, _, err := p.append(big); err != nil {
		t.Fatalf("append handing a full buffer to the writer: %v", err)
	}
	if err := p.Sync(); err == nil {
		t.Fatal("Sync succeeded after a failed write")
	}
	if _, _, err := p.append([]byte("x")); err == nil {
		t.Fatal("append succeeded after a failed write")
	}
	if err := p.Sync(); err == nil {
		t.Fatal("a second Sync succeeded after a failed write")
	}
	p.w.mu.Lock()
	p.w.direct = -1 // nothing left to close
	p.w.mu.Unlock()
}
