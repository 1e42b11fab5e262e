package mergeop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/merge"
)

// node is a test tree's entry: kind, mode, content (file bytes or link
// target) and xattrs.
type node struct {
	kind    cas.EntryKind
	mode    uint32
	content string
	xattrs  map[string]string
}

type tree map[string]node

func openDB(t *testing.T) *journal.DB {
	t.Helper()
	db, err := journal.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// setTree makes branch hold exactly tr (one op).
func setTree(t *testing.T, db *journal.DB, branch string, tr tree) journal.State {
	t.Helper()
	ctx := context.Background()
	_, err := db.Do(ctx, branch, "run", "set", func(tx *journal.Tx) error {
		kids, err := tx.ReadDir(journal.RootIno)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := tx.RemoveAll(journal.RootIno, k.Name); err != nil {
				return err
			}
		}
		paths := slices.Sorted(maps.Keys(tr))
		slices.SortStableFunc(paths, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
		for _, p := range paths {
			n := tr[p]
			parent := int64(journal.RootIno)
			name := p
			if i := strings.LastIndexByte(p, '/'); i >= 0 {
				pn, err := tx.Resolve([]byte(p[:i]))
				if err != nil {
					return err
				}
				parent, name = pn.Ino, p[i+1:]
			}
			a := journal.Attr{Kind: n.kind, Mode: n.mode, MTime: 1}
			for _, x := range slices.Sorted(maps.Keys(n.xattrs)) {
				a.Xattrs = append(a.Xattrs, cas.Xattr{Name: x, Value: []byte(n.xattrs[x])})
			}
			switch n.kind {
			case cas.EntryFile:
				id, _, err := tx.Objects().PutFile(ctx, strings.NewReader(n.content))
				if err != nil {
					return err
				}
				a.Content, a.Size = id, int64(len(n.content))
			case cas.EntrySymlink:
				a.Link, a.Size = []byte(n.content), int64(len(n.content))
			}
			if _, err := tx.Create(parent, []byte(name), a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("set %s: %v", branch, err)
	}
	st, err := db.Head(ctx, branch)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readTree reads a state's whole tree back.
func readTree(t *testing.T, db *journal.DB, root cas.ID) tree {
	t.Helper()
	ctx := context.Background()
	out := tree{}
	var walk func(prefix string, id cas.ID)
	walk = func(prefix string, id cas.ID) {
		tr, err := db.Objects().GetTree(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Entries {
			p := prefix + string(e.Name)
			n := node{kind: e.Kind, mode: e.Mode}
			for _, x := range e.Xattrs {
				if n.xattrs == nil {
					n.xattrs = map[string]string{}
				}
				n.xattrs[x.Name] = string(x.Value)
			}
			switch e.Kind {
			case cas.EntryFile:
				var b bytes.Buffer
				if _, err := db.Objects().ReadFile(ctx, e.Target, &b); err != nil {
					t.Fatal(err)
				}
				n.content = b.String()
			case cas.EntrySymlink:
				n.content = string(e.Link)
			case cas.EntryDir:
				walk(p+"/", e.Target)
			}
			out[p] = n
		}
	}
	walk("", root)
	return out
}

// gen makes random trees over few names, contents that are small texts
// (so both sides' edits often merge line by line, and sometimes overlap)
// and now and then a binary content.
type gen struct{ r *rand.Rand }

func (g gen) name() string { return string(rune('a' + g.r.IntN(3))) }

func (g gen) text() string {
	if g.r.IntN(10) == 0 {
		return fmt.Sprintf("bin\x00%d", g.r.IntN(3))
	}
	var b strings.Builder
	for i := range 6 {
		if g.r.IntN(4) == 0 {
			fmt.Fprintf(&b, "line %d changed %d\n", i, g.r.IntN(3))
		} else {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	return b.String()
}

func (g gen) node() node {
	n := node{mode: []uint32{0o644, 0o755}[g.r.IntN(2)]}
	switch g.r.IntN(6) {
	case 0, 1, 2:
		n.kind, n.content = cas.EntryFile, g.text()
	case 3, 4:
		n.kind = cas.EntryDir
	default:
		n.kind, n.content = cas.EntrySymlink, "target"+g.name()
	}
	if g.r.IntN(5) == 0 {
		n.xattrs = map[string]string{"user." + g.name(): g.name()}
	}
	return n
}

func (g gen) add(tr tree) {
	p := ""
	for range 3 {
		if p != "" {
			p += "/"
		}
		p += g.name()
		n, ok := tr[p]
		if !ok {
			tr[p] = g.node()
			return
		}
		if n.kind != cas.EntryDir {
			return
		}
	}
}

func (g gen) edit(base tree) tree {
	tr := tree{}
	for p, n := range base {
		n.xattrs = maps.Clone(n.xattrs)
		tr[p] = n
	}
	for range 1 + g.r.IntN(4) {
		ps := slices.Sorted(maps.Keys(tr))
		if len(ps) == 0 || g.r.IntN(5) == 0 {
			g.add(tr)
			continue
		}
		p := ps[g.r.IntN(len(ps))]
		n := tr[p]
		switch g.r.IntN(7) {
		case 0, 5, 6:
			// Most edits change one line of a text, so two sides' edits
			// often merge; some replace the content.
			ls := strings.SplitAfter(n.content, "\n")
			if n.kind == cas.EntryFile && len(ls) > 2 && g.r.IntN(4) > 0 {
				ls[g.r.IntN(len(ls)-1)] = fmt.Sprintf("edit %d\n", g.r.IntN(100))
				n.content = strings.Join(ls, "")
			} else if n.kind == cas.EntryFile {
				n.content = g.text()
			}
		case 1:
			n.mode ^= 0o111
		case 2:
			n.xattrs = map[string]string{"user." + g.name(): g.name()}
		case 3:
			for q := range tr {
				if q == p || strings.HasPrefix(q, p+"/") {
					delete(tr, q)
				}
			}
			continue
		case 4:
			for q := range tr {
				if strings.HasPrefix(q, p+"/") {
					delete(tr, q)
				}
			}
			n = g.node()
		}
		tr[p] = n
	}
	return tr
}

func toMerge(tr tree) merge.Tree {
	out := merge.Tree{}
	for p, n := range tr {
		e := &merge.Entry{Mode: n.mode, ID: n.content, Xattrs: n.xattrs}
		switch n.kind {
		case cas.EntryFile:
			e.Kind = merge.File
		case cas.EntryDir:
			e.Kind, e.ID = merge.Dir, ""
		case cas.EntrySymlink:
			e.Kind = merge.Symlink
		}
		out[p] = e
	}
	return out
}

// expected is the merge's result by the engine's rules over whole trees
// (PlanTrees, then Text with the favored side for each conflicting hunk).
func expected(base, ours, theirs tree, favor merge.Side) tree {
	plan := merge.PlanTrees(toMerge(base), toMerge(ours), toMerge(theirs), favor)
	out := tree{}
	for p, n := range ours {
		out[p] = n
	}
	kinds := map[merge.Kind]cas.EntryKind{merge.File: cas.EntryFile, merge.Dir: cas.EntryDir, merge.Symlink: cas.EntrySymlink}
	for _, s := range plan.Steps {
		if s.Result == nil {
			delete(out, s.Path)
			continue
		}
		n := node{kind: kinds[s.Result.Kind], mode: s.Result.Mode, content: s.Result.ID, xattrs: s.Result.Xattrs}
		if s.Action == merge.MergeText {
			b, o, t := base[s.Path], ours[s.Path], theirs[s.Path]
			if b.kind != cas.EntryFile {
				b.content = ""
			}
			if !merge.IsText([]byte(b.content)) || !merge.IsText([]byte(o.content)) || !merge.IsText([]byte(t.content)) {
				if favor == merge.Theirs {
					n = t
				} else {
					n = o
				}
			} else {
				n.content = string(merge.Text([]byte(b.content), []byte(o.content), []byte(t.content), merge.TextOptions{Favor: favor}).Merged)
			}
		}
		if n.kind == cas.EntryDir {
			n.content = ""
		}
		if len(n.xattrs) == 0 {
			n.xattrs = nil
		}
		out[s.Path] = n
	}
	return out
}

func diffTrees(got, want tree) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(maps.Collect(func(yield func(string, bool) bool) {
		for p := range got {
			yield(p, true)
		}
		for p := range want {
			yield(p, true)
		}
	}))) {
		g, gok := got[p]
		w, wok := want[p]
		if gok != wok || g.kind != w.kind || g.mode != w.mode || g.content != w.content || !maps.Equal(g.xattrs, w.xattrs) {
			fmt.Fprintf(&b, "  %s: got %v (%v), want %v (%v)\n", p, g, gok, w, wok)
		}
	}
	return b.String()
}

// TestMergeAppliesPlan: random trees in a real store, random edits on two
// branches, merged with --ours or --theirs (which never refuse); the
// branch's tree afterwards must be exactly what the engine's rules give
// over the whole trees, and in Refuse mode a merge with conflicts must
// change nothing.
func TestMergeAppliesPlan(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	g := gen{r: rand.New(rand.NewPCG(seed, 5))}
	ctx := context.Background()
	n := 150
	if testing.Short() {
		n = 30
	}
	stats := map[string]int{}
	defer func() { t.Logf("paths by action: %v", stats) }()
	for i := range n {
		db := openDB(t)
		base := tree{}
		for range 10 {
			g.add(base)
		}
		// t is a text both sides often edit a line of: line merges, clean
		// or overlapping.
		base["t"] = node{kind: cas.EntryFile, mode: 0o644, content: "0\n1\n2\n3\n4\n5\n6\n7\n"}
		ours, theirs := g.edit(base), g.edit(base)
		for _, side := range []tree{ours, theirs} {
			if n, ok := side["t"]; ok && n.kind == cas.EntryFile && g.r.IntN(3) > 0 {
				ls := strings.SplitAfter(n.content, "\n")
				if len(ls) > 1 {
					ls[g.r.IntN(len(ls)-1)] = fmt.Sprintf("edit %d\n", g.r.IntN(100))
				}
				n.content = strings.Join(ls, "")
				side["t"] = n
			}
		}
		bst := setTree(t, db, "main", base)
		if _, err := db.CreateBranch(ctx, "side", bst); err != nil {
			t.Fatal(err)
		}
		setTree(t, db, "main", ours)
		src := setTree(t, db, "side", theirs)
		before, err := db.Head(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		mode := []ConflictMode{Refuse, Ours, Theirs}[g.r.IntN(3)]
		res, err := Merge(ctx, db, Options{Source: src, SourceName: "side", Into: "main", Conflict: mode})
		after, herr := db.Head(ctx, "main")
		if herr != nil {
			t.Fatal(herr)
		}
		if mode == Refuse && len(res.Conflicts) > 0 {
			if !errors.Is(err, ErrConflicts) || after.Seq != before.Seq || after.Root != before.Root {
				t.Fatalf("case %d (seed %d): refused merge: %v; head moved %d -> %d", i, seed, err, before.Seq, after.Seq)
			}
			continue
		}
		if err != nil {
			t.Fatalf("case %d (seed %d): merge: %v", i, seed, err)
		}
		favor := merge.Ours
		if mode == Theirs {
			favor = merge.Theirs
		}
		want := expected(base, ours, theirs, favor)
		if res.UpToDate {
			want = ours
		}
		for _, p := range res.Merged {
			stats[p.Action]++
		}
		for _, p := range res.Conflicts {
			stats["conflict "+p.Resolution]++
		}
		if d := diffTrees(readTree(t, db, after.Root), want); d != "" {
			t.Fatalf("case %d (seed %d, mode %s): main after the merge differs from the rules:\n%sresult %+v", i, seed, mode, d, res)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMergeKeepsHardLinkedNamesApart: taking theirs' edit of a file that
// has a second name on ours must not change that other name (a write to
// the shared node would).
func TestMergeKeepsHardLinkedNamesApart(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	bst := setTree(t, db, "main", tree{
		"x": {kind: cas.EntryFile, mode: 0o644, content: "same\n"},
		"y": {kind: cas.EntryFile, mode: 0o644, content: "same\n"},
	})
	if _, err := db.CreateBranch(ctx, "side", bst); err != nil {
		t.Fatal(err)
	}
	// Ours: y becomes a second name of x (same content and mode: no change
	// a merge sees).
	_, err := db.Do(ctx, "main", "run", "link", func(tx *journal.Tx) error {
		if err := tx.Unlink(journal.RootIno, []byte("y")); err != nil {
			return err
		}
		x, err := tx.Resolve([]byte("x"))
		if err != nil {
			return err
		}
		_, err = tx.Link(x.Ino, journal.RootIno, []byte("y"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	src := setTree(t, db, "side", tree{
		"x": {kind: cas.EntryFile, mode: 0o644, content: "theirs\n"},
		"y": {kind: cas.EntryFile, mode: 0o644, content: "same\n"},
	})
	if _, err := Merge(ctx, db, Options{Source: src, SourceName: "side", Into: "main"}); err != nil {
		t.Fatal(err)
	}
	head, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := readTree(t, db, head.Root)
	if got["x"].content != "theirs\n" || got["y"].content != "same\n" {
		t.Fatalf("x = %q, y = %q; want theirs' x and y untouched", got["x"].content, got["y"].content)
	}
}

// TestMergeAgainAfterUndo: a merge undone is not merged - the undo's
// checkout cuts the branch's history (journal.DB.MergeBase), so the undone
// merge marker is no longer an ancestor - also when merges and undos
// repeat (each undo's target is the previous undo's state).
func TestMergeAgainAfterUndo(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	bst := setTree(t, db, "main", tree{"x": {kind: cas.EntryFile, mode: 0o644, content: "x\n"}})
	if _, err := db.CreateBranch(ctx, "side", bst); err != nil {
		t.Fatal(err)
	}
	src := setTree(t, db, "side", tree{"x": {kind: cas.EntryFile, mode: 0o644, content: "side\n"}})
	for i := range 4 {
		res, err := Merge(ctx, db, Options{Source: src, SourceName: "side", Into: "main"})
		if err != nil || !res.Applied || len(res.Merged) != 1 {
			t.Fatalf("merge %d: %v %+v", i, err, res)
		}
		if _, err := db.Undo(ctx, "main"); err != nil {
			t.Fatal(err)
		}
		head, err := db.Head(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if got := readTree(t, db, head.Root)["x"].content; got != "x\n" {
			t.Fatalf("after undo %d: x = %q", i, got)
		}
	}
}

// TestMergeAgainAfterUndoAndOtherMerge: after a merge of side is undone
// and another branch is merged, side merges again with its change - the
// undone merge stays out of the history even with a merge after the
// undo's checkout (the case mergeop's old checkout correction could not
// express: it kept the journal's answer, side counted as merged and the
// merge was "up to date").
func TestMergeAgainAfterUndoAndOtherMerge(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	base := tree{"x": {kind: cas.EntryFile, mode: 0o644, content: "x\n"}, "y": {kind: cas.EntryFile, mode: 0o644, content: "y\n"}}
	bst := setTree(t, db, "main", base)
	for _, b := range []string{"side", "other"} {
		if _, err := db.CreateBranch(ctx, b, bst); err != nil {
			t.Fatal(err)
		}
	}
	src := setTree(t, db, "side", tree{"x": {kind: cas.EntryFile, mode: 0o644, content: "side\n"}, "y": base["y"]})
	oth := setTree(t, db, "other", tree{"x": base["x"], "y": {kind: cas.EntryFile, mode: 0o644, content: "other\n"}})
	if res, err := Merge(ctx, db, Options{Source: src, SourceName: "side", Into: "main"}); err != nil || !res.Applied {
		t.Fatalf("merge side: %v %+v", err, res)
	}
	if _, err := db.Undo(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if res, err := Merge(ctx, db, Options{Source: oth, SourceName: "other", Into: "main"}); err != nil || !res.Applied {
		t.Fatalf("merge other: %v %+v", err, res)
	}
	res, err := Merge(ctx, db, Options{Source: src, SourceName: "side", Into: "main"})
	if err != nil || !res.Applied || res.UpToDate {
		t.Fatalf("merge side again: %v %+v", err, res)
	}
	if res.Base == nil || res.Base.Root != bst.Root {
		t.Errorf("base of the second merge of side: %+v, want the fork point %s", res.Base, bst.Root.Short())
	}
	head, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := readTree(t, db, head.Root)
	if got["x"].content != "side\n" || got["y"].content != "other\n" {
		t.Fatalf("x = %q, y = %q; want side's x and other's y", got["x"].content, got["y"].content)
	}
}

// TestMergeAfterForget: the fork point's snapshot and the events around
// it forgotten (and gc run), the merge still uses the fork point as its
// base: a side that restored a file to what an older state held (a
// revert) keeps its revert, which an older base would read as no change.
func TestMergeAfterForget(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	file := func(s string) node { return node{kind: cas.EntryFile, mode: 0o644, content: s} }
	snap := func(branch string) {
		if _, err := db.TakeSnapshot(ctx, branch, "s"); err != nil {
			t.Fatal(err)
		}
	}
	setTree(t, db, "main", tree{"x": file("x\n"), "y": file("old\n")})
	snap("main")
	fork := setTree(t, db, "main", tree{"x": file("x\n"), "y": file("new\n")})
	snap("main")
	if _, err := db.CreateBranch(ctx, "side", fork); err != nil {
		t.Fatal(err)
	}
	setTree(t, db, "main", tree{"x": file("main\n"), "y": file("new\n")})
	snap("main")
	setTree(t, db, "main", tree{"x": file("main\n"), "y": file("new\n"), "z": file("z\n")})
	snap("main")
	setTree(t, db, "side", tree{"x": file("x\n"), "y": file("old\n")}) // the revert
	snap("side")
	setTree(t, db, "side", tree{"x": file("x\n"), "y": file("old\n"), "w": file("w\n")})
	snap("side")
	if _, err := db.Forget(ctx, journal.ForgetOptions{All: true, Policy: journal.Retention{Last: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := db.Resolve(ctx, "side", "side")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Merge(ctx, db, Options{Source: src, SourceName: "side", Into: "main"})
	if err != nil || !res.Applied {
		t.Fatalf("merge after forget: %v %+v", err, res)
	}
	if res.Base == nil || res.Base.Root != fork.Root {
		t.Errorf("base after forget: %+v, want the fork point's root %s", res.Base, fork.Root.Short())
	}
	head, err := db.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := readTree(t, db, head.Root)
	want := map[string]string{"x": "main\n", "y": "old\n", "z": "z\n", "w": "w\n"}
	for p, c := range want {
		if got[p].content != c {
			t.Errorf("%s = %q, want %q", p, got[p].content, c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("merged tree has %d paths, want %d", len(got), len(want))
	}
}
