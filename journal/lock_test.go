package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/artrt/art/journal"
)

// TestBranchLockRefusesEveryTreeChange: while one DB holds a branch's lock
// (a session), every change of the branch's tree through another DB of the
// same store is refused with *BranchInUseError - in the journal, whichever
// verb asks - and records that change no tree are not; the holder's own
// writes go on, and everything works again once the lock is released.
func TestBranchLockRefusesEveryTreeChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.art")
	open := func() *journal.DB {
		db, err := journal.Open(ctx, path, journal.Options{Create: true, LockDir: filepath.Join(dir, "locks")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	holder, other := open(), open()
	mustDo(t, holder, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "one", 1) })
	first, err := holder.TakeSnapshot(ctx, "main", "first")
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, holder, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "two", 2) })
	lock, err := holder.LockBranch(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.LockBranch(ctx, "main"); !inUse(err) {
		t.Errorf("a second lock: %v, want BranchInUseError", err)
	}
	if _, err := holder.LockBranch(ctx, "main"); !inUse(err) {
		t.Errorf("a second lock by the holder's DB: %v, want BranchInUseError", err)
	}
	to := resolve(t, other, first.ID.String())
	for name, change := range map[string]func() error{
		"checkout": func() error { _, err := other.Checkout(ctx, "main", to); return err },
		"undo":     func() error { _, err := other.Undo(ctx, "main"); return err },
		"delete":   func() error { _, err := other.DeleteBranch(ctx, "main"); return err },
		"rename":   func() error { return other.RenameBranch(ctx, "main", "moved") },
		"move": func() error {
			b, err := other.Branch(ctx, "main")
			if err != nil {
				return err
			}
			g, err := other.GCGeneration(ctx)
			if err != nil {
				return err
			}
			_, err = other.MoveBranch(ctx, "main", b.HeadHash, first.Root, "pull", "pull", g)
			return err
		},
		"write": func() error {
			_, err := other.Do(ctx, "main", "import", "push", func(tx *journal.Tx) error { return writeFile(tx, "b", "x", 3) })
			return err
		},
		"batch": func() error {
			op, err := other.BeginOp(ctx, "main", "import", "push")
			if err != nil {
				return err
			}
			defer op.End(ctx, nil)
			b := op.NewBatch(0, 0)
			err = b.Update(ctx, func(tx *journal.Tx) error { return writeFile(tx, "c", "x", 3) })
			return errors.Join(err, b.Commit())
		},
	} {
		if err := change(); !inUse(err) {
			t.Errorf("%s of a held branch: %v, want BranchInUseError", name, err)
		}
	}
	if got := string(readHead(t, other, "main", "a")); got != "two" {
		t.Errorf("main:a after the refused changes: %q", got)
	}
	// Not changes of the tree: a snapshot, a new branch from it.
	if _, err := other.TakeSnapshot(ctx, "main", "while held"); err != nil {
		t.Errorf("snapshot of a held branch: %v", err)
	}
	if _, err := other.CreateBranch(ctx, "copy", resolve(t, other, "main")); err != nil {
		t.Errorf("branch from a held branch: %v", err)
	}
	// The holder writes on.
	mustDo(t, holder, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "three", 4) })
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(); err != nil {
		t.Errorf("second release: %v", err)
	}
	if _, err := other.Checkout(ctx, "main", to); err != nil {
		t.Errorf("checkout after the release: %v", err)
	}
	if err := other.RenameBranch(ctx, "copy", "copy2"); err != nil {
		t.Errorf("rename: %v", err)
	}
	if _, err := other.DeleteBranch(ctx, "copy2"); err != nil {
		t.Errorf("delete: %v", err)
	}
}

func inUse(err error) bool {
	var e *journal.BranchInUseError
	return errors.As(err, &e)
}

// TestBranchLockLeavesNoFile: a released lock removes its file (a test
// suite's sessions left thousands in /run/art), and the branch can be
// locked again, by the same DB or another, after it went.
func TestBranchLockLeavesNoFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	locks := filepath.Join(dir, "locks")
	path := filepath.Join(dir, "store.art")
	open := func() *journal.DB {
		db, err := journal.Open(ctx, path, journal.Options{Create: true, LockDir: locks})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	for i, db := range []*journal.DB{a, b, a} {
		l, err := db.LockBranch(ctx, "main")
		if err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
		if names, _ := filepath.Glob(filepath.Join(locks, "lock-*")); len(names) != 1 {
			t.Fatalf("lock %d held: %d lock files, want 1", i, len(names))
		}
		other := b
		if db == b {
			other = a
		}
		if _, err := other.LockBranch(ctx, "main"); !inUse(err) {
			t.Errorf("lock %d: the other DB locked it too: %v", i, err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if names, _ := filepath.Glob(filepath.Join(locks, "lock-*")); len(names) != 0 {
			t.Fatalf("lock %d released: lock files left: %v", i, names)
		}
	}
}
