package workspace

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	_ "github.com/mattn/go-sqlite3"
	"golang.org/x/sys/unix"
)

// TestPrefetchTakeAnyOrder: whatever the importer takes (in order, some
// skipped, some taken before a worker began, some not prepared because
// they changed), each taken file's content is exactly what reading it
// directly gives, and finish returns with nothing left running.
func TestPrefetchTakeAnyOrder(t *testing.T) {
	ctx := context.Background()
	objs := tempObjects(t)
	dir := t.TempDir()
	var paths []string
	for i := range 200 {
		p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		data := []byte(fmt.Sprintf("file %d\n", i))
		if i%50 == 7 {
			data = make([]byte, prefetchMaxFile+1) // too big to prepare ahead
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, skip := range []int{1, 3, 1000} { // take all, every third, none
		t.Run(fmt.Sprint(skip), func(t *testing.T) {
			pf := startPrefetch(ctx, objs, paths)
			// Let a worker begin: the first file then comes prepared.
			for deadline := time.Now().Add(10 * time.Second); pf.order[0].state.Load() == itemPending; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no worker started in 10 s")
				}
			}
			taken := 0
			for i, p := range paths {
				if i%skip != 0 {
					continue
				}
				var lst unix.Stat_t
				if err := unix.Lstat(p, &lst); err != nil {
					t.Fatal(err)
				}
				prep, st := pf.take(p, &lst)
				if prep == nil {
					continue // read directly by the importer
				}
				taken++
				if i%50 == 7 {
					t.Fatalf("%s: prepared a file over the limit", p)
				}
				if st.Size != prep.Size() {
					t.Fatalf("%s: stat says %d bytes, prepared %d", p, st.Size, prep.Size())
				}
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				want, _, err := objs.PutSparseFile(ctx, f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := objs.PutPrepared(ctx, prep)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("%s: prepared id %s, direct %s", p, got.Short(), want.Short())
				}
				if again, _ := pf.take(p, &lst); again != nil {
					t.Fatalf("%s taken twice", p)
				}
			}
			pf.finish()
			if skip != 1000 && taken == 0 {
				t.Errorf("no file came prepared")
			}
		})
	}
}

// TestPrefetchChangedAfterRead: content prepared before the file changed
// is never handed over; the importer reads the file itself.
func TestPrefetchChangedAfterRead(t *testing.T) {
	ctx := context.Background()
	objs := tempObjects(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pf := startPrefetch(ctx, objs, []string{p, p + "-absent"})
	defer pf.finish()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if pf.order[0].state.Load() == itemRunning {
			<-pf.order[0].done
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no worker started in 10 s")
		}
	}
	if err := os.WriteFile(p, []byte("after, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	if prep, _ := pf.take(p, &st); prep != nil {
		t.Fatalf("handed over %d bytes prepared before the file changed", prep.Size())
	}
}

// tempObjects is an object store in a fresh SQLite file, closed at the
// end of the test.
func tempObjects(t *testing.T) *cas.Store {
	t.Helper()
	sdb, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	if _, err := sdb.Exec(cas.ObjectsSchema); err != nil {
		t.Fatal(err)
	}
	return cas.NewStore(sdb)
}
