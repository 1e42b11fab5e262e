package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/artrt/art/cas"
)

// TestTreeReaderListsEverything: a depth-first walk through treeReader
// sees every directory's entries exactly as a plain read does, with more
// directories than the read-ahead bound (the walker reads the rest
// itself), skips what it is told to, and leaves no read-ahead counted.
func TestTreeReaderListsEverything(t *testing.T) {
	root := t.TempDir()
	for i := range 24 {
		for j := range 16 {
			d := filepath.Join(root, fmt.Sprintf("d%02d", i), fmt.Sprintf("e%02d", j))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	skipped := filepath.Join(root, "d03")
	var want, got []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skipped {
			return filepath.SkipDir
		}
		want = append(want, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, top := startTreeReader(root, map[string]bool{skipped: true}, nil)
	defer r.Close()
	var walk func(l *listing) error
	walk = func(l *listing) error {
		got = append(got, l.path)
		host, err := r.take(l)
		if err != nil {
			return err
		}
		for i := range host {
			e := &host[i]
			p := filepath.Join(l.path, string(e.name))
			if p == skipped {
				if k := r.kid(l, e.name); !k.skip || k.queued {
					t.Errorf("%s: a skipped directory was offered for reading", p)
				}
				continue
			}
			if e.kind != cas.EntryDir {
				got = append(got, p)
				continue
			}
			if err := walk(r.kid(l, e.name)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walk saw %d paths, want %d", len(got), len(want))
	}
	if n := r.pending.Load(); n != 0 {
		t.Fatalf("%d listings still counted as read ahead", n)
	}
}
