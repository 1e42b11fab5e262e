package journal

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

// TestUnlinkPaths pins the two ways an unlink goes (mutate.go): the
// only name of a plain file is deleted without reading its node, whether
// or not the batch's path cache holds files, and the file is forgotten
// there (a cache that kept every removed file would grow for the whole
// session); anything else - a directory, a hard link, a missing name -
// takes the general path with the errors and rows it always had. An
// rmdir forgets only its own directory's cached path.
func TestUnlinkPaths(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "u.db"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op, err := db.BeginOp(ctx, "main", "test", "unlink")
	if err != nil {
		t.Fatal(err)
	}
	b := op.NewBatch(time.Hour, 0)
	var content cas.ID
	var d, sub, f1, f2 Node
	err = b.Update(ctx, func(tx *Tx) error {
		if content, _, err = tx.Objects().PutFile(ctx, strings.NewReader("x")); err != nil {
			return err
		}
		if d, err = tx.Create(RootIno, []byte("d"), Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
			return err
		}
		if sub, err = tx.Create(d.Ino, []byte("sub"), Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
			return err
		}
		for _, n := range []struct {
			name string
			to   *Node
		}{{"a", &f1}, {"b", &f2}} {
			if *n.to, err = tx.Create(d.Ino, []byte(n.name), Attr{Kind: cas.EntryFile, Mode: 0o644, Content: content, Size: 1}); err != nil {
				return err
			}
		}
		if _, err := tx.Link(f2.Ino, RootIno, []byte("b2")); err != nil {
			return err
		}
		_, err = tx.Path(sub.Ino) // cached, as a removal below it would
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cached := func(ino int64) bool {
		_, file := b.paths.files[ino]
		_, dir := b.paths.dirs[ino]
		return file || dir
	}
	unlink := func(parent int64, name string) error {
		return b.Update(ctx, func(tx *Tx) error { return tx.Unlink(parent, []byte(name)) })
	}
	// The only name of a file, with files in the cache: gone, and forgotten.
	if !cached(f1.Ino) || !b.paths.holdsFiles() {
		t.Fatalf("a's path is no longer cached: the test misses the path it is for")
	}
	if err := unlink(d.Ino, "a"); err != nil {
		t.Fatal(err)
	}
	if cached(f1.Ino) {
		t.Fatalf("the unlinked file is still in the path cache")
	}
	// The general path's answers (a failed update clears the cache).
	for _, c := range []struct {
		parent int64
		name   string
		want   syscall.Errno
	}{{d.Ino, "sub", syscall.EISDIR}, {d.Ino, "nope", syscall.ENOENT}, {RootIno, "d", syscall.EISDIR}} {
		if err := unlink(c.parent, c.name); !errors.Is(err, c.want) {
			t.Fatalf("unlink %s: %v, want %v", c.name, err, c.want)
		}
	}
	// One name of a hard-linked file: the node stays with the other name.
	if err := unlink(d.Ino, "b"); err != nil {
		t.Fatal(err)
	}
	err = b.Update(ctx, func(tx *Tx) error {
		n, err := tx.Lookup(RootIno, []byte("b2"))
		if err != nil {
			return err
		}
		if n.Ino != f2.Ino || n.Nlink != 1 {
			t.Errorf("b2 after unlinking b: ino %d nlink %d, want ino %d nlink 1", n.Ino, n.Nlink, f2.Ino)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// With nothing cached of any file: the statement that needs no inode.
	b.paths.clear()
	if err := b.Update(ctx, func(tx *Tx) error { _, err := tx.Path(d.Ino); return err }); err != nil {
		t.Fatal(err)
	}
	if b.paths.holdsFiles() {
		t.Fatalf("the path cache holds files after clear")
	}
	if err := unlink(RootIno, "b2"); err != nil {
		t.Fatal(err)
	}
	if err := unlink(RootIno, "b2"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("second unlink of b2: %v, want ENOENT", err)
	}
	// rmdir forgets its directory and keeps its parent's path.
	if err := b.Update(ctx, func(tx *Tx) error { _, err := tx.Path(sub.Ino); return err }); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, func(tx *Tx) error { return tx.Rmdir(d.Ino, []byte("sub")) }); err != nil {
		t.Fatal(err)
	}
	if cached(sub.Ino) || !cached(d.Ino) {
		t.Fatalf("after rmdir: sub cached %v (want false), d cached %v (want true)", cached(sub.Ino), cached(d.Ino))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	// The rows: nothing left of the removed nodes, and the events named them.
	evs, err := db.Events(ctx, EventQuery{Branch: "main", Kind: EvUnlink})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, string(ev.Path))
	}
	if want := []string{"d/a", "d/b", "b2"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("unlink events %q, want %q", got, want)
	}
	var left int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM nodes WHERE ino IN (?, ?, ?)`, f1.Ino, f2.Ino, sub.Ino).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d removed nodes still have rows", left)
	}
}
