package journal_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// allKinds are every event kind the format defines.
var allKinds = []journal.EventKind{
	journal.EvBranch, journal.EvCheckout, journal.EvSnapshot, journal.EvCreate, journal.EvMkdir,
	journal.EvSymlink, journal.EvLink, journal.EvUnlink, journal.EvRmdir, journal.EvRename,
	journal.EvSetattr, journal.EvWrite, journal.EvSetxattr, journal.EvRemovexattr, journal.EvBegin,
	journal.EvEnd, journal.EvExec, journal.EvSyscall, journal.EvWriteData, journal.EvNet, journal.EvMerge,
}

func TestEventRoundTrip(t *testing.T) {
	for i, k := range allKinds {
		if got, want := int(k), i+1; got != want {
			t.Fatalf("kind %s = %d, want %d (the numbers are part of the format)", k, got, want)
		}
		for _, ev := range []journal.Event{
			{Kind: k}, // every optional field empty
			{
				Kind: k, Branch: 3, Op: 77, Time: -5, PID: 4242,
				Path: []byte("a/b\xff/c"), Path2: []byte("d/e"),
				Root: cas.Sum([]byte("root")), FromBranch: 2, FromSeq: 1 << 40,
				Mask: journal.SetMode | journal.SetXattrs, Flags: journal.RenameExchange,
				Attr: journal.Attr{Kind: cas.EntryFile, Mode: 0o4755, UID: 1000, GID: 1 << 31, MTime: -1, Size: 1 << 50,
					Content: cas.Sum([]byte("content")), Link: []byte("../x"),
					Xattrs: []cas.Xattr{{Name: "user.a", Value: []byte{0, 1}}, {Name: "user.b", Value: []byte("v")}}},
				Ranges: []journal.Range{{Off: 0, Len: 10}, {Off: 1 << 33, Len: 1}},
				Name:   "user.name", Value: []byte("value\x00"), Text: "argv\x00one", Status: -9,
			},
		} {
			p := ev.Encode()
			got, err := journal.DecodeEvent(p)
			if err != nil {
				t.Fatalf("%s: decode: %v", k, err)
			}
			if !reflect.DeepEqual(*got, ev) {
				t.Fatalf("%s: round trip\n got  %+v\n want %+v", k, *got, ev)
			}
			if q := got.Encode(); !bytes.Equal(q, p) {
				t.Fatalf("%s: re-encoding differs", k)
			}
			// Every strict prefix is refused, and so is a trailing byte.
			for n := 0; n < len(p); n++ {
				if _, err := journal.DecodeEvent(p[:n]); !errors.Is(err, journal.ErrCorrupt) {
					t.Fatalf("%s: %d-byte prefix: %v, want ErrCorrupt", k, n, err)
				}
			}
			if _, err := journal.DecodeEvent(append(p, 0)); !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("%s: trailing byte: %v, want ErrCorrupt", k, err)
			}
		}
	}
	for _, k := range []journal.EventKind{0, journal.EvMerge + 1, 255} {
		p := (&journal.Event{Kind: k}).Encode()
		if _, err := journal.DecodeEvent(p); !errors.Is(err, journal.ErrCorrupt) {
			t.Errorf("kind %d: %v, want ErrCorrupt", k, err)
		}
	}
	p := (&journal.Event{Kind: journal.EvBegin}).Encode()
	p[0] = 2
	if _, err := journal.DecodeEvent(p); !errors.Is(err, journal.ErrCorrupt) {
		t.Errorf("version 2: %v, want ErrCorrupt", err)
	}
}

// realPayloads makes a small history and returns its event payloads.
func realPayloads(tb testing.TB, dir string) [][]byte {
	ctx := context.Background()
	path := filepath.Join(dir, "seed.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	mustDo(tb, db, "main", func(tx *journal.Tx) error {
		if err := mkdirAll(tx, "d/e"); err != nil {
			return err
		}
		if err := writeFile(tx, "d/e/f", "data", 5); err != nil {
			return err
		}
		if err := writeFile(tx, "d/e/f", "more data", 6); err != nil {
			return err
		}
		f, err := tx.Resolve([]byte("d/e/f"))
		if err != nil {
			return err
		}
		d, err := tx.Resolve([]byte("d"))
		if err != nil {
			return err
		}
		if _, err := tx.Link(f.Ino, d.Ino, []byte("g")); err != nil {
			return err
		}
		if err := tx.SetXattr(f.Ino, "user.x", []byte("1")); err != nil {
			return err
		}
		if err := tx.RemoveXattr(f.Ino, "user.x"); err != nil {
			return err
		}
		if _, err := tx.SetAttr(f.Ino, journal.SetMode|journal.SetMTime, journal.Attr{Mode: 0o600, MTime: 9}); err != nil {
			return err
		}
		if _, err := tx.Create(d.Ino, []byte("l"), journal.Attr{Kind: cas.EntrySymlink, Link: []byte("e/f")}); err != nil {
			return err
		}
		if err := tx.Rename(d.Ino, []byte("l"), journal.RootIno, []byte("l2"), journal.RenameNoReplace); err != nil {
			return err
		}
		for _, ev := range []journal.Event{
			{Kind: journal.EvBegin, Text: "run sh"},
			{Kind: journal.EvExec, PID: 7, Text: "sh\x00-c\x00true", Value: []byte("/home/agent")},
			{Kind: journal.EvSyscall, PID: 7, Text: "openat", Value: []byte{1, 2, 3}},
			{Kind: journal.EvWriteData, Path: []byte("f"), Ranges: []journal.Range{{Off: 4, Len: 3}}},
			{Kind: journal.EvNet, PID: 7, Name: "deny", Text: "example.com:443", Value: []byte(`{"allow":false}`)},
			{Kind: journal.EvEnd, Status: 1},
		} {
			if err := tx.Record(ev); err != nil {
				return err
			}
		}
		if err := tx.Record(journal.Event{Kind: journal.EvWrite}); err == nil {
			return errors.New("Record accepted a write event")
		}
		if _, err := tx.Snapshot("seed"); err != nil {
			return err
		}
		return tx.RemoveAll(journal.RootIno, []byte("d"))
	})
	if _, err := db.Checkout(ctx, "main", resolve(tb, db, "main~0")); err != nil {
		tb.Fatal(err)
	}
	from := resolve(tb, db, "main~0")
	if _, err := db.Do(ctx, "main", "merge", "merge", func(tx *journal.Tx) error { return tx.MarkMerge(from, "merge") }); err != nil {
		tb.Fatal(err)
	}
	raw := rawSQL(tb, path)
	rows, err := raw.Query(`SELECT payload FROM events ORDER BY seq`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			tb.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestDecodeRealEvents(t *testing.T) {
	payloads := realPayloads(t, t.TempDir())
	kinds := map[journal.EventKind]bool{}
	for _, p := range payloads {
		ev, err := journal.DecodeEvent(p)
		if err != nil {
			t.Fatalf("decode stored event: %v", err)
		}
		if !bytes.Equal(ev.Encode(), p) {
			t.Fatalf("stored %s event does not re-encode identically", ev.Kind)
		}
		kinds[ev.Kind] = true
	}
	if got, want := len(kinds), len(allKinds); got != want {
		t.Fatalf("seed history has %d event kinds, want %d: %v", got, want, kinds)
	}
}

// FuzzDecodeEvent: decoding never panics, and whatever decodes re-encodes to
// the same bytes.
func FuzzDecodeEvent(f *testing.F) {
	for _, p := range realPayloads(f, f.TempDir()) {
		f.Add(p)
	}
	for _, k := range allKinds {
		f.Add((&journal.Event{Kind: k, Path: []byte("p"), Ranges: []journal.Range{{Off: 1, Len: 2}}}).Encode())
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		ev, err := journal.DecodeEvent(p)
		if err != nil {
			if !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if q := ev.Encode(); !bytes.Equal(q, p) {
			t.Fatalf("accepted payload re-encodes differently:\n in  %x\n out %x", p, q)
		}
		if ev.Kind == 0 || ev.Kind > journal.EvMerge {
			t.Fatalf("accepted unknown kind %d", ev.Kind)
		}
	})
}
