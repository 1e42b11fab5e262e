package journal

import (
	"encoding/binary"
	"fmt"

	"github.com/artrt/art/cas"
	"github.com/zeebo/blake3"
)

// EventKind names what an event records. The numbers are part of the store
// format and never change meaning.
type EventKind uint8

const (
	EvBranch      EventKind = 1  // reset: a branch begins at Root (from FromBranch@FromSeq)
	EvCheckout    EventKind = 2  // reset: the branch moves to Root (checkout, undo)
	EvSnapshot    EventKind = 3  // marker: the state here is Root; Text is the message
	EvCreate      EventKind = 4  // Path created as Attr (file or fifo)
	EvMkdir       EventKind = 5  // Path created as a directory
	EvSymlink     EventKind = 6  // Path created as a symlink to Attr.Link
	EvLink        EventKind = 7  // Path2 becomes a hard link to Path
	EvUnlink      EventKind = 8  // Path (not a directory) removed
	EvRmdir       EventKind = 9  // empty directory Path removed
	EvRename      EventKind = 10 // Path moved to Path2 with Flags (RENAME_NOREPLACE/EXCHANGE)
	EvSetattr     EventKind = 11 // fields of Attr selected by Mask applied to Path
	EvWrite       EventKind = 12 // Path's content became Attr.Content (Attr.Size bytes); Ranges were touched
	EvSetxattr    EventKind = 13 // xattr Name of Path set to Value
	EvRemovexattr EventKind = 14 // xattr Name of Path removed
	EvBegin       EventKind = 15 // an operation starts; Text describes it
	EvEnd         EventKind = 16 // an operation ends with Status
	EvExec        EventKind = 17 // a process ran Text (argv, NUL-separated); PID, Value = cwd
	EvSyscall     EventKind = 18 // a traced system call; Text = name, Value = decoded record
	EvWriteData   EventKind = 19 // forensic: one write request to Path, Ranges[0], bytes in Attr.Content (a manifest); changes no state
	EvNet         EventKind = 20 // a network decision: Name = allow|deny, Text = host:port, PID, Value = JSON record (docs/network.md)
	// EvMerge begins a merge op: the state FromBranch@FromSeq (root Root)
	// is merged in; Text is the op's message. It changes no tree itself
	// (the op's events after it do) and its Root is the source's, not the
	// branch's: the events table's root column stays NULL (rootColumn).
	EvMerge   EventKind = 21
	evKindMax           = EvMerge
)

var eventKindNames = [...]string{
	EvBranch: "branch", EvCheckout: "checkout", EvSnapshot: "snapshot", EvCreate: "create",
	EvMkdir: "mkdir", EvSymlink: "symlink", EvLink: "link", EvUnlink: "unlink", EvRmdir: "rmdir",
	EvRename: "rename", EvSetattr: "setattr", EvWrite: "write", EvSetxattr: "setxattr",
	EvRemovexattr: "removexattr", EvBegin: "begin", EvEnd: "end", EvExec: "exec", EvSyscall: "syscall",
	EvWriteData: "writedata",
	EvNet:       "net",
	EvMerge:     "merge",
}

func (k EventKind) String() string {
	if k == 0 || k > evKindMax {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return eventKindNames[k]
}

// rootColumn is the events table's root column for ev: the branch's
// tree right after ev, for the events that record one (branch, checkout,
// snapshot); nil for the rest. An EvMerge's Root names the merged source,
// so it is no replay anchor for the branch and stays out of the column.
func rootColumn(ev *Event) []byte {
	if ev.Root.IsZero() || ev.Kind == EvMerge {
		return nil
	}
	return ev.Root[:]
}

// MarshalText makes kinds appear by name in JSON.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Setattr mask bits.
const (
	SetMode uint32 = 1 << iota
	SetUID
	SetGID
	SetMTime
	SetXattrs // replace the whole user.* xattr set
)

// Rename flags (the Linux renameat2 values).
const (
	RenameNoReplace uint32 = 1
	RenameExchange  uint32 = 2
)

// Attr is the metadata and content reference of one node.
type Attr struct {
	Kind    cas.EntryKind `json:"kind"`
	Mode    uint32        `json:"mode"` // permission bits only (mode & 07777)
	UID     uint32        `json:"uid"`
	GID     uint32        `json:"gid"`
	MTime   int64         `json:"mtime_ns"`
	Size    int64         `json:"size"`
	Content cas.ID        `json:"content"` // files: manifest id
	Link    []byte        `json:"link,omitempty"`
	Xattrs  []cas.Xattr   `json:"xattrs,omitempty"`
}

// Range is a byte range touched by a write.
type Range struct {
	Off int64 `json:"off"`
	Len int64 `json:"len"`
}

// Event is one journal record. Paths are relative to /home/agent, '/'
// separated, without a leading slash; "" is /home/agent itself.
type Event struct {
	Seq        int64     `json:"seq"`
	Branch     int64     `json:"branch"`
	Op         int64     `json:"op"`
	Time       int64     `json:"time_ns"`
	PID        int64     `json:"pid,omitempty"`
	Kind       EventKind `json:"kind"`
	Path       []byte    `json:"-"`
	Path2      []byte    `json:"-"`
	Root       cas.ID    `json:"root"`
	FromBranch int64     `json:"from_branch,omitempty"`
	FromSeq    int64     `json:"from_seq,omitempty"`
	Mask       uint32    `json:"mask,omitempty"`
	Flags      uint32    `json:"flags,omitempty"`
	Attr       Attr      `json:"attr"`
	Ranges     []Range   `json:"ranges,omitempty"`
	Name       string    `json:"name,omitempty"`
	Value      []byte    `json:"value,omitempty"`
	Text       string    `json:"text,omitempty"`
	Status     int64     `json:"status,omitempty"`
	Prev       cas.ID    `json:"prev"`
	Hash       cas.ID    `json:"hash"`
}

// encodingVersion prefixes every payload so the format can evolve.
const encodingVersion = 1

// limits for decoding untrusted payloads.
const (
	maxPayloadField = 1 << 24
	maxRanges       = 1 << 20
)

// Encode returns the canonical payload: every body field in a fixed order.
// Seq, Prev and Hash are not part of it (they are the chain).
func (e *Event) Encode() []byte {
	b := make([]byte, 0, 96+len(e.Path)+len(e.Path2)+len(e.Text)+len(e.Value))
	b = append(b, encodingVersion, byte(e.Kind))
	b = binary.AppendUvarint(b, uint64(e.Branch))
	b = binary.AppendUvarint(b, uint64(e.Op))
	b = binary.AppendVarint(b, e.Time)
	b = binary.AppendUvarint(b, uint64(e.PID))
	b = appendBytes(b, e.Path)
	b = appendBytes(b, e.Path2)
	b = appendID(b, e.Root)
	b = binary.AppendUvarint(b, uint64(e.FromBranch))
	b = binary.AppendUvarint(b, uint64(e.FromSeq))
	b = binary.AppendUvarint(b, uint64(e.Mask))
	b = binary.AppendUvarint(b, uint64(e.Flags))
	b = appendAttr(b, &e.Attr)
	b = binary.AppendUvarint(b, uint64(len(e.Ranges)))
	for _, r := range e.Ranges {
		b = binary.AppendVarint(b, r.Off)
		b = binary.AppendVarint(b, r.Len)
	}
	b = appendBytes(b, []byte(e.Name))
	b = appendBytes(b, e.Value)
	b = appendBytes(b, []byte(e.Text))
	b = binary.AppendVarint(b, e.Status)
	return b
}

func appendAttr(b []byte, a *Attr) []byte {
	b = append(b, byte(a.Kind))
	b = binary.AppendUvarint(b, uint64(a.Mode))
	b = binary.AppendUvarint(b, uint64(a.UID))
	b = binary.AppendUvarint(b, uint64(a.GID))
	b = binary.AppendVarint(b, a.MTime)
	b = binary.AppendVarint(b, a.Size)
	b = appendID(b, a.Content)
	b = appendBytes(b, a.Link)
	return appendXattrs(b, a.Xattrs)
}

func appendXattrs(b []byte, xs []cas.Xattr) []byte {
	b = binary.AppendUvarint(b, uint64(len(xs)))
	for _, x := range xs {
		b = appendBytes(b, []byte(x.Name))
		b = appendBytes(b, x.Value)
	}
	return b
}

// appendID writes a zero id as a single 0 byte and any other as 1 + 32 bytes.
func appendID(b []byte, id cas.ID) []byte {
	if id.IsZero() {
		return append(b, 0)
	}
	return append(append(b, 1), id[:]...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// DecodeEvent parses a payload produced by Encode. It is strict: trailing
// bytes, unknown kinds, over-long fields and non-canonical encodings are
// ErrCorrupt, so every accepted payload re-encodes to the same bytes.
func DecodeEvent(p []byte) (*Event, error) {
	d := decoder{b: p}
	e := &Event{}
	if v := d.byte(); v != encodingVersion && d.err == nil {
		return nil, fmt.Errorf("%w: event encoding version %d", ErrCorrupt, v)
	}
	e.Kind = EventKind(d.byte())
	e.Branch = int64(d.uvarint())
	e.Op = int64(d.uvarint())
	e.Time = d.varint()
	e.PID = int64(d.uvarint())
	e.Path = d.bytes()
	e.Path2 = d.bytes()
	e.Root = d.id()
	e.FromBranch = int64(d.uvarint())
	e.FromSeq = int64(d.uvarint())
	e.Mask = uint32(d.uvarint())
	e.Flags = uint32(d.uvarint())
	e.Attr.Kind = cas.EntryKind(d.byte())
	e.Attr.Mode = uint32(d.uvarint())
	e.Attr.UID = uint32(d.uvarint())
	e.Attr.GID = uint32(d.uvarint())
	e.Attr.MTime = d.varint()
	e.Attr.Size = d.varint()
	e.Attr.Content = d.id()
	e.Attr.Link = d.bytes()
	e.Attr.Xattrs = d.xattrs()
	if n := d.count(maxRanges, 2); n > 0 {
		e.Ranges = make([]Range, n)
		for i := range e.Ranges {
			e.Ranges[i] = Range{Off: d.varint(), Len: d.varint()}
		}
	}
	e.Name = string(d.bytes())
	e.Value = d.bytes()
	e.Text = string(d.bytes())
	e.Status = d.varint()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err == nil && (e.Kind == 0 || e.Kind > evKindMax) {
		d.err = fmt.Errorf("unknown event kind %d", e.Kind)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: event payload: %v", ErrCorrupt, d.err)
	}
	if string(e.Encode()) != string(p) {
		return nil, fmt.Errorf("%w: event payload is not canonical", ErrCorrupt)
	}
	return e, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or invalid %s", what)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length and checks it against the bytes left (each element
// takes at least minSize bytes), so a hostile count cannot force a large
// allocation.
func (d *decoder) count(max, minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(max) || n*uint64(minSize) > uint64(len(d.b)) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.count(maxPayloadField, 1)
	if d.err != nil || n == 0 {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

func (d *decoder) id() cas.ID {
	var id cas.ID
	switch d.byte() {
	case 0:
	case 1:
		if len(d.b) < len(id) {
			d.fail("id")
			return id
		}
		copy(id[:], d.b)
		d.b = d.b[len(id):]
		if id.IsZero() {
			d.fail("id (zero id written long)")
		}
	default:
		d.fail("id tag")
	}
	return id
}

func (d *decoder) xattrs() []cas.Xattr {
	n := d.count(1<<16, 2)
	if n == 0 {
		return nil
	}
	xs := make([]cas.Xattr, n)
	for i := range xs {
		xs[i] = cas.Xattr{Name: string(d.bytes()), Value: d.bytes()}
	}
	return xs
}

// chainHash is the hash chain step: BLAKE3(prev || uvarint(seq) || payload).
func chainHash(prev cas.ID, seq int64, payload []byte) cas.ID {
	h := blake3.New()
	h.Write(prev[:])
	var buf [binary.MaxVarintLen64]byte
	h.Write(buf[:binary.PutUvarint(buf[:], uint64(seq))])
	h.Write(payload)
	var id cas.ID
	h.Sum(id[:0])
	return id
}

// encodeXattrs is the projection's column encoding of an xattr set.
func encodeXattrs(xs []cas.Xattr) []byte {
	if len(xs) == 0 {
		return nil
	}
	return appendXattrs(nil, xs)
}

func decodeXattrs(b []byte) ([]cas.Xattr, error) {
	if len(b) == 0 {
		return nil, nil
	}
	d := decoder{b: b}
	xs := d.xattrs()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: xattr column: %v", ErrCorrupt, d.err)
	}
	return xs, nil
}
