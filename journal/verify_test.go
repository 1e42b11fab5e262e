package journal_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// smallHistory writes a few files on main over two snapshots.
func smallHistory(t *testing.T, db *journal.DB) {
	t.Helper()
	ctx := context.Background()
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		if err := mkdirAll(tx, "dir/sub"); err != nil {
			return err
		}
		for i := range 5 {
			if err := writeFile(tx, fmt.Sprintf("dir/sub/f%d", i), fmt.Sprintf("content %d", i), 1); err != nil {
				return err
			}
		}
		return writeFile(tx, "top", "top content", 1)
	})
	if _, err := db.TakeSnapshot(ctx, "main", "one"); err != nil {
		t.Fatal(err)
	}
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		return writeFile(tx, "dir/sub/f0", "changed content 0", 2)
	})
	if _, err := db.TakeSnapshot(ctx, "main", "two"); err != nil {
		t.Fatal(err)
	}
}

func verify(t *testing.T, db *journal.DB, rebuild bool) *journal.VerifyReport {
	t.Helper()
	rep, err := db.Verify(context.Background(), journal.VerifyOptions{Rebuild: rebuild})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

func problems(rep *journal.VerifyReport, what string) []journal.Problem {
	var out []journal.Problem
	for _, p := range rep.Problems {
		if p.What == what {
			out = append(out, p)
		}
	}
	return out
}

func flipBit(t *testing.T, raw *sql.DB, table, col, where string, args ...any) {
	t.Helper()
	var b []byte
	if err := raw.QueryRow(`SELECT `+col+` FROM `+table+` WHERE `+where, args...).Scan(&b); err != nil {
		t.Fatalf("read %s.%s: %v", table, col, err)
	}
	if len(b) == 0 {
		t.Fatalf("%s.%s is empty", table, col)
	}
	b[len(b)/2] ^= 0x10
	res, err := raw.Exec(`UPDATE `+table+` SET `+col+` = ? WHERE `+where, append([]any{b}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("tampered with %d rows, want 1", n)
	}
}

func TestVerifyClean(t *testing.T) {
	db := openStore(t)
	smallHistory(t, db)
	rep := verify(t, db, true)
	if !rep.OK() {
		t.Fatalf("problems on a clean store: %+v", rep.Problems)
	}
	if got, want := rep.Snapshots, 2; got != want {
		t.Fatalf("verify counted %d snapshots, want %d", got, want)
	}
	if rep.Events == 0 || rep.Objects == 0 || rep.Branches != 1 {
		t.Fatalf("verify counted %+v", rep)
	}
}

func TestVerifyObjectCorruption(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	smallHistory(t, db)
	raw := rawSQL(t, db.Path())

	// The chunk of dir/sub/f3 (small content is one chunk).
	tr, err := db.Objects().GetTree(ctx, headRoot(t, db, "main"))
	if err != nil {
		t.Fatal(err)
	}
	entry := lookupPath(t, db.Objects(), tr, "dir/sub/f3")
	m, err := db.Objects().GetManifest(ctx, entry.Target)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Extents) != 1 {
		t.Fatalf("f3 has %d extents, want 1", len(m.Extents))
	}
	chunk := m.Extents[0].ID
	flipBit(t, raw, "objects", "data", "id = ?", chunk[:])

	rep := verify(t, db, false)
	objs := problems(rep, "object")
	if len(objs) != 1 || objs[0].Object != chunk.String() {
		t.Fatalf("object problems = %+v, want one naming %s", objs, chunk)
	}
	if !containsSuffix(objs[0].Paths, "dir/sub/f3") {
		t.Fatalf("affected paths %q do not name dir/sub/f3", objs[0].Paths)
	}
	if len(rep.Problems) != 1 {
		t.Fatalf("problems = %+v, want only the object", rep.Problems)
	}
	var buf bytes.Buffer
	if _, err := db.Objects().ReadFile(ctx, entry.Target, &buf); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("reading the damaged file: %v, want cas.ErrCorrupt", err)
	}
	// Other files still read.
	other := lookupPath(t, db.Objects(), tr, "dir/sub/f4")
	buf.Reset()
	if _, err := db.Objects().ReadFile(ctx, other.Target, &buf); err != nil || buf.String() != "content 4" {
		t.Fatalf("reading an intact file: %q, %v", buf.String(), err)
	}

	// A damaged tree names the states that depend on it.
	sub := lookupPath(t, db.Objects(), tr, "dir/sub")
	flipBit(t, raw, "objects", "data", "id = ?", sub.Target[:])
	rep = verify(t, db, false)
	found := false
	for _, p := range problems(rep, "object") {
		if p.Object == sub.Target.String() {
			found = len(p.Paths) > 0
		}
	}
	if !found {
		t.Fatalf("damaged tree %s not reported with paths: %+v", sub.Target.Short(), rep.Problems)
	}
}

func lookupPath(t *testing.T, objs *cas.Store, root *cas.Tree, path string) *cas.Entry {
	t.Helper()
	tr := root
	parts := strings.Split(path, "/")
	for i, name := range parts {
		e, ok := tr.Lookup([]byte(name))
		if !ok {
			t.Fatalf("%s: no %q", path, name)
		}
		if i == len(parts)-1 {
			return e
		}
		var err error
		if tr, err = objs.GetTree(context.Background(), e.Target); err != nil {
			t.Fatal(err)
		}
	}
	panic("unreachable")
}

func containsSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}

func TestVerifyEventPayloadTampered(t *testing.T) {
	db := openStore(t)
	smallHistory(t, db)
	raw := rawSQL(t, db.Path())
	seq := count(t, raw, `SELECT max(seq) FROM events WHERE kind = ?`, int(journal.EvWrite))
	flipBit(t, raw, "events", "payload", "seq = ?", seq)
	rep := verify(t, db, false)
	chain := problems(rep, "chain")
	if len(chain) == 0 {
		t.Fatalf("no chain problem after altering event %d: %+v", seq, rep.Problems)
	}
	if got, want := chain[0].Seq, int64(seq); got != want {
		t.Fatalf("chain problem at seq %d, want %d: %+v", got, want, chain)
	}
	if got, want := chain[0].Branch, "main"; got != want {
		t.Fatalf("chain problem on branch %q, want %q", got, want)
	}
}

func TestVerifyTruncation(t *testing.T) {
	db := openStore(t)
	smallHistory(t, db)
	raw := rawSQL(t, db.Path())
	main, err := db.Branch(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM events WHERE seq = (SELECT max(seq) FROM events WHERE branch = ?)`, main.ID); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, db, false)
	var truncated bool
	for _, p := range problems(rep, "chain") {
		if strings.Contains(p.Detail, "truncated") {
			truncated = true
		}
	}
	if !truncated {
		t.Fatalf("no truncation reported: %+v", rep.Problems)
	}
	// The last event was a snapshot: its row now has no event.
	if len(problems(rep, "snapshot")) == 0 {
		t.Fatalf("no snapshot problem: %+v", rep.Problems)
	}
}

func TestVerifyTruncationInTheMiddle(t *testing.T) {
	db := openStore(t)
	smallHistory(t, db)
	raw := rawSQL(t, db.Path())
	// Drop the write between the two snapshots: the chain breaks there and
	// the second snapshot's event count no longer matches.
	seq := count(t, raw, `SELECT max(seq) FROM events WHERE kind = ?`, int(journal.EvWrite))
	if _, err := raw.Exec(`DELETE FROM events WHERE seq = ?`, seq); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, db, false)
	if len(problems(rep, "chain")) == 0 || len(problems(rep, "snapshot")) == 0 {
		t.Fatalf("want chain and snapshot problems: %+v", rep.Problems)
	}
}

func TestVerifyRebuildsProjection(t *testing.T) {
	db := openStore(t)
	smallHistory(t, db)
	raw := rawSQL(t, db.Path())
	main, err := db.Branch(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	want := treeMap(t, db.Objects(), headRoot(t, db, "main"), true)
	// Make the projection lie about one file's size.
	res, err := raw.Exec(`UPDATE nodes SET size = size + 7 WHERE branch = ? AND ino = (
		SELECT ino FROM dentries WHERE branch = ? AND name = CAST('f2' AS BLOB))`, main.ID, main.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("altered %d node rows, want 1", n)
	}
	rep := verify(t, db, true)
	proj := problems(rep, "projection")
	if len(proj) != 1 || proj[0].Branch != "main" {
		t.Fatalf("projection problems = %+v, want one on main (all: %+v)", proj, rep.Problems)
	}
	if got, want := fmt.Sprint(rep.Rebuilt), "[main]"; got != want {
		t.Fatalf("rebuilt %s, want %s", got, want)
	}
	if rep := verify(t, db, true); !rep.OK() {
		t.Fatalf("second verify: %+v", rep.Problems)
	}
	if d := mapDiff(want, treeMap(t, db.Objects(), headRoot(t, db, "main"), true)); d != "" {
		t.Fatalf("head after rebuild:\n%s", d)
	}
	// The rebuilt projection takes writes.
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "dir/sub/f2", "after rebuild", 3) })
	if rep := verify(t, db, true); !rep.OK() {
		t.Fatalf("verify after a write: %+v", rep.Problems)
	}
}

// Regression: rebuilding a projection whose tree has hard links loads the
// linked files' directories eagerly, allocating inode numbers; the branch's
// inode counter must move past them or the next create reuses one.
func TestVerifyRebuildWithHardLinks(t *testing.T) {
	db := openStore(t)
	smallHistory(t, db)
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		f, err := tx.Resolve([]byte("dir/sub/f1"))
		if err != nil {
			return err
		}
		_, err = tx.Link(f.Ino, journal.RootIno, []byte("link"))
		return err
	})
	raw := rawSQL(t, db.Path())
	main, err := db.Branch(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE nodes SET mode = 511 WHERE branch = ? AND ino = (
		SELECT ino FROM dentries WHERE branch = ? AND name = CAST('top' AS BLOB))`, main.ID, main.ID); err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, db, true); len(rep.Rebuilt) != 1 {
		t.Fatalf("rebuilt %v, want main (problems %+v)", rep.Rebuilt, rep.Problems)
	}
	mustDo(t, db, "main", func(tx *journal.Tx) error {
		for i := range 10 {
			if err := writeFile(tx, fmt.Sprintf("new%d", i), fmt.Sprint(i), 4); err != nil {
				return err
			}
		}
		return nil
	})
	got := treeMap(t, db.Objects(), headRoot(t, db, "main"), true)
	for _, p := range []string{"dir/sub/f1", "link", "top", "new0", "new9"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s missing after rebuild and creates", p)
		}
	}
	if !strings.Contains(got["link"], `"content 1"`) {
		t.Errorf("link = %s, want content 1", got["link"])
	}
	if rep := verify(t, db, true); !rep.OK() {
		t.Fatalf("verify after rebuild and creates: %+v", rep.Problems)
	}
}
