package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestLookaheadSubsequence: an importer that enters only some of the
// walked directories and takes only some of their files gets every
// listing it asks for, in walk order, with its import cache records;
// every file it takes prepared is what reading it directly gives; and the
// walk never stalls on what the importer left behind (many more files
// than prefetchAhead are skipped), nor runs on after finish.
func TestLookaheadSubsequence(t *testing.T) {
	ctx := context.Background()
	objs := tempObjects(t)
	root := filepath.Join(t.TempDir(), "ws")
	// root/dNN/eMM/fKK: 6 x 5 directories of 7 files, and 3 files at
	// each level above.
	write := func(p, data string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for f := range 3 {
		write(filepath.Join(root, fmt.Sprintf("top%d", f)), fmt.Sprintf("top %d\n", f))
	}
	for d := range 6 {
		for f := range 3 {
			write(filepath.Join(root, fmt.Sprintf("d%02d", d), fmt.Sprintf("mid%d", f)), fmt.Sprintf("mid %d %d\n", d, f))
		}
		for e := range 5 {
			for f := range 7 {
				write(filepath.Join(root, fmt.Sprintf("d%02d", d), fmt.Sprintf("e%02d", e), fmt.Sprintf("f%02d", f)),
					fmt.Sprintf("leaf %d %d %d\n", d, e, f))
			}
		}
	}
	for _, tc := range []struct{ skipDir, budget int }{
		{0, 1 << 16}, {2, 1 << 16}, {3, 1 << 16}, // enter all, every other, every third subtree
		{0, 1}, {2, 9}, // entries of at most one or two listings held
	} {
		skipDir := tc.skipDir
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			saved := lookaheadEntries
			lookaheadEntries = tc.budget
			t.Cleanup(func() { lookaheadEntries = saved })
			cache := map[string]map[string]journal.StatCache{
				"/ws/d01": {"mid1": {Kind: cas.EntryFile, Size: -1}}, // stale: the file is read
			}
			la := startLookahead(ctx, objs, root, "/ws", map[string]bool{}, cache)
			defer la.finish()
			taken := 0
			var visit func(host string)
			visit = func(host string) {
				l := la.next(host)
				if l == nil {
					t.Fatalf("no listing of %s", host)
				}
				if l.err != nil {
					t.Fatal(l.err)
				}
				// The largest listing has 9 entries.
				la.ents.mu.Lock()
				used := la.ents.used
				la.ents.mu.Unlock()
				if used > max(tc.budget, 9) {
					t.Fatalf("%d entries held, budget %d", used, tc.budget)
				}
				if tc.budget == 1 && len(la.dirs) != 0 {
					// The importer holds this listing: the walk may hold none.
					t.Fatalf("%d listings read ahead with a budget of one entry", len(la.dirs))
				}
				if host == filepath.Join(root, "d01") {
					if _, ok := l.cache["mid1"]; !ok {
						t.Errorf("%s: its import cache records were not handed over", host)
					}
				}
				var subs []string
				for i := range l.ents {
					e := &l.ents[i]
					hp := filepath.Join(host, string(e.name))
					if e.kind == cas.EntryDir {
						subs = append(subs, hp)
						continue
					}
					if i%2 == 1 {
						continue // a file the importer does not read
					}
					prep, st := la.take(hp, &e.st)
					if prep == nil {
						continue
					}
					taken++
					if st.Size != prep.Size() {
						t.Fatalf("%s: stat says %d bytes, prepared %d", hp, st.Size, prep.Size())
					}
					f, err := os.Open(hp)
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
						t.Fatalf("%s: prepared id %s, direct %s", hp, got.Short(), want.Short())
					}
					if again, _ := la.take(hp, &e.st); again != nil {
						t.Fatalf("%s taken twice", hp)
					}
				}
				for i, s := range subs {
					if skipDir > 0 && i%skipDir != 0 {
						continue // a subtree the importer leaves out
					}
					visit(s)
				}
			}
			visit(root)
			if taken == 0 {
				t.Errorf("no file came prepared")
			}
			// The importer is done: a directory the walk has not listed
			// (it has none) is the importer's to read.
			if l := la.next(filepath.Join(root, "absent")); l != nil {
				t.Errorf("a listing of a directory that does not exist: %s", l.host)
			}
		})
	}
}
