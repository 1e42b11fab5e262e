package journal_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// packBytes is the total size of the pack files of the store at path.
func packBytes(t testing.TB, path string) int64 {
	t.Helper()
	var n int64
	for _, name := range packFiles(t, path) {
		st, err := os.Stat(filepath.Join(cas.PacksDir(path), name))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// grownPast waits (up to 10 s) for the store's packs to hold more than n
// bytes and returns their size: a full staging buffer is written out by a
// goroutine of its own, which a loaded machine may not have run yet when
// the transaction that filled it rolls back.
func grownPast(t testing.TB, path string, n int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := packBytes(t, path)
		if got > n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// namedEnd is the end of the last range the store's rows name in any
// pack: with one pack, the size it must have.
func namedEnd(t testing.TB, path string) int64 {
	t.Helper()
	var end int64
	if err := rawSQL(t, path).QueryRow(`SELECT coalesce(max(pack_off + pack_len), 0) FROM objects WHERE pack != 0`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	return end
}

// TestTrimPacks: the bytes a rolled-back transaction appended go back to
// the file system (TrimPacks, and Close), those of committed rows stay,
// and a pack no row names is deleted at Close (issue 28, case 5: a failed
// push left its pack bytes behind).
func TestTrimPacks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rollback := errors.New("roll back")
	store := func(seed int64, keep bool) {
		t.Helper()
		_, err := db.Do(ctx, journal.DefaultBranch, "run", "test", func(tx *journal.Tx) error {
			if _, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(randBytes(seed, 6<<20))); err != nil {
				return err
			}
			if !keep {
				return rollback
			}
			return nil
		})
		if keep && err != nil || !keep && !errors.Is(err, rollback) {
			t.Fatalf("store %d: %v", seed, err)
		}
	}

	store(1, false)
	if got := grownPast(t, path, 0); got == 0 {
		t.Fatal("the rolled-back transaction appended nothing to a pack: nothing to test")
	}
	freed, err := db.TrimPacks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := packBytes(t, path); got != 0 || freed == 0 {
		t.Fatalf("after TrimPacks with no row naming the pack: %d pack bytes, %d freed", got, freed)
	}

	// An open writer's pack may end in a padded block (a direct write of
	// the partial last one), which Close trims.
	near := func(got, want int64) bool { return got >= want && got-want < 4096 }
	store(2, true)
	kept := namedEnd(t, path)
	if got := packBytes(t, path); kept == 0 || !near(got, kept) {
		t.Fatalf("committed: %d pack bytes, rows name %d", got, kept)
	}
	store(3, false)
	if got := grownPast(t, path, kept+4096); got <= kept+4096 {
		t.Fatalf("the second rolled-back transaction appended nothing (%d bytes, %d before)", got, kept)
	}
	if _, err := db.TrimPacks(ctx); err != nil {
		t.Fatal(err)
	}
	if got := packBytes(t, path); !near(got, kept) {
		t.Fatalf("after TrimPacks: %d pack bytes, want the %d committed rows name", got, kept)
	}
	// The writer goes on appending after the trim, and what it wrote reads back.
	store(4, true)
	store(5, false)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := packBytes(t, path), namedEnd(t, path); got != want {
		t.Fatalf("after Close: %d pack bytes, rows name %d", got, want)
	}
	db2, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	rep, err := db2.Verify(ctx, journal.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify after trims: %v %+v", err, rep)
	}
}

// TestTrimPacksEmptyDeleted: a handle whose only transaction rolled back
// leaves no pack file at all once closed.
func TestTrimPacksEmptyDeleted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Do(ctx, journal.DefaultBranch, "run", "test", func(tx *journal.Tx) error {
		if _, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(randBytes(7, 6<<20))); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the transaction committed")
	}
	if len(packFiles(t, path)) == 0 {
		t.Fatal("no pack written: nothing to test")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if names := packFiles(t, path); len(names) != 0 {
		t.Fatalf("after Close: packs %v remain, no row names them", names)
	}
}
