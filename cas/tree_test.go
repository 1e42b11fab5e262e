package cas

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sampleTree has every entry kind and the awkward names the format allows.
func sampleTree() *Tree {
	m, d := Sum([]byte("manifest")), Sum([]byte("tree"))
	return &Tree{
		Entries: []Entry{
			{Name: []byte("a\nb"), Kind: EntryFile, Mode: 0o644, UID: 1000, GID: 1000, MTime: 1_700_000_000_123_456_789, Size: 12, Target: m},
			{Name: []byte("bin"), Kind: EntryDir, Mode: 0o755, Target: d, MTime: -5},
			{Name: []byte("fifo"), Kind: EntryFifo, Mode: 0o600, UID: 1<<32 - 1, GID: 7},
			{Name: []byte("link"), Kind: EntrySymlink, Mode: 0o777, Size: 9, Link: []byte("../target")},
			{Name: []byte("linked"), Kind: EntryFile, Mode: 0o4755, Size: 0, Target: m, LinkGroup: 3,
				Xattrs: []Xattr{{Name: "user.a", Value: []byte{}}, {Name: "user.mime", Value: []byte("text/plain\x00")}}},
			{Name: bytes.Repeat([]byte("n"), 255), Kind: EntryFile, Mode: 0o7777, Size: MaxFileSize, Target: m},
			{Name: []byte{0xff, 0xfe, '\r'}, Kind: EntryFile, Target: m, MTime: -1 << 63},
		},
		Links: []HardLink{
			{Group: 3, Paths: [][]byte{[]byte("bin/other"), []byte("linked")}},
			{Group: 1 << 40, Paths: [][]byte{[]byte("x/y/\xff")}},
		},
	}
}

func TestTreeRoundTrip(t *testing.T) {
	for _, tr := range []*Tree{{}, sampleTree()} {
		enc, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTree(enc)
		if err != nil {
			t.Fatalf("DecodeTree(Encode()) = %v", err)
		}
		if !treesEqual(got, tr) {
			t.Fatalf("round trip = %+v, want %+v", got, tr)
		}
		again, err := got.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, enc) {
			t.Fatal("re-encoding differs")
		}
	}
}

// treesEqual compares trees treating nil and empty slices alike.
func treesEqual(a, b *Tree) bool {
	if len(a.Entries) != len(b.Entries) || len(a.Links) != len(b.Links) {
		return false
	}
	for i := range a.Entries {
		x, y := a.Entries[i], b.Entries[i]
		if !bytes.Equal(x.Name, y.Name) || !bytes.Equal(x.Link, y.Link) || len(x.Xattrs) != len(y.Xattrs) {
			return false
		}
		for j := range x.Xattrs {
			if x.Xattrs[j].Name != y.Xattrs[j].Name || !bytes.Equal(x.Xattrs[j].Value, y.Xattrs[j].Value) {
				return false
			}
		}
		x.Name, y.Name, x.Link, y.Link, x.Xattrs, y.Xattrs = nil, nil, nil, nil, nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	for i := range a.Links {
		if a.Links[i].Group != b.Links[i].Group || len(a.Links[i].Paths) != len(b.Links[i].Paths) {
			return false
		}
		for j := range a.Links[i].Paths {
			if !bytes.Equal(a.Links[i].Paths[j], b.Links[i].Paths[j]) {
				return false
			}
		}
	}
	return true
}

func TestTreeStore(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tr := sampleTree()
	id, n, err := s.PutTree(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("PutTree reported no new bytes")
	}
	got, err := s.GetTree(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !treesEqual(got, tr) {
		t.Fatal("GetTree differs from PutTree")
	}
	if _, _, err := s.PutTree(ctx, &Tree{Entries: []Entry{{Name: []byte(".."), Kind: EntryFifo}}}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("PutTree(invalid) = %v, want ErrMalformed", err)
	}
}

func TestTreeLookup(t *testing.T) {
	tr := sampleTree()
	for _, e := range tr.Entries {
		got, ok := tr.Lookup(e.Name)
		if !ok || !bytes.Equal(got.Name, e.Name) {
			t.Fatalf("Lookup(%q) = %v, %v", e.Name, got, ok)
		}
	}
	if got, ok := tr.Lookup([]byte("bim")); ok {
		t.Fatalf("Lookup(absent) = %v", got)
	}
	got, _ := tr.Lookup([]byte("fifo"))
	if got != &tr.Entries[2] {
		t.Fatal("Lookup does not point into Entries")
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range [][]byte{[]byte("a"), []byte("..."), []byte(".a"), []byte("a\nb"), {0xff}, bytes.Repeat([]byte("x"), 255)} {
		if err := ValidName(ok); err != nil {
			t.Fatalf("ValidName(%q) = %v", ok, err)
		}
	}
	for _, bad := range [][]byte{nil, {}, []byte("."), []byte(".."), []byte("a/b"), []byte("/"), []byte("a\x00"), bytes.Repeat([]byte("x"), 256)} {
		if err := ValidName(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ValidName(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestTreeEncodeRejects(t *testing.T) {
	m := Sum([]byte("m"))
	file := func(name string) Entry { return Entry{Name: []byte(name), Kind: EntryFile, Target: m} }
	for _, tc := range []struct {
		name   string
		mutate func(tr *Tree)
	}{
		{"dot", func(tr *Tree) { tr.Entries[0].Name = []byte(".") }},
		{"dotdot", func(tr *Tree) { tr.Entries[0].Name = []byte("..") }},
		{"slash", func(tr *Tree) { tr.Entries[0].Name = []byte("a/b") }},
		{"nul", func(tr *Tree) { tr.Entries[0].Name = []byte("a\x00") }},
		{"empty name", func(tr *Tree) { tr.Entries[0].Name = nil }},
		{"long name", func(tr *Tree) { tr.Entries[0].Name = bytes.Repeat([]byte("a"), 256) }},
		{"unsorted", func(tr *Tree) { tr.Entries[0], tr.Entries[1] = tr.Entries[1], tr.Entries[0] }},
		{"duplicate", func(tr *Tree) { tr.Entries[1].Name = tr.Entries[0].Name }},
		{"kind 0", func(tr *Tree) { tr.Entries[0].Kind = 0 }},
		{"kind 5", func(tr *Tree) { tr.Entries[0].Kind = 5 }},
		{"type bits in mode", func(tr *Tree) { tr.Entries[0].Mode = 0o100644 }},
		{"negative size", func(tr *Tree) { tr.Entries[0].Size = -1 }},
		{"huge size", func(tr *Tree) { tr.Entries[0].Size = MaxFileSize + 1 }},
		{"file without manifest", func(tr *Tree) { tr.Entries[0].Target = ID{} }},
		{"dir without tree", func(tr *Tree) { tr.Entries[0].Kind, tr.Entries[0].Target = EntryDir, ID{} }},
		{"dir with size", func(tr *Tree) { tr.Entries[0].Kind, tr.Entries[0].Size = EntryDir, 1 }},
		{"fifo with target", func(tr *Tree) { tr.Entries[0].Kind = EntryFifo }},
		{"symlink without link", func(tr *Tree) { tr.Entries[0].Kind, tr.Entries[0].Target = EntrySymlink, ID{} }},
		{"symlink size", func(tr *Tree) {
			tr.Entries[0] = Entry{Name: []byte("a"), Kind: EntrySymlink, Link: []byte("x"), Size: 2}
		}},
		{"symlink nul", func(tr *Tree) {
			tr.Entries[0] = Entry{Name: []byte("a"), Kind: EntrySymlink, Link: []byte("x\x00"), Size: 2}
		}},
		{"symlink too long", func(tr *Tree) {
			tr.Entries[0] = Entry{Name: []byte("a"), Kind: EntrySymlink, Link: bytes.Repeat([]byte("x"), 4096), Size: 4096}
		}},
		{"link on file", func(tr *Tree) { tr.Entries[0].Link = []byte("x") }},
		{"link group on fifo", func(tr *Tree) {
			tr.Entries[0] = Entry{Name: []byte("a"), Kind: EntryFifo, LinkGroup: 1}
		}},
		{"system xattr", func(tr *Tree) { tr.Entries[0].Xattrs = []Xattr{{Name: "security.selinux"}} }},
		{"bare user xattr", func(tr *Tree) { tr.Entries[0].Xattrs = []Xattr{{Name: "user."}} }},
		{"unsorted xattrs", func(tr *Tree) { tr.Entries[0].Xattrs = []Xattr{{Name: "user.b"}, {Name: "user.a"}} }},
		{"duplicate xattrs", func(tr *Tree) { tr.Entries[0].Xattrs = []Xattr{{Name: "user.a"}, {Name: "user.a"}} }},
		{"big xattr", func(tr *Tree) { tr.Entries[0].Xattrs = []Xattr{{Name: "user.a", Value: make([]byte, 65537)}} }},
		{"long xattr name", func(tr *Tree) { tr.Entries[0].Xattrs = []Xattr{{Name: "user." + strings.Repeat("a", 251)}} }},
		{"link group 0", func(tr *Tree) { tr.Links = []HardLink{{Group: 0, Paths: [][]byte{[]byte("a")}}} }},
		{"link groups unsorted", func(tr *Tree) {
			tr.Links = []HardLink{{Group: 2, Paths: [][]byte{[]byte("a")}}, {Group: 1, Paths: [][]byte{[]byte("b")}}}
		}},
		{"link group no paths", func(tr *Tree) { tr.Links = []HardLink{{Group: 1}} }},
		{"link paths unsorted", func(tr *Tree) { tr.Links = []HardLink{{Group: 1, Paths: [][]byte{[]byte("b"), []byte("a")}}} }},
		{"link path dotdot", func(tr *Tree) { tr.Links = []HardLink{{Group: 1, Paths: [][]byte{[]byte("a/../b")}}} }},
		{"link path absolute", func(tr *Tree) { tr.Links = []HardLink{{Group: 1, Paths: [][]byte{[]byte("/a")}}} }},
		{"link path trailing slash", func(tr *Tree) { tr.Links = []HardLink{{Group: 1, Paths: [][]byte{[]byte("a/")}}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tree{Entries: []Entry{file("a"), file("b")}}
			if _, err := tr.Encode(); err != nil {
				t.Fatalf("base tree: %v", err)
			}
			tc.mutate(tr)
			if _, err := tr.Encode(); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Encode = %v, want ErrMalformed", err)
			}
		})
	}
}

// rawEntry hand-encodes one entry so the decoder sees values Encode refuses.
func rawEntry(name string, kind byte, body ...[]byte) []byte {
	b := appendBytes(nil, []byte(name))
	b = append(b, kind)
	b = append(b, 0, 0, 0, 0) // mode, uid, gid, mtime
	for _, p := range body {
		b = append(b, p...)
	}
	return b
}

func rawTree(entries ...[]byte) []byte {
	b := append([]byte("artt\x01"), appendUvarint(nil, uint64(len(entries)))...)
	for _, e := range entries {
		b = append(b, e...)
	}
	return append(b, 0) // no link groups
}

func TestDecodeTreeRejects(t *testing.T) {
	id := Sum([]byte("x"))
	fifo := func(name string) []byte { return rawEntry(name, byte(EntryFifo), []byte{0}) }
	good := rawTree(fifo("a"), fifo("b"))
	if _, err := DecodeTree(good); err != nil {
		t.Fatalf("hand-encoded tree: %v", err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", []byte("artm\x01\x00\x00")},
		{"bad version", []byte("artt\x00\x00\x00")},
		{"trailing", append(bytes.Clone(good), 0)},
		{"truncated", good[:len(good)-1]},
		{"dotdot", rawTree(fifo(".."))},
		{"dot", rawTree(fifo("."))},
		{"slash", rawTree(fifo("a/b"))},
		{"nul", rawTree(fifo("a\x00b"))},
		{"empty name", rawTree(fifo(""))},
		{"long name", rawTree(fifo(strings.Repeat("a", 256)))},
		{"unsorted", rawTree(fifo("b"), fifo("a"))},
		{"duplicate", rawTree(fifo("a"), fifo("a"))},
		{"kind 0", rawTree(rawEntry("a", 0, []byte{0}))},
		{"kind 9", rawTree(rawEntry("a", 9, []byte{0}))},
		{"negative size", rawTree(rawEntry("a", byte(EntryFile), appendUvarint(nil, 1<<63), id[:], []byte{0, 0}))},
		{"zero manifest", rawTree(rawEntry("a", byte(EntryFile), []byte{0}, make([]byte, 32), []byte{0, 0}))},
		{"empty symlink", rawTree(rawEntry("a", byte(EntrySymlink), []byte{0, 0}))},
		{"non-user xattr", rawTree(rawEntry("a", byte(EntryFifo), []byte{1}, appendBytes(nil, []byte("trusted.x")), []byte{0}))},
		{"unsorted xattrs", rawTree(rawEntry("a", byte(EntryFifo), []byte{2},
			appendBytes(nil, []byte("user.b")), []byte{0}, appendBytes(nil, []byte("user.a")), []byte{0}))},
		{"mode type bits", append(append([]byte("artt\x01\x01"), appendBytes(nil, []byte("a"))...), 4, 0x80, 0x80, 0x02, 0, 0, 0, 0, 0)},
		{"non-minimal mode", append(append([]byte("artt\x01\x01"), appendBytes(nil, []byte("a"))...), 4, 0x80, 0x00, 0, 0, 0, 0, 0)},
		{"billion entries", append([]byte("artt\x01"), appendUvarint(appendUvarint(nil, 1_000_000_000), 0)...)},
		{"huge xattr count", rawTree(rawEntry("a", byte(EntryFifo), appendUvarint(nil, 1<<62)))},
		{"huge link count", append(rawTree()[:6], appendUvarint(nil, 1<<62)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tr, err := DecodeTree(tc.b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeTree = %+v, %v; want ErrMalformed", tr, err)
			}
		})
	}
}

func TestDecodeTreeDoesNotAlias(t *testing.T) {
	b, err := sampleTree().Encode()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := DecodeTree(b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if got, want := string(tr.Entries[1].Name), "bin"; got != want {
		t.Fatalf("name after clearing the input = %q, want %q", got, want)
	}
}
