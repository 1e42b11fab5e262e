package journal_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestStatCacheTree: the whole workspace's records in one scan, grouped
// by directory as StatCacheDir returns them one directory at a time, and
// nothing (not a truncated part) past the limit.
func TestStatCacheTree(t *testing.T) {
	db := openStore(t)
	paths := []string{"/ws/a", "/ws/d", "/ws/d/x", "/ws/d/e/y", "/ws/d.txt", "/ws/d0", "/wsx/z", "/w/q"}
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		for i, p := range paths {
			c := journal.StatCache{Size: int64(i), MTime: 10, CTime: 20, Ino: uint64(i), Kind: cas.EntryFile, Mode: 0o644, Racy: i%2 == 0}
			c.Manifest[0] = byte(i)
			if p == "/ws/d" || p == "/ws/d/e" {
				c = journal.StatCache{Kind: cas.EntryDir, Mode: journal.ModeUnknown}
			}
			if err := tx.SetStatCache(p, c); err != nil {
				return err
			}
		}
		return nil
	})
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		tree, ok, err := tx.StatCacheTree("/ws", 6)
		if err != nil || !ok {
			return fmt.Errorf("StatCacheTree: %v, %v", ok, err)
		}
		if len(tree) != 3 { // /ws, /ws/d, /ws/d/e
			t.Errorf("directories %v, want /ws, /ws/d, /ws/d/e", tree)
		}
		for _, dir := range []string{"/ws", "/ws/d", "/ws/d/e", "/ws/nothing"} {
			want, err := tx.StatCacheDir(dir)
			if err != nil {
				return err
			}
			got := tree[dir]
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: tree has %+v, StatCacheDir %+v", dir, got, want)
			}
		}
		if tree, ok, err := tx.StatCacheTree("/ws", 5); err != nil || ok || tree != nil {
			t.Errorf("six records past a limit of 5: %v, %v, %v; want nil, false, nil", tree, ok, err)
		}
		return nil
	})
}

// TestStatCacheStats: the records of StatCacheTree, without content ids,
// whatever their names (spaces, digits, newlines, non-UTF-8 bytes: the
// records come as one string of length-prefixed fields) and values
// (unknown modes, racy, negative times, large inode numbers), read in
// a read-only View; nothing past the limit.
func TestStatCacheStats(t *testing.T) {
	db := openStore(t)
	paths := []string{"/ws/a", "/ws/d", "/ws/d/x y", "/ws/d/e/12 34", "/ws/d/e/nl\nx", "/ws/d.txt", "/ws/\xff\xfe", "/ws/d0", "/wsx/z", "/w/q"}
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		for i, p := range paths {
			c := journal.StatCache{Size: int64(i) << 33, MTime: -int64(i) * 1e9, CTime: 20 + int64(i), Ino: 1<<62 + uint64(i),
				Kind: cas.EntryFile, Mode: 0o7000 | uint32(i), Racy: i%2 == 0}
			c.Manifest[0] = byte(i)
			switch p {
			case "/ws/d", "/ws/d/e":
				c = journal.StatCache{Kind: cas.EntryDir, Mode: journal.ModeUnknown}
			case "/ws/a":
				c.Kind = cas.EntrySymlink
			case "/ws/d.txt":
				c.Mode = journal.ModeUnknown
			}
			if err := tx.SetStatCache(p, c); err != nil {
				return err
			}
		}
		return nil
	})
	var full map[string]map[string]journal.StatCache
	mustDo(t, db, "main", func(tx *journal.Tx) (err error) {
		full, _, err = tx.StatCacheTree("/ws", 100)
		return err
	})
	// As StatCacheStats gives them: by directory, in name order, without
	// content ids.
	want := map[string][]journal.StatRecord{}
	for dir, kids := range full {
		for name, c := range kids {
			c.Manifest = cas.ID{}
			want[dir] = append(want[dir], journal.StatRecord{Name: name, StatCache: c})
		}
		slices.SortFunc(want[dir], func(a, b journal.StatRecord) int { return strings.Compare(a.Name, b.Name) })
	}
	err := db.View(context.Background(), "main", func(tx *journal.Tx) error {
		got, ok, err := tx.StatCacheStats("/ws", 8)
		if err != nil || !ok {
			return fmt.Errorf("StatCacheStats: %v, %v", ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("StatCacheStats %+v\nStatCacheTree %+v", got, want)
		}
		if len(got) != 3 {
			t.Errorf("directories %v, want /ws, /ws/d, /ws/d/e", got)
		}
		if got, ok, err := tx.StatCacheStats("/ws", 7); err != nil || ok || got != nil {
			t.Errorf("eight records past a limit of 7: %v, %v, %v; want nil, false, nil", got, ok, err)
		}
		if got, ok, err := tx.StatCacheStats("/none", 7); err != nil || !ok || len(got) != 0 {
			t.Errorf("no records: %v, %v, %v; want empty, true, nil", got, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewWritesNothing: a View reads the branch's head, and a write in
// it fails and leaves the store as it was.
func TestViewWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		if _, err := tx.Create(journal.RootIno, []byte("d"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
			return err
		}
		_, err := tx.Snapshot("s")
		return err
	})
	before, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, "main", func(tx *journal.Tx) error {
		s, ok, err := tx.HeadSnapshot()
		if err != nil || !ok || s.Root != before.Root || s.ID != before.Snapshot {
			t.Errorf("HeadSnapshot = %+v, %v, %v; want the snapshot at %s", s, ok, err, before.Root.Short())
		}
		if _, err := tx.Lookup(journal.RootIno, []byte("d")); err != nil {
			t.Errorf("lookup d: %v", err)
		}
		if err := tx.SetStatCache("/d", journal.StatCache{Kind: cas.EntryDir}); err == nil {
			t.Error("SetStatCache in a View succeeded")
		}
		_, err = tx.Create(journal.RootIno, []byte("e"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	})
	if err == nil {
		t.Fatal("Create in a View succeeded")
	}
	after, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("head moved in a View: %+v, was %+v", after, before)
	}
	// After an event that is not a snapshot, the head has none.
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		_, err := tx.Create(journal.RootIno, []byte("f"), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	})
	err = db.View(ctx, "main", func(tx *journal.Tx) error {
		if _, ok, err := tx.HeadSnapshot(); err != nil || ok {
			t.Errorf("HeadSnapshot after a change = %v, %v; want false", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatCacheStatsHostile: records a hostile store could hold - a
// number that is text with a space in it (shifting every field after it),
// a path stored as text - are refused as ErrCorrupt or not read, never
// taken for other records.
func TestStatCacheStatsHostile(t *testing.T) {
	for _, tc := range []struct {
		name, set string
		corrupt   bool
	}{
		{"size with a space", `UPDATE import_cache SET size = '1 2' WHERE path = CAST('/ws/b' AS BLOB)`, true},
		{"mtime not a number", `UPDATE import_cache SET mtime_ns = 'x' WHERE path = CAST('/ws/b' AS BLOB)`, true},
		{"huge size", `UPDATE import_cache SET size = '99999999999999999999' WHERE path = CAST('/ws/b' AS BLOB)`, true},
		{"path as text", `UPDATE import_cache SET path = '/ws/b' WHERE path = CAST('/ws/b' AS BLOB)`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.art")
			db, err := journal.Open(context.Background(), path, journal.Options{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			mustDo(t, db, "main", func(tx *journal.Tx) error {
				for _, p := range []string{"/ws/a", "/ws/b", "/ws/c"} {
					if err := tx.SetStatCache(p, journal.StatCache{Size: 5, MTime: 6, CTime: 7, Ino: 8, Kind: cas.EntryFile, Mode: 0o644}); err != nil {
						return err
					}
				}
				return nil
			})
			if _, err := rawSQL(t, path).Exec(tc.set); err != nil {
				t.Fatal(err)
			}
			err = db.View(context.Background(), "main", func(tx *journal.Tx) error {
				got, ok, err := tx.StatCacheStats("/ws", 8)
				if tc.corrupt {
					if !errors.Is(err, journal.ErrCorrupt) || ok || got != nil {
						t.Errorf("got %v, %v, %v; want ErrCorrupt", got, ok, err)
					}
					return nil
				}
				if err != nil || !ok || len(got["/ws"]) != 2 || got["/ws"][0].Name != "a" || got["/ws"][1].Name != "c" {
					t.Errorf("got %+v, %v, %v; want the records of a and c", got, ok, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
