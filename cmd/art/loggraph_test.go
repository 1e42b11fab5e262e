package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/testutil"
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

// scriptStore builds a store through the journal from steps, one per
// word group: "w B" a change on B, "s B" a snapshot of B, "b NEW FROM" a
// branch from FROM's head, "m INTO FROM" a merge of FROM's head into INTO
// (marker and a change), "c B TO" a checkout of B to TO's state as it was
// at TO's first op (its creation), "u B" an undo on B, "d B" a deletion.
func scriptStore(t *testing.T, steps ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	db, err := journal.Open(ctx, path, journal.Options{Create: true, Clock: func() time.Time { now = now.Add(time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	born := map[string]journal.State{}
	for i, step := range steps {
		f := strings.Fields(step)
		head := func(b string) journal.State {
			st, err := db.Head(ctx, b)
			if err != nil {
				t.Fatalf("step %q: %v", step, err)
			}
			return st
		}
		switch f[0] {
		case "w":
			_, err = db.Do(ctx, f[1], "run", "edit", func(tx *journal.Tx) error { return journalWrite(tx, "f", strings.Repeat("x", i)) })
		case "s":
			_, err = db.TakeSnapshot(ctx, f[1], "snap")
		case "b":
			_, err = db.CreateBranch(ctx, f[1], head(f[2]))
			born[f[1]] = head(f[2])
		case "m":
			src := head(f[2])
			_, err = db.Do(ctx, f[1], "merge", "merge "+f[2], func(tx *journal.Tx) error {
				if err := tx.MarkMerge(src, "merge"); err != nil {
					return err
				}
				return journalWrite(tx, "m", strings.Repeat("m", i))
			})
		case "c":
			to, ok := born[f[2]]
			if !ok {
				to, err = db.Resolve(ctx, "@2", "main")
			}
			if err == nil {
				_, err = db.Checkout(ctx, f[1], to)
			}
		case "u":
			_, err = db.Undo(ctx, f[1])
		case "d":
			_, err = db.DeleteBranch(ctx, f[1])
		default:
			t.Fatalf("bad step %q", step)
		}
		if err != nil {
			t.Fatalf("step %q: %v", step, err)
		}
	}
	return path
}

// TestLogGraphRendering: art log --graph for the shapes of history art
// makes: forks, several forks, a merge, a checkout back, an undo.
func TestLogGraphRendering(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
		args  []string
		want  string
	}{
		{"fork", []string{"w main", "s main", "b try main", "w try", "w main"}, []string{"--all"}, `
@ op 6    TIME  main     run       edit
│ ○ op 5    TIME  try      run       edit
│ ○ op 4    TIME  try      branch    create branch try from e1dc224758a8
├─╯
● op 3    TIME  main     snapshot  snap  snapshot e1dc224758a8
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"two forks", []string{"w main", "b a main", "b b main", "w a", "w b", "w main"}, []string{"--all"}, `
@ op 7    TIME  main     run       edit
│ ○ op 6    TIME  b        run       edit
│ │ ○ op 5    TIME  a        run       edit
│ ○ │ op 4    TIME  b        branch    create branch b from main@2
│ │ ○ op 3    TIME  a        branch    create branch a from main@2
├─┴─╯
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"merge", []string{"w main", "b try main", "w try", "w main", "m main try", "w try"}, []string{"--all"}, `
○ op 7    TIME  try      run       edit
│ @ op 6    TIME  main     merge     merge try
├─┤
│ ○ op 5    TIME  main     run       edit
○ │ op 4    TIME  try      run       edit
○ │ op 3    TIME  try      branch    create branch try from main@2
├─╯
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"merge, only the branch's history", []string{"w main", "b try main", "w try", "w main", "m main try", "w try"}, nil, `
@ op 6    TIME  main     merge     merge try
├─╮
○ │ op 5    TIME  main     run       edit
│ ○ op 4    TIME  try      run       edit
│ ○ op 3    TIME  try      branch    create branch try from main@2
├─╯
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"two attempts from one snapshot, both merged", []string{"w main", "s main", "b try-a main", "b try-b main", "w try-a", "w try-b", "m main try-a", "m main try-b"}, []string{"--all"}, `
@ op 9    TIME  main     merge     merge try-b
├─╮
○ │ op 8    TIME  main     merge     merge try-a
├─┼─╮
│ ○ │ op 7    TIME  try-b    run       edit
│ │ ○ op 6    TIME  try-a    run       edit
│ ○ │ op 5    TIME  try-b    branch    create branch try-b from e1dc224758a8
│ │ ○ op 4    TIME  try-a    branch    create branch try-a from e1dc224758a8
├─┴─╯
● op 3    TIME  main     snapshot  snap  snapshot e1dc224758a8
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"checkout back", []string{"w main", "b try main", "w try", "w try", "c try try"}, []string{"--all", "--branch", "try"}, `
@ op 6    TIME  try      checkout  checkout main@2  ↶ to op 2 on main
○ op 5    TIME  try      run       edit
○ op 4    TIME  try      run       edit
○ op 3    TIME  try      branch    create branch try from main@2
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"undo", []string{"w main", "s main", "w main", "u main"}, nil, `
@ op 5    TIME  main     undo      undo op 4 (edit)  ↶ back to op 3
○ op 4    TIME  main     run       edit
● op 3    TIME  main     snapshot  snap  snapshot e1dc224758a8
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
		{"deleted branch", []string{"w main", "b try main", "w try", "d try", "w main"}, []string{"--all"}, `
@ op 5    TIME  main     run       edit
│ ○ op 4    TIME  (deleted) run       edit
│ ○ op 3    TIME  (deleted) branch    create branch try from main@2
├─╯
○ op 2    TIME  main     run       edit
○ op 1    TIME  main     branch    init
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := scriptStore(t, tc.steps...)
			got := "\n" + localTimes.ReplaceAllString(mustArt(t, append([]string{"log", "-d", db, "--graph"}, tc.args...)...), "TIME")
			if got != tc.want {
				t.Errorf("got:%s\nwant:%s", got, tc.want)
			}
		})
	}
}

// TestLogGraphGolden: art log --graph (one branch, --all) and its JSON on
// the store of graphStore.
func TestLogGraphGolden(t *testing.T) {
	db := graphStore(t)
	checkGolden(t, "graph_all.golden", mustArt(t, "log", "-d", db, "--graph", "--all"))
	checkGolden(t, "graph_main.golden", mustArt(t, "log", "-d", db, "--graph"))
	out := mustArt(t, "log", "-d", db, "--graph", "--all", "--json")
	checkGolden(t, "graph_all_json.golden", out)
	var ops []journal.GraphOp
	if err := json.Unmarshal([]byte(out), &ops); err != nil {
		t.Fatal(err)
	}
	byID := map[int64]journal.GraphOp{}
	for _, o := range ops {
		byID[o.ID] = o
	}
	for _, tc := range []struct {
		op      int64
		parents []int64
		jump    int64
	}{
		{14, []int64{12, 13}, 0}, // the merge: main's previous op, try-a's op it merged
		{4, []int64{3}, 0},       // try-a's creation: the snapshot it forked from
		{5, []int64{3}, 0},
		{10, []int64{9}, 3},  // try-b's checkout back to the base
		{12, []int64{11}, 3}, // main's undo of op 11
		{1, []int64{}, 0},
	} {
		o := byID[tc.op]
		if fmt.Sprint(o.Parents) != fmt.Sprint(tc.parents) || o.Jump != tc.jump {
			t.Errorf("op %d: parents %v jump %d, want %v jump %d", tc.op, o.Parents, o.Jump, tc.parents, tc.jump)
		}
	}
	if o := byID[9]; !o.Deleted || o.Branch != "(deleted)" {
		t.Errorf("op 9 of deleted try-b: %+v", o)
	}
}

// TestLogGraphHTML: the page is self-contained (no URL, script or
// external asset) and shows an agent's message escaped twice over: as
// the terminal would (no raw control bytes) and as HTML (no markup).
func TestLogGraphHTML(t *testing.T) {
	db := graphStore(t)
	page := filepath.Join(t.TempDir(), "graph.html")
	_, errs, code := art(t, "log", "-d", db, "--graph", "--all", "--html", page)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if got := mustArt(t, "log", "-d", db, "--graph", "--all", "--html", "-"); got != html {
		t.Errorf("--html - differs from the file")
	}
	lower := strings.ToLower(html)
	for _, bad := range []string{"http:", "https:", "//", "src=", "href=", "@import", "<script", "<img", "<link", "<iframe", "<object", "<embed", "javascript:"} {
		if strings.Contains(strings.ReplaceAll(lower, "src=x", ""), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if n := strings.Count(lower, "url("); n != strings.Count(lower, "url(#arrow)") {
		t.Errorf("page references %d urls, only url(#arrow) is its own", n)
	}
	for i := 0; i < len(b); i++ {
		if (b[i] < 0x20 && b[i] != '\n') || b[i] == 0x7f {
			t.Fatalf("page has control byte %#x at %d", b[i], i)
		}
	}
	want := `&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;\033[31mred\033]0;title\a`
	if !strings.Contains(html, want) {
		t.Errorf("page does not show the hostile message escaped as %s", want)
	}
	if got := strings.Count(html, "<circle"); got != 16 {
		t.Errorf("%d nodes drawn, want 16", got)
	}
	for _, s := range []string{"op 14", "merge try-a", "↶ back to op 3", "(deleted)", "snapshot 09adca01e2a3", "stroke-dasharray"} {
		if !strings.Contains(html, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if _, errs, code := art(t, "log", "-d", db, "--graph", "--html", page, "--json"); code != exitUsage {
		t.Errorf("--html with --json: exit %d %s, want usage", code, errs)
	}
	if _, errs, code := art(t, "log", "-d", db, "--graph", "--events"); code != exitUsage {
		t.Errorf("--graph with --events: exit %d %s, want usage", code, errs)
	}
}

// TestLogGraphEndToEnd: two attempts run by art run on branches of one
// store (real sandbox, real overlay), one merged into main (the merge
// recorded as art merge records it: the marker, then the change), then
// a checkout back and an undo; art log --graph --all draws the forks, the
// merge and the jumps, its JSON names the parents, the HTML page holds
// every op.
func TestLogGraphEndToEnd(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	base := hostVisibleDir(t)
	ws := populate(t, base)
	db := filepath.Join(base, "ws.db")
	mustRun(t, "push", "-q", "-m", ws, "-d", db)
	mustRun(t, "run", "-m", ws, "-d", db, "--branch", "try-a", "-i=false", "-q", "--", "sh", "-c", "echo a >> main.py")
	mustRun(t, "run", "-m", ws, "-d", db, "--branch", "try-b", "-i=false", "-q", "--", "sh", "-c", "echo b > b.txt")
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo m > m.txt")

	ctx := context.Background()
	store, err := journal.Open(ctx, db, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := store.Head(ctx, "try-a")
	if err != nil {
		t.Fatal(err)
	}
	into, err := store.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	mergeBase, ok, err := store.MergeBase(ctx, into, src)
	if err != nil || !ok {
		t.Fatalf("merge base of main and try-a: %v %v", ok, err)
	}
	merge, err := store.Do(ctx, "main", "merge", "merge try-a", func(tx *journal.Tx) error {
		if err := tx.MarkMerge(src, "merge try-a"); err != nil {
			return err
		}
		return journalWrite(tx, "merged.txt", "a\n")
	})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if mergeBase.Snapshot.IsZero() {
		t.Errorf("merge base @%d is not main's first snapshot", mergeBase.Seq)
	}
	mustRun(t, "checkout", "-d", db, "--branch", "try-b", "try-b~1")
	mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "-q", "--", "sh", "-c", "echo n > n.txt")
	mustRun(t, "undo", "-d", db)

	text := mustRun(t, "log", "-d", db, "--graph", "--all").stdout
	t.Logf("art log --graph --all:\n%s", text)
	for _, want := range []string{"├─", "╯", "merge try-a", "↶ back to op", "@ op"} {
		if !strings.Contains(text, want) {
			t.Errorf("graph lacks %q", want)
		}
	}
	var ops []journal.GraphOp
	if err := json.Unmarshal([]byte(mustRun(t, "log", "-d", db, "--graph", "--all", "--json").stdout), &ops); err != nil {
		t.Fatal(err)
	}
	byID := map[int64]journal.GraphOp{}
	lastOf := map[string]int64{}
	for _, o := range ops {
		byID[o.ID] = o
		if o.ID < merge.ID && o.ID > lastOf[o.Branch] {
			lastOf[o.Branch] = o.ID
		}
	}
	m := byID[merge.ID]
	if len(m.Parents) != 2 || m.Parents[1] != lastOf["try-a"] || byID[m.Parents[0]].Branch != "main" {
		t.Errorf("merge op %d: parents %v, want main's previous op and try-a's last (%d)", m.ID, m.Parents, lastOf["try-a"])
	}
	jumps := 0
	for _, o := range ops {
		if o.Kind == "branch" && o.Branch != "main" && (len(o.Parents) != 1 || byID[o.Parents[0]].Branch != "main") {
			t.Errorf("%s's first op %d: parents %v, want one op of main", o.Branch, o.ID, o.Parents)
		}
		if o.Jump != 0 {
			jumps++
		}
	}
	if jumps != 2 {
		t.Errorf("%d jumps, want 2 (the checkout and the undo)", jumps)
	}
	page := filepath.Join(t.TempDir(), "g.html")
	mustRun(t, "log", "-d", db, "--graph", "--all", "--html", page)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "<circle"); got != len(ops) {
		t.Errorf("page draws %d ops, want %d", got, len(ops))
	}
}

// TestLogGraphAfterForget: art forget keeps the branch and merge events,
// so the graph still draws the fork and the merge with the same parents
// once the snapshots around them are forgotten.
func TestLogGraphAfterForget(t *testing.T) {
	db := scriptStore(t, "w main", "s main", "b try main", "w try", "s try", "w main", "s main",
		"m main try", "s main", "w try", "s try", "w main", "s main", "w try", "s try")
	graph := func() (string, map[int64]journal.GraphOp) {
		out, errs, code := art(t, "log", "-d", db, "--graph", "--all")
		if code != 0 {
			t.Fatalf("log --graph: %d %s", code, errs)
		}
		js, errs, code := art(t, "log", "-d", db, "--graph", "--all", "--json")
		if code != 0 {
			t.Fatalf("log --graph --json: %d %s", code, errs)
		}
		var ops []journal.GraphOp
		if err := json.Unmarshal([]byte(js), &ops); err != nil {
			t.Fatal(err)
		}
		m := map[int64]journal.GraphOp{}
		for _, o := range ops {
			m[o.ID] = o
		}
		return out, m
	}
	_, before := graph()
	if _, errs, code := art(t, "forget", "-d", db, "--all", "--keep-last", "1"); code != 0 {
		t.Fatalf("forget: %d %s", code, errs)
	}
	if _, errs, code := art(t, "verify", "-d", db); code != 0 {
		t.Fatalf("verify after forget: %d %s", code, errs)
	}
	text, after := graph()
	t.Logf("after forget:\n%s", text)
	for id, o := range before {
		if got := after[id]; fmt.Sprint(got.Parents, got.Jump) != fmt.Sprint(o.Parents, o.Jump) {
			t.Errorf("op %d (%s): parents %v jump %d after forget, want %v %d", id, o.Kind, got.Parents, got.Jump, o.Parents, o.Jump)
		}
	}
	for _, want := range []string{"├─╯", "├─┤", "merge try"} {
		if !strings.Contains(text, want) {
			t.Errorf("graph after forget lacks %q", want)
		}
	}
}
