package journal

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/artrt/art/cas"
)

// TestRedoChainChecked: a log whose records pass their check but whose
// events do not chain, or belong to another branch, is refused before
// anything of it is applied.
func TestRedoChainChecked(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.art"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ev := (&Event{Kind: EvCreate, Branch: 1, Op: 1, Path: []byte("x"), Attr: Attr{Kind: cas.EntryFile}}).Encode()
	good := redoEventRow{seq: 7, branch: 1, op: 1, kind: int64(EvCreate), payload: ev, prev: cas.ID{1}}
	good.hash = chainHash(good.prev, good.seq, good.payload)
	forged := good
	forged.hash[0] ^= 1
	other := good
	other.branch = 2
	unlinked := good // chains to nothing before it
	unlinked.prev = cas.ID{9}
	unlinked.hash = chainHash(unlinked.prev, unlinked.seq, unlinked.payload)
	for name, evs := range map[string][]redoEventRow{
		"forged hash":  {forged},
		"other branch": {other},
		"broken link":  {good, unlinked},
	} {
		err := db.writeTx(ctx, func(tx *sql.Tx) error {
			_, _, err := db.applyRedo(ctx, tx, &parsedRedo{branch: 1, events: evs})
			return err
		})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: applied with %v, want ErrCorrupt", name, err)
		}
	}
}
