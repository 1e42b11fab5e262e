package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// TestScriptedHistory walks a history a user would make: import, snapshot,
// change, snapshot, checkout, undo, branch and diverge.
func TestScriptedHistory(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)

	// An import.
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		if err := mkdirAll(tx, "src/pkg"); err != nil {
			return err
		}
		for _, f := range []struct{ path, data string }{
			{"README", "hello\n"}, {"src/main.go", "package main\n"}, {"src/pkg/lib.go", "package pkg\n"},
		} {
			if err := writeFile(tx, f.path, f.data, 1); err != nil {
				return err
			}
		}
		return nil
	})
	s1, err := db.TakeSnapshot(ctx, "main", "s1")
	if err != nil {
		t.Fatal(err)
	}
	// A change.
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		if err := writeFile(tx, "README", "hello, world\n", 2); err != nil {
			return err
		}
		if err := writeFile(tx, "src/new.go", "package main // new\n", 2); err != nil {
			return err
		}
		src, err := tx.Resolve([]byte("src/pkg"))
		if err != nil {
			return err
		}
		return tx.Unlink(src.Ino, []byte("lib.go"))
	})
	s2, err := db.TakeSnapshot(ctx, "main", "s2")
	if err != nil {
		t.Fatal(err)
	}
	if s1.Root == s2.Root {
		t.Fatal("s1 and s2 have the same root")
	}
	if got, want := diffPaths(t, db.Objects(), s1.Root, s2.Root), []string{"README", "src/new.go", "src/pkg/lib.go"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diff s1 s2 = %v, want %v", got, want)
	}
	var kinds []string
	journal.Diff(ctx, db.Objects(), s1.Root, s2.Root, func(c journal.Change) error {
		kinds = append(kinds, c.Kind.String())
		return nil
	})
	if got, want := strings.Join(kinds, ""), "MAD"; got != want {
		t.Fatalf("diff kinds = %q, want %q", got, want)
	}
	if got, want := resolve(t, db, "main~1").Snapshot, s1.ID; got != want {
		t.Fatalf("main~1 = %s, want s1 %s", got.Short(), want.Short())
	}
	if got, want := resolve(t, db, "main~0").Snapshot, s2.ID; got != want {
		t.Fatalf("main~0 = %s, want s2 %s", got.Short(), want.Short())
	}
	if got, want := resolve(t, db, s2.ID.String()[:6]+"~").Snapshot, s1.ID; got != want {
		t.Fatalf("s2~ = %s, want s1 %s", got.Short(), want.Short())
	}
	if got, want := resolve(t, db, fmt.Sprintf("@%d", s1.Seq)).Root, s1.Root; got != want {
		t.Fatalf("@%d root = %s, want %s", s1.Seq, got.Short(), want.Short())
	}
	if got, want := resolve(t, db, strings.ToUpper(s1.ID.String()[:8])).Snapshot, s1.ID; got != want {
		t.Fatalf("upper-case prefix resolves to %s, want %s", got.Short(), want.Short())
	}

	// Checkout s1: the head is s1's tree, and the log shows the checkout.
	if _, err := db.Checkout(ctx, "main", resolve(t, db, s1.ID.String()[:8])); err != nil {
		t.Fatal(err)
	}
	if got, want := headRoot(t, db, "main"), s1.Root; got != want {
		t.Fatalf("head after checkout s1 = %s, want %s", got.Short(), want.Short())
	}
	ops, err := db.Ops(ctx, journal.LogQuery{Branch: "main", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ops[0].Kind, "checkout"; got != want {
		t.Fatalf("last op is %q, want %q", got, want)
	}
	if !strings.Contains(ops[0].Description, s1.ID.Short()) {
		t.Fatalf("checkout op %q does not name s1 %s", ops[0].Description, s1.ID.Short())
	}
	// Nothing was deleted: s2 is still there.
	if got, want := resolve(t, db, s2.ID.String()).Root, s2.Root; got != want {
		t.Fatalf("s2 after checkout = %s, want %s", got.Short(), want.Short())
	}
	// main~1 follows the checkout back to where the state came from.
	if got := resolve(t, db, "main~0").Snapshot; got != s1.ID {
		t.Fatalf("main~0 after checkout = %s, want s1", got.Short())
	}

	// Undo returns to s2's tree; undo again walks back further.
	undone, err := db.Undo(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := undone.Kind, "checkout"; got != want {
		t.Fatalf("undo undid a %q op, want %q", got, want)
	}
	if got, want := headRoot(t, db, "main"), s2.Root; got != want {
		t.Fatalf("head after undo = %s, want s2 %s", got.Short(), want.Short())
	}
	if got, want := resolve(t, db, "main~1").Snapshot, s1.ID; got != want {
		t.Fatalf("main~1 after undo = %s, want s1 %s", got.Short(), want.Short())
	}
	undone, err = db.Undo(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := undone.Kind, "run"; got != want {
		t.Fatalf("second undo undid a %q op, want the change (%q)", got, want)
	}
	if got, want := headRoot(t, db, "main"), s1.Root; got != want {
		t.Fatalf("head after second undo = %s, want s1 %s", got.Short(), want.Short())
	}
	if _, err := db.Undo(ctx, "main"); err != nil { // the import
		t.Fatal(err)
	}
	if got := treeMap(t, db.Objects(), headRoot(t, db, "main"), true); len(got) != 0 {
		t.Fatalf("head after undoing the import = %v, want empty", got)
	}
	if _, err := db.Undo(ctx, "main"); !errors.Is(err, journal.ErrNothingToUndo) {
		t.Fatalf("undo past the start: %v, want ErrNothingToUndo", err)
	}
	ops, err = db.Ops(ctx, journal.LogQuery{Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, o := range ops {
		log = append(log, o.Kind)
	}
	if got, want := strings.Join(log, " "), "undo undo undo checkout snapshot run snapshot run branch"; got != want {
		t.Fatalf("log = %q, want %q", got, want)
	}

	// A branch from s1 diverges from main.
	if _, err := db.Checkout(ctx, "main", resolve(t, db, s2.ID.String())); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateBranch(ctx, "feature", resolve(t, db, s1.ID.String())); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateBranch(ctx, "feature", resolve(t, db, s1.ID.String())); !errors.Is(err, journal.ErrBranchExists) {
		t.Fatalf("second create: %v, want ErrBranchExists", err)
	}
	if got, want := headRoot(t, db, "feature"), s1.Root; got != want {
		t.Fatalf("new branch head = %s, want s1 %s", got.Short(), want.Short())
	}
	mustDo(t, db, "feature", func(tx *journal.Tx) error {
		if err := writeFile(tx, "README", "feature readme\n", 3); err != nil {
			return err
		}
		return writeFile(tx, "src/pkg/feature.go", "package pkg // feature\n", 3)
	})
	if got, want := headRoot(t, db, "main"), s2.Root; got != want {
		t.Fatalf("main moved when feature changed: %s, want %s", got.Short(), want.Short())
	}
	got := diffPaths(t, db.Objects(), headRoot(t, db, "main"), headRoot(t, db, "feature"))
	if want := []string{"README", "src/new.go", "src/pkg/feature.go", "src/pkg/lib.go"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diff main feature = %v, want %v", got, want)
	}
	if got, want := resolve(t, db, "feature~0").Snapshot, s1.ID; got != want {
		t.Fatalf("feature~0 = %s, want s1 (the branch point)", got.Short())
	}
	fs, err := db.TakeSnapshot(ctx, "feature", "f1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resolve(t, db, "feature~1").Snapshot, s1.ID; got != want {
		t.Fatalf("feature~1 = %s, want s1", got.Short())
	}
	snaps, err := db.Snapshots(ctx, "feature")
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].ID != fs.ID || snaps[0].Branch != "feature" {
		t.Fatalf("feature snapshots = %+v, want just f1", snaps)
	}
	evs, err := db.Events(ctx, journal.EventQuery{Branch: "feature", Path: []byte("src")})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != journal.EvCreate || string(evs[0].Path) != "src/pkg/feature.go" {
		t.Fatalf("feature events under src = %+v, want the create of feature.go", evs)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %+v", rep.Problems)
	}
}

func TestResolveErrors(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "a", 1) })
	s, err := db.TakeSnapshot(ctx, "main", "one")
	if err != nil {
		t.Fatal(err)
	}
	// A 4-digit prefix that is not s's.
	other := "0000"
	if strings.HasPrefix(s.ID.String(), other) {
		other = "ffff"
	}
	for _, c := range []struct {
		rev  string
		want error
	}{
		{"nosuch", journal.ErrRevNotFound},
		{other, journal.ErrRevNotFound},
		{"@999999", journal.ErrRevNotFound},
		{"main~5", journal.ErrRevNotFound},
		{"nosuch~1", journal.ErrRevNotFound},
		{"main~x", journal.ErrBadRev},
		{"main~-1", journal.ErrBadRev},
		{"@0", journal.ErrBadRev},
		{"@-3", journal.ErrBadRev},
		{"@x", journal.ErrBadRev},
	} {
		_, err := db.Resolve(ctx, c.rev, "main")
		if !errors.Is(err, c.want) {
			t.Errorf("Resolve(%q) = %v, want %v", c.rev, err, c.want)
		}
	}
	for _, name := range []string{"", "a~1", "@x", "abcd", "x..y", "-x", "x.lock", strings.Repeat("a", 101)} {
		if _, err := db.CreateBranch(ctx, name, resolve(t, db, "main")); err == nil {
			t.Errorf("CreateBranch(%q) succeeded", name)
		}
	}
	if _, err := db.Head(ctx, "nosuch"); !errors.Is(err, journal.ErrBranchNotFound) {
		t.Errorf("Head(nosuch) = %v, want ErrBranchNotFound", err)
	}
}

// TestResolveAmbiguous takes snapshots until two ids share a 4-digit prefix,
// which the birthday bound makes likely after a few hundred.
func TestResolveAmbiguous(t *testing.T) {
	if testing.Short() {
		t.Skip("takes hundreds of snapshots")
	}
	ctx := context.Background()
	db := openStore(t)
	seen := map[string]cas.ID{}
	for i := 0; i < 3000; i++ {
		s, err := db.TakeSnapshot(ctx, "main", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		prefix := s.ID.String()[:4]
		if prev, ok := seen[prefix]; ok {
			_, err := db.Resolve(ctx, prefix, "main")
			if !errors.Is(err, journal.ErrAmbiguous) {
				t.Fatalf("Resolve(%q) with %s and %s = %v, want ErrAmbiguous", prefix, prev.Short(), s.ID.Short(), err)
			}
			// One more digit tells them apart when they differ there.
			if a, b := prev.String()[:5], s.ID.String()[:5]; a != b {
				if got := resolve(t, db, b).Snapshot; got != s.ID {
					t.Fatalf("Resolve(%q) = %s, want %s", b, got.Short(), s.ID.Short())
				}
			}
			t.Logf("ambiguous prefix %s after %d snapshots", prefix, i+1)
			return
		}
		seen[prefix] = s.ID
	}
	t.Skip("no two of 3000 snapshot ids share a 4-digit prefix")
}

// TestDeleteBranch: a deleted branch's history stays reachable by snapshot
// id and @seq, its name can be reused, and Verify still checks its chain.
func TestDeleteBranch(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	if _, err := db.CreateBranch(ctx, "tmp", resolve(t, db, "main")); err != nil {
		t.Fatal(err)
	}
	mustDo(t, db, "tmp", func(tx *journal.Tx) error { return writeFile(tx, "x", "on tmp", 1) })
	s, err := db.TakeSnapshot(ctx, "tmp", "keep me")
	if err != nil {
		t.Fatal(err)
	}
	head, err := db.DeleteBranch(ctx, "tmp")
	if err != nil {
		t.Fatal(err)
	}
	if head.Snapshot != s.ID || head.Root != s.Root || head.Seq != s.Seq {
		t.Errorf("deleted head %+v, want the snapshot %+v", head, s)
	}
	if _, err := db.DeleteBranch(ctx, "tmp"); !errors.Is(err, journal.ErrBranchNotFound) {
		t.Fatalf("second delete: %v, want ErrBranchNotFound", err)
	}
	if _, err := db.Resolve(ctx, "tmp", "main"); !errors.Is(err, journal.ErrRevNotFound) {
		t.Fatalf("resolve deleted branch: %v, want ErrRevNotFound", err)
	}
	if got := resolve(t, db, s.ID.String()).Root; got != s.Root {
		t.Fatalf("snapshot of a deleted branch resolves to %s, want %s", got.Short(), s.Root.Short())
	}
	if got := resolve(t, db, fmt.Sprintf("@%d", s.Seq-1)).Root; got != s.Root {
		t.Fatalf("@%d of a deleted branch = %s, want %s", s.Seq-1, got.Short(), s.Root.Short())
	}
	if _, err := db.Do(ctx, "tmp", "run", "x", func(*journal.Tx) error { return nil }); !errors.Is(err, journal.ErrBranchNotFound) {
		t.Fatalf("write to a deleted branch: %v, want ErrBranchNotFound", err)
	}
	// The name is free again, for a new chain.
	if _, err := db.CreateBranch(ctx, "tmp", resolve(t, db, s.ID.String())); err != nil {
		t.Fatal(err)
	}
	if got := headRoot(t, db, "tmp"); got != s.Root {
		t.Fatalf("recreated branch head = %s, want %s", got.Short(), s.Root.Short())
	}
	bs, err := db.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 {
		t.Fatalf("branches = %+v, want main and tmp", bs)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Branches != 2 || rep.Snapshots != 1 {
		t.Fatalf("verify: branches %d snapshots %d problems %+v", rep.Branches, rep.Snapshots, rep.Problems)
	}
}
