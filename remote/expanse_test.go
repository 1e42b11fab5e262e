package remote

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// A state of shared subtrees names far more paths than it has objects. A
// pull measures it once per distinct tree (it hung walking every path)
// and refuses it past the bound the user sets.
func TestPullMeasuresDAGOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dag.db")
	src, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	var root cas.ID
	err = src.ReceiveObjects(ctx, func(objs *cas.Store) error {
		m, _, err := objs.PutFile(ctx, strings.NewReader(""))
		if err != nil {
			return err
		}
		t := &cas.Tree{Entries: []cas.Entry{{Name: []byte("f"), Kind: cas.EntryFile, Mode: 0o644, Target: m, Size: 0}}}
		for level := 0; level < 8; level++ {
			id, _, err := objs.PutTree(ctx, t)
			if err != nil {
				return err
			}
			t = &cas.Tree{}
			for i := 0; i < 32; i++ {
				t.Entries = append(t.Entries, cas.Entry{Name: []byte(fmt.Sprintf("d%02d", i)), Kind: cas.EntryDir, Mode: 0o755, Target: id})
			}
		}
		root, _, err = objs.PutTree(ctx, t)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.MoveBranch(ctx, "dag", cas.ID{}, root, "test", "dag", 0); err != nil {
		t.Fatal(err)
	}
	// dag2 holds the same DAG one level down: pulled after dag, the DAG is
	// already local and only measured (the statistics count its content).
	var root2 cas.ID
	err = src.ReceiveObjects(ctx, func(objs *cas.Store) error {
		var err error
		root2, _, err = objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{{Name: []byte("again"), Kind: cas.EntryDir, Mode: 0o755, Target: root}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.MoveBranch(ctx, "dag2", cas.ID{}, root2, "test", "dag2", 0); err != nil {
		t.Fatal(err)
	}
	src.Close()
	r, err := OpenFile(ctx, path, OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dst := newStore(t)
	start := time.Now()
	_, err = Pull(ctx, dst, r, []string{"dag"}, Options{})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("pull of 32^8 paths: %v, want ErrTooLarge", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("refusing took %v", d)
	}
	if _, err := dst.Branch(ctx, "dag"); !errors.Is(err, journal.ErrBranchNotFound) {
		t.Fatalf("a refused pull created the branch: %v", err)
	}
	// Raised far enough, the same pull goes through: the bound is the
	// user's, and measuring costs the distinct trees only.
	st, err := Pull(ctx, dst, r, []string{"dag"}, Options{MaxEntries: 1 << 50, MaxBytes: 1 << 50})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Objects, int64(9+1); got != want { // nine trees and the empty file's manifest
		t.Fatalf("pulled %d objects, want %d", got, want)
	}
	start = time.Now()
	st, err = Pull(ctx, dst, r, []string{"dag2"}, Options{MaxEntries: 1 << 50, MaxBytes: 1 << 50})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("pulling a known DAG took %v", d)
	}
	if st.Objects != 1 || st.DedupObjects != 1 {
		t.Fatalf("second pull: %+v, want the new root only", st)
	}
}
