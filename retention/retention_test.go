package retention_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/retention"
)

// history writes n snapshots of 200 KB of fresh random content each.
func history(t *testing.T, db *journal.DB, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		b := make([]byte, 200_000)
		rand.New(rand.NewSource(int64(i))).Read(b)
		_, err := db.Do(ctx, "main", "run", "test", func(tx *journal.Tx) error {
			m, _, err := tx.Objects().PutFile(ctx, strings.NewReader(string(b)))
			if err != nil {
				return err
			}
			name := []byte("big")
			if _, err := tx.Lookup(journal.RootIno, name); err == nil {
				if err := tx.Unlink(journal.RootIno, name); err != nil {
					return err
				}
			}
			_, err = tx.Create(journal.RootIno, name, journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: m, Size: int64(len(b))})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.TakeSnapshot(ctx, "main", fmt.Sprintf("s%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	db, err := journal.Open(ctx, filepath.Join(t.TempDir(), "s.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	history(t, db, 6)
	// Under the size: nothing happens.
	res, err := retention.Auto{MaxBytes: 1 << 40, Policy: journal.Retention{Last: 2}}.Apply(ctx, db, "test")
	if err != nil || res.Applied() {
		t.Fatalf("under the size: %+v %v", res, err)
	}
	if s, _ := db.Snapshots(ctx, "main"); len(s) != 6 {
		t.Fatalf("%d snapshots left", len(s))
	}
	// Over it: forget on every branch, then gc.
	res, err = retention.Auto{MaxBytes: 1 << 10, Policy: journal.Retention{Last: 2}}.Apply(ctx, db, "test")
	if err != nil || !res.Applied() || len(res.Forget.Branches[0].Forget) != 4 || res.GC.RemovedBytes < 3*200_000 {
		t.Fatalf("over the size: %+v %v", res, err)
	}
	if s, _ := db.Snapshots(ctx, "main"); len(s) != 2 {
		t.Fatalf("%d snapshots left, want 2", len(s))
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	ops, _ := db.Ops(ctx, journal.LogQuery{Branch: "main", Limit: 1})
	if len(ops) != 1 || !strings.Contains(ops[0].Description, "automatic retention") {
		t.Fatalf("op log: %+v", ops)
	}
}
