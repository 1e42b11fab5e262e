package retention_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/retention"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	if a, err := retention.Load(filepath.Join(t.TempDir(), "missing.json")); err != nil || a.Enabled() {
		t.Fatalf("missing file: %+v %v", a, err)
	}
	if a, err := retention.Load(writeConfig(t, `{"net":{"mode":"none"}}`)); err != nil || a.Enabled() {
		t.Fatalf("no retention section: %+v %v", a, err)
	}
	a, err := retention.Load(writeConfig(t, `{"retention":{"max_store_size":"2G","keep_last":3,"keep_daily":7,"keep_within":"2d","grace":"10m"}}`))
	if err != nil || a.MaxBytes != 2<<30 || a.Policy.Last != 3 || a.Policy.Daily != 7 || a.Policy.Within != 48*time.Hour || a.Grace != 10*time.Minute {
		t.Fatalf("full config: %+v %v", a, err)
	}
	for _, bad := range []string{
		`{"retention":{"max_store_size":"2G","keep_lsat":3}}`, // misspelt rule
		`{"retention":{"max_store_size":"2G"}}`,               // keeps nothing
		`{"retention":{"keep_last":3}}`,                       // never applies
		`{"retention":{"max_store_size":"big","keep_last":3}}`,
		`{"retention":{"max_store_size":"2G","keep_last":-1}}`,
		`{"retention":{"max_store_size":"2G","keep_within":"soon"}}`,
		`{"retention":{"max_store_size":"2G","keep_last":1,"grace":"-1h"}}`,
		`{"retention":`,
	} {
		if _, err := retention.Load(writeConfig(t, bad)); !errors.Is(err, retention.ErrBadConfig) {
			t.Errorf("%s: %v, want ErrBadConfig", bad, err)
		}
	}
}

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
