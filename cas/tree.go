package cas

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// treeMagic and treeVersion start every encoded tree.
const (
	treeMagic   = "artt"
	treeVersion = 1
)

// Limits on tree contents, those of Linux.
const (
	MaxNameLen       = 255   // bytes in one entry name (NAME_MAX)
	MaxLinkLen       = 4095  // bytes in a symlink target (PATH_MAX less the NUL)
	MaxXattrNameLen  = 255   // XATTR_NAME_MAX
	MaxXattrValueLen = 65536 // XATTR_SIZE_MAX
)

// XattrPrefix starts every stored extended attribute name: art keeps only
// the user namespace.
const XattrPrefix = "user."

// EntryKind is the type of a directory entry. The numbers are part of the
// tree encoding and never change meaning.
type EntryKind uint8

const (
	EntryFile    EntryKind = 1
	EntryDir     EntryKind = 2
	EntrySymlink EntryKind = 3
	EntryFifo    EntryKind = 4
	// EntrySocket is a UNIX socket bound in a live tree (the overlay's).
	// A socket is live state, not content: trees never hold one (encoding
	// and decoding refuse it), so snapshots, diffs, pushes and pulls never
	// see sockets. journal's projection keeps them while the mount lives.
	EntrySocket EntryKind = 5
)

func (k EntryKind) String() string {
	switch k {
	case EntryFile:
		return "file"
	case EntryDir:
		return "dir"
	case EntrySymlink:
		return "symlink"
	case EntryFifo:
		return "fifo"
	case EntrySocket:
		return "socket"
	}
	return fmt.Sprintf("entrykind(%d)", uint8(k))
}

// Xattr is one extended attribute. Name starts with "user." and has at
// least one more byte, at most MaxXattrNameLen in all and no NUL; Value is
// at most MaxXattrValueLen bytes.
type Xattr struct {
	Name  string
	Value []byte
}

// Entry is one name in a directory. Which fields are meaningful depends on
// Kind; the others must be zero (Validate says exactly what is allowed).
type Entry struct {
	Name      []byte    // 1..255 bytes, no '/' or NUL, not "." or ".."; otherwise arbitrary
	Kind      EntryKind // file, dir, symlink or fifo
	Mode      uint32    // permission bits incl. setuid/setgid/sticky (mode & 07777), never type bits
	UID, GID  uint32
	MTime     int64  // ns since the epoch
	Size      int64  // file: content size (0..MaxFileSize); symlink: len(Link); dir, fifo: 0
	Target    ID     // file: manifest id; dir: tree id (both non-zero); otherwise zero
	Link      []byte // symlink: target, 1..4095 bytes, no NUL; otherwise empty
	LinkGroup uint64 // files only: non-zero when the file has several names, see Tree.Links
	Xattrs    []Xattr
}

// HardLink says where the names of one hard-linked file live: paths
// relative to the root tree, '/'-separated, sorted, unique.
type HardLink struct {
	Group uint64
	Paths [][]byte
}

// Tree is one directory: its entries strictly sorted by bytes.Compare on
// Name. Links is meaningful on a root tree only; it is sorted by Group with
// unique non-zero groups.
type Tree struct {
	Entries []Entry
	Links   []HardLink
}

// ValidName reports whether name can be an entry name: 1..MaxNameLen bytes,
// no '/' or NUL, not "." or "..". Invalid UTF-8, newlines and other control
// bytes are allowed. The error wraps ErrMalformed.
func ValidName(name []byte) error {
	switch {
	case len(name) == 0:
		return malformed("empty name")
	case len(name) > MaxNameLen:
		return malformed("name of %d bytes exceeds %d", len(name), MaxNameLen)
	case bytes.IndexByte(name, '/') >= 0:
		return malformed("name %q contains '/'", name)
	case bytes.IndexByte(name, 0) >= 0:
		return malformed("name %q contains NUL", name)
	case string(name) == "." || string(name) == "..":
		return malformed("name %q", name)
	}
	return nil
}

// validPath checks a hard-link path: ValidName components joined by '/'.
func validPath(p []byte) error {
	if len(p) == 0 {
		return malformed("empty path")
	}
	for rest := p; ; {
		name, after, found := bytes.Cut(rest, []byte{'/'})
		if err := ValidName(name); err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
		if !found {
			return nil
		}
		rest = after
	}
}

// Validate checks e on its own (see Entry). The error wraps ErrMalformed.
func (e *Entry) Validate() error {
	if err := ValidName(e.Name); err != nil {
		return err
	}
	if err := e.validate(); err != nil {
		return fmt.Errorf("entry %q: %w", e.Name, err)
	}
	return nil
}

func (e *Entry) validate() error {
	if e.Mode&^0o7777 != 0 {
		return malformed("mode %#o has bits outside 07777", e.Mode)
	}
	if e.Kind != EntryFile && e.LinkGroup != 0 {
		return malformed("%s with link group", e.Kind)
	}
	if e.Kind != EntrySymlink && len(e.Link) != 0 {
		return malformed("%s with link target", e.Kind)
	}
	switch e.Kind {
	case EntryFile:
		if e.Size < 0 || e.Size > MaxFileSize {
			return malformed("file size %d", e.Size)
		}
		if e.Target.IsZero() {
			return malformed("file without manifest")
		}
	case EntryDir:
		if e.Size != 0 {
			return malformed("dir with size %d", e.Size)
		}
		if e.Target.IsZero() {
			return malformed("dir without tree")
		}
	case EntrySymlink:
		if err := validLink(e.Link); err != nil {
			return err
		}
		if e.Size != int64(len(e.Link)) {
			return malformed("symlink size %d, target has %d bytes", e.Size, len(e.Link))
		}
		if !e.Target.IsZero() {
			return malformed("symlink with target id")
		}
	case EntryFifo:
		if e.Size != 0 {
			return malformed("fifo with size %d", e.Size)
		}
		if !e.Target.IsZero() {
			return malformed("fifo with target id")
		}
	default:
		return malformed("unknown entry kind %d", e.Kind)
	}
	for i := range e.Xattrs {
		x := &e.Xattrs[i]
		if err := validXattrName(x.Name); err != nil {
			return err
		}
		if len(x.Value) > MaxXattrValueLen {
			return malformed("xattr %q value of %d bytes exceeds %d", x.Name, len(x.Value), MaxXattrValueLen)
		}
		if i > 0 && e.Xattrs[i-1].Name >= x.Name {
			return malformed("xattrs not sorted and unique at %q", x.Name)
		}
	}
	return nil
}

func validLink(l []byte) error {
	if len(l) == 0 || len(l) > MaxLinkLen {
		return malformed("symlink target of %d bytes outside 1..%d", len(l), MaxLinkLen)
	}
	if bytes.IndexByte(l, 0) >= 0 {
		return malformed("symlink target contains NUL")
	}
	return nil
}

func validXattrName(n string) error {
	switch {
	case !strings.HasPrefix(n, XattrPrefix) || len(n) == len(XattrPrefix):
		return malformed("xattr name %q is not user.*", n)
	case len(n) > MaxXattrNameLen:
		return malformed("xattr name of %d bytes exceeds %d", len(n), MaxXattrNameLen)
	case strings.IndexByte(n, 0) >= 0:
		return malformed("xattr name %q contains NUL", n)
	}
	return nil
}

// Validate checks every entry, the order of names and the link index. The
// error wraps ErrMalformed.
func (t *Tree) Validate() error {
	for i := range t.Entries {
		e := &t.Entries[i]
		if err := e.Validate(); err != nil {
			return err
		}
		if i > 0 && bytes.Compare(t.Entries[i-1].Name, e.Name) >= 0 {
			return malformed("entries not sorted and unique at %q", e.Name)
		}
	}
	return t.validateLinks()
}

func (t *Tree) validateLinks() error {
	for i := range t.Links {
		l := &t.Links[i]
		if l.Group == 0 {
			return malformed("link group 0")
		}
		if i > 0 && t.Links[i-1].Group >= l.Group {
			return malformed("link groups not sorted and unique at %d", l.Group)
		}
		if len(l.Paths) == 0 {
			return malformed("link group %d has no paths", l.Group)
		}
		for j, p := range l.Paths {
			if err := validPath(p); err != nil {
				return fmt.Errorf("link group %d: %w", l.Group, err)
			}
			if j > 0 && bytes.Compare(l.Paths[j-1], p) >= 0 {
				return malformed("link group %d: paths not sorted and unique at %q", l.Group, p)
			}
		}
	}
	return nil
}

// Encode validates t and returns its canonical bytes. An invalid tree is an
// error wrapping ErrMalformed. The format is in docs/store-format.md.
func (t *Tree) Encode() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("encode tree: %w", err)
	}
	n := len(treeMagic) + 1 + 2*binaryMaxVarint
	for i := range t.Entries {
		e := &t.Entries[i]
		n += 8*binaryMaxVarint + len(e.Name) + len(ID{}) + len(e.Link)
		for _, x := range e.Xattrs {
			n += 2*binaryMaxVarint + len(x.Name) + len(x.Value)
		}
	}
	for _, l := range t.Links {
		n += 2 * binaryMaxVarint
		for _, p := range l.Paths {
			n += binaryMaxVarint + len(p)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, treeMagic...)
	b = append(b, treeVersion)
	b = appendUvarint(b, uint64(len(t.Entries)))
	for i := range t.Entries {
		e := &t.Entries[i]
		b = appendBytes(b, e.Name)
		b = append(b, byte(e.Kind))
		b = appendUvarint(b, uint64(e.Mode))
		b = appendUvarint(b, uint64(e.UID))
		b = appendUvarint(b, uint64(e.GID))
		b = appendVarint(b, e.MTime)
		switch e.Kind {
		case EntryFile:
			b = appendUvarint(b, uint64(e.Size))
			b = append(b, e.Target[:]...)
			b = appendUvarint(b, e.LinkGroup)
		case EntryDir:
			b = append(b, e.Target[:]...)
		case EntrySymlink:
			b = appendBytes(b, e.Link)
		}
		b = appendUvarint(b, uint64(len(e.Xattrs)))
		for _, x := range e.Xattrs {
			b = appendBytes(b, []byte(x.Name))
			b = appendBytes(b, x.Value)
		}
	}
	b = appendUvarint(b, uint64(len(t.Links)))
	for _, l := range t.Links {
		b = appendUvarint(b, l.Group)
		b = appendUvarint(b, uint64(len(l.Paths)))
		for _, p := range l.Paths {
			b = appendBytes(b, p)
		}
	}
	return b, nil
}

// Smallest encodings, used to refuse counts the input cannot hold.
const (
	minEntrySize = 8 // 1-byte name of a fifo: len, name, kind, mode, uid, gid, mtime, xattr count
	minXattrSize = 8 // len, "user.x", len
	minLinkSize  = 4 // group, path count, one 1-byte path
	minPathSize  = 2 // len, one byte
)

// DecodeTree decodes b, accepting only what Encode produces for a valid
// tree; anything else is an error wrapping ErrMalformed. The tree's byte
// slices share one copy of b (b itself is not retained). Allocation is
// bounded by a small multiple of len(b) whatever the counts in b claim.
func DecodeTree(b []byte) (*Tree, error) {
	t, err := decodeTree(bytes.Clone(b))
	if err != nil {
		return nil, fmt.Errorf("decode tree: %w", err)
	}
	return t, nil
}

func decodeTree(b []byte) (*Tree, error) {
	d := decoder{b: b}
	d.header(treeMagic, treeVersion)
	n := d.count("entries", minEntrySize)
	if d.err != nil {
		return nil, d.err
	}
	t := &Tree{}
	if n > 0 {
		// An Entry is far larger than its smallest encoding: grow with
		// what is actually decoded rather than trust n.
		t.Entries = make([]Entry, 0, min(n, 4096))
	}
	for i := 0; i < n; i++ {
		var e Entry
		if err := decodeEntry(&d, &e); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if i > 0 && bytes.Compare(t.Entries[i-1].Name, e.Name) >= 0 {
			return nil, malformed("entries not sorted and unique at %q", e.Name)
		}
		t.Entries = append(t.Entries, e)
	}
	nl := d.count("link groups", minLinkSize)
	if d.err != nil {
		return nil, d.err
	}
	if nl > 0 {
		t.Links = make([]HardLink, nl)
	}
	for i := range t.Links {
		l := &t.Links[i]
		l.Group = d.uvarint()
		np := d.count("paths", minPathSize)
		if d.err != nil {
			return nil, d.err
		}
		l.Paths = make([][]byte, np)
		for j := range l.Paths {
			l.Paths[j] = d.bytes("path", len(d.b))
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	// Entries were checked as they were read.
	if err := t.validateLinks(); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeEntry(d *decoder, e *Entry) error {
	e.Name = d.bytes("name", MaxNameLen)
	if d.err != nil {
		return d.err
	}
	if err := ValidName(e.Name); err != nil {
		return err
	}
	e.Kind = EntryKind(d.byte())
	mode, uid, gid := d.uvarint(), d.uvarint(), d.uvarint()
	if mode > 0o7777 || uid > 1<<32-1 || gid > 1<<32-1 {
		d.fail("mode %#o, uid %d or gid %d out of range", mode, uid, gid)
	}
	e.Mode, e.UID, e.GID = uint32(mode), uint32(uid), uint32(gid)
	e.MTime = d.varint()
	switch e.Kind {
	case EntryFile:
		size := d.uvarint()
		if size > MaxFileSize {
			d.fail("file size %d exceeds MaxFileSize", size)
		}
		e.Size = int64(size)
		e.Target = d.id()
		e.LinkGroup = d.uvarint()
	case EntryDir:
		e.Target = d.id()
	case EntrySymlink:
		e.Link = d.bytes("symlink target", MaxLinkLen)
		e.Size = int64(len(e.Link))
	case EntryFifo:
	default:
		d.fail("unknown entry kind %d", e.Kind)
	}
	nx := d.count("xattrs", minXattrSize)
	if d.err != nil {
		return d.err
	}
	if nx > 0 {
		e.Xattrs = make([]Xattr, nx)
	}
	for i := range e.Xattrs {
		x := &e.Xattrs[i]
		x.Name = string(d.bytes("xattr name", MaxXattrNameLen))
		x.Value = d.bytes("xattr value", MaxXattrValueLen)
	}
	if d.err != nil {
		return d.err
	}
	return e.validate()
}

// Lookup returns the entry called name, by binary search. The pointer is
// into t.Entries.
func (t *Tree) Lookup(name []byte) (*Entry, bool) {
	i, ok := slices.BinarySearchFunc(t.Entries, name, func(e Entry, name []byte) int {
		return bytes.Compare(e.Name, name)
	})
	if !ok {
		return nil, false
	}
	return &t.Entries[i], true
}
