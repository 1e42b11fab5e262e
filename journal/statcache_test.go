package journal_test

import (
	"fmt"
	"reflect"
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
