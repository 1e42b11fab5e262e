package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

var updateGolden = flag.Bool("update", false, "rewrite cmd/art/testdata/*.golden from the current output")

// graphHostileMessage is a snapshot message an agent chose: it must reach a
// terminal quoted and an HTML page escaped.
const graphHostileMessage = "</script><img src=x onerror=alert(1)>\x1b[31mred\x1b]0;title\a"

// graphStore builds a store through the journal with a fixed clock: main
// with two snapshots, attempts try-a and try-b forked from the first, a
// checkout back on try-b, an undo on main, try-a merged into main (the
// marker and a change, as art merge records it), try-b deleted, and a
// hostile snapshot message. It returns the store's path.
func graphStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "graph.db")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	db, err := journal.Open(ctx, path, journal.Options{Create: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	write := func(branch, name string) {
		t.Helper()
		n++
		_, err := db.Do(ctx, branch, "run", "edit "+name, func(tx *journal.Tx) error { return journalWrite(tx, name, strings.Repeat("x", n)) })
		if err != nil {
			t.Fatal(err)
		}
	}
	snap := func(branch, msg string) journal.State {
		t.Helper()
		s, err := db.TakeSnapshot(ctx, branch, msg)
		if err != nil {
			t.Fatal(err)
		}
		return journal.State{BranchID: s.BranchID, Branch: s.Branch, Seq: s.Seq, Root: s.Root, Snapshot: s.ID}
	}
	head := func(branch string) journal.State {
		t.Helper()
		st, err := db.Head(ctx, branch)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	write("main", "a.go")
	base := snap("main", "base")
	for _, b := range []string{"try-a", "try-b"} {
		if _, err := db.CreateBranch(ctx, b, base); err != nil {
			t.Fatal(err)
		}
	}
	write("try-a", "b.go")
	write("try-b", "c.go")
	snap("try-b", "try-b done")
	write("try-b", "d.go")
	if _, err := db.Checkout(ctx, "try-b", base); err != nil { // back to where it began
		t.Fatal(err)
	}
	write("main", "e.go")
	if _, err := db.Undo(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	write("try-a", "f.go")
	src := head("try-a")
	if _, err := db.Do(ctx, "main", "merge", "merge try-a", func(tx *journal.Tx) error {
		if err := tx.MarkMerge(src, "merge try-a"); err != nil {
			return err
		}
		return journalWrite(tx, "b.go", "merged")
	}); err != nil {
		t.Fatal(err)
	}
	snap("main", graphHostileMessage)
	write("try-a", "g.go")
	if _, err := db.DeleteBranch(ctx, "try-b"); err != nil {
		t.Fatal(err)
	}
	return path
}

// journalWrite creates or overwrites file name at the root of the tree.
func journalWrite(tx *journal.Tx, name, data string) error {
	id, _, err := tx.Objects().PutFile(context.Background(), strings.NewReader(data))
	if err != nil {
		return err
	}
	if n, err := tx.Resolve([]byte(name)); err == nil {
		_, err = tx.Write(n.Ino, id, int64(len(data)), 1, nil)
		return err
	}
	_, err = tx.Create(journal.RootIno, []byte(name), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, MTime: 1, Content: id, Size: int64(len(data))})
	return err
}

// localTimes hides fmtTime's local-time rendering (the test's time zone).
var localTimes = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)

// checkGolden compares got with testdata/name (rewritten with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	got = localTimes.ReplaceAllString(got, "TIME")
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -run %s -update to accept):\n--- got\n%s\n--- want\n%s", name, t.Name(), got, want)
	}
}

// TestLogGolden: art log without --graph prints what it always printed,
// byte for byte (only times are masked), for one branch, every branch,
// JSON and events.
func TestLogGolden(t *testing.T) {
	db := graphStore(t)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"log_main.golden", []string{"log", "-d", db}},
		{"log_all.golden", []string{"log", "-d", db, "--all"}},
		{"log_all_json.golden", []string{"log", "-d", db, "--all", "--json"}},
		{"log_events.golden", []string{"log", "-d", db, "--all", "--events"}},
	} {
		checkGolden(t, tc.golden, mustArt(t, tc.args...))
	}
}

func TestLogGraphShow(t *testing.T) {
	db := graphStore(t)
	t.Log("\n" + mustArt(t, "log", "-d", db, "--graph", "--all"))
	t.Log("\n" + mustArt(t, "log", "-d", db, "--graph"))
}
