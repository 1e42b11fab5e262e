// Package hostile builds stores and S3 packs that a careless reader would
// trust: names that escape, privilege bits, shared inodes, cycles, bombs,
// foreign schemas. It is test support: the corpus test (corpus_test.go)
// pulls every case into a directory three ways (a store, a store-file
// remote, an S3 remote) under memory and time limits and checks that
// nothing outside the destination changed.
//
// Stores are made with art's own packages where the content is valid
// (journal.Open for the schema, cas for files) and plain SQL where it is
// not: a Builder writes object rows and tree encodings without any
// validation, and points the main branch at any root.
package hostile

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	_ "github.com/mattn/go-sqlite3" // plain connections, for rows art would refuse to write
)

// Builder writes a hostile store file.
type Builder struct {
	Path string
	Raw  *sql.DB    // a plain connection: no checks
	Objs *cas.Store // valid objects, on Raw
	ctx  context.Context
}

// NewBuilder creates a store at path with art's schema and main branch.
func NewBuilder(ctx context.Context, path string) (*Builder, error) {
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		return nil, err
	}
	db.Close()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000")
	if err != nil {
		return nil, err
	}
	raw.SetMaxOpenConns(1)
	return &Builder{Path: path, Raw: raw, Objs: cas.NewStore(raw), ctx: ctx}, nil
}

// Close checkpoints the WAL into the file (a store handed over is one
// file) and closes the connection.
func (b *Builder) Close() error {
	_, err := b.Raw.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	if cerr := b.Raw.Close(); err == nil {
		err = cerr
	}
	return err
}

// Exec runs SQL on the store.
func (b *Builder) Exec(q string, args ...any) error {
	_, err := b.Raw.ExecContext(b.ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
	}
	return nil
}

// Row inserts an object row as given: any id, kind, codec, size, bytes.
func (b *Builder) Row(id cas.ID, kind cas.Kind, codec uint8, size int64, data []byte) error {
	return b.Exec(`INSERT OR REPLACE INTO objects (id, kind, codec, size, data) VALUES (?, ?, ?, ?, ?)`,
		id[:], int64(kind), int64(codec), size, data)
}

// Object stores data as a raw (uncompressed) object of kind k under its
// true id, without validating it.
func (b *Builder) Object(k cas.Kind, data []byte) (cas.ID, error) {
	id := cas.Sum(data)
	return id, b.Row(id, k, 0, int64(len(data)), data)
}

// File stores content as a valid file and returns its manifest id.
func (b *Builder) File(content []byte) (cas.ID, error) {
	id, _, err := b.Objs.PutFile(b.ctx, bytes.NewReader(content))
	return id, err
}

// Tree encodes entries and links exactly as given (no sorting, no
// validation: names with '/', modes with type bits, unknown kinds all
// encode) and stores the result under its true id.
func (b *Builder) Tree(entries []cas.Entry, links []cas.HardLink) (cas.ID, error) {
	return b.Object(cas.KindTree, EncodeTree(entries, links))
}

// EncodeTree is the tree encoding of docs/store-format.md without any of
// cas.Tree.Encode's checks.
func EncodeTree(entries []cas.Entry, links []cas.HardLink) []byte {
	b := []byte("artt\x01")
	b = binary.AppendUvarint(b, uint64(len(entries)))
	str := func(s []byte) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	for i := range entries {
		e := &entries[i]
		str(e.Name)
		b = append(b, byte(e.Kind))
		b = binary.AppendUvarint(b, uint64(e.Mode))
		b = binary.AppendUvarint(b, uint64(e.UID))
		b = binary.AppendUvarint(b, uint64(e.GID))
		b = binary.AppendUvarint(b, uint64(e.MTime<<1)^uint64(e.MTime>>63))
		switch e.Kind {
		case cas.EntryFile:
			b = binary.AppendUvarint(b, uint64(e.Size))
			b = append(b, e.Target[:]...)
			b = binary.AppendUvarint(b, e.LinkGroup)
		case cas.EntryDir:
			b = append(b, e.Target[:]...)
		case cas.EntrySymlink:
			str(e.Link)
		}
		b = binary.AppendUvarint(b, uint64(len(e.Xattrs)))
		for _, x := range e.Xattrs {
			str([]byte(x.Name))
			str(x.Value)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(links)))
	for _, l := range links {
		b = binary.AppendUvarint(b, l.Group)
		b = binary.AppendUvarint(b, uint64(len(l.Paths)))
		for _, p := range l.Paths {
			str(p)
		}
	}
	return b
}

// Workspace wraps entries as the directory ws at the root (art pull -m
// DIR writes /<basename of DIR>/ of the state) and returns the root.
func (b *Builder) Workspace(entries []cas.Entry, links []cas.HardLink) (cas.ID, error) {
	ws, err := b.Tree(entries, links)
	if err != nil {
		return cas.ID{}, err
	}
	return b.Tree([]cas.Entry{Dir("ws", ws)}, prefixLinks(links))
}

// prefixLinks moves hard-link paths under ws/: the root tree holds them.
func prefixLinks(links []cas.HardLink) []cas.HardLink {
	var out []cas.HardLink
	for _, l := range links {
		n := cas.HardLink{Group: l.Group}
		for _, p := range l.Paths {
			n.Paths = append(n.Paths, append([]byte("ws/"), p...))
		}
		out = append(out, n)
	}
	return out
}

// SetMain points branch main at root, as its live projection: the root
// node collapsed onto root, nothing else. art reads root lazily, so the
// store accepts a root no check would.
func (b *Builder) SetMain(root cas.ID) error {
	var branch int64
	if err := b.Raw.QueryRowContext(b.ctx, `SELECT id FROM branches WHERE name = 'main'`).Scan(&branch); err != nil {
		return err
	}
	for _, q := range []string{`DELETE FROM dentries WHERE branch = ?`, `DELETE FROM link_groups WHERE branch = ?`,
		`DELETE FROM nodes WHERE branch = ? AND ino <> 1`} {
		if err := b.Exec(q, branch); err != nil {
			return err
		}
	}
	return b.Exec(`UPDATE nodes SET kind = 2, target = ?, state = 0, nlink = 2 WHERE branch = ? AND ino = 1`, root[:], branch)
}

// MainRoot is the root main's projection points at.
func (b *Builder) MainRoot() (cas.ID, error) {
	var t []byte
	err := b.Raw.QueryRowContext(b.ctx, `SELECT n.target FROM nodes n JOIN branches b ON n.branch = b.id
		WHERE b.name = 'main' AND n.ino = 1`).Scan(&t)
	var id cas.ID
	copy(id[:], t)
	return id, err
}

// Entry constructors.

// File is a file entry.
func FileEntry(name string, manifest cas.ID, size int64, mode uint32) cas.Entry {
	return cas.Entry{Name: []byte(name), Kind: cas.EntryFile, Mode: mode, Size: size, Target: manifest}
}

// Dir is a directory entry.
func Dir(name string, tree cas.ID) cas.Entry {
	return cas.Entry{Name: []byte(name), Kind: cas.EntryDir, Mode: 0o755, Target: tree}
}

// Symlink is a symlink entry.
func Symlink(name, target string) cas.Entry {
	return cas.Entry{Name: []byte(name), Kind: cas.EntrySymlink, Mode: 0o777, Size: int64(len(target)), Link: []byte(target)}
}

// Objects lists every object row of the store at path, unchecked (for
// packing it onto S3 as it is).
func Objects(ctx context.Context, path string) ([]cas.Raw, error) {
	raw, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	rows, err := raw.QueryContext(ctx, `SELECT id, kind, codec, size, data FROM objects ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []cas.Raw
	for rows.Next() {
		var id, data []byte
		var kind, codec, size int64
		if err := rows.Scan(&id, &kind, &codec, &size, &data); err != nil {
			return nil, err
		}
		r := cas.Raw{Kind: cas.Kind(kind), Codec: uint8(codec), Size: size, Data: data}
		copy(r.ID[:], id)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Pack is one S3 pack under construction: objects in stored form, with a
// delta base for codec 2 (see remote/pack.go's index format).
type Pack struct {
	objs  []cas.Raw
	bases []cas.ID
}

// Add appends an object; base is for codec 2 (a tree delta) only.
func (p *Pack) Add(r cas.Raw, base cas.ID) {
	p.objs = append(p.objs, r)
	p.bases = append(p.bases, base)
}

// Bytes returns the pack and its index, and the pack's name (the BLAKE3
// of the index).
func (p *Pack) Bytes() (pack, index []byte, name string) {
	index = []byte("arti\x01")
	index = binary.AppendUvarint(index, uint64(len(p.objs)))
	for i, o := range p.objs {
		index = append(index, o.ID[:]...)
		index = append(index, byte(o.Kind), o.Codec)
		index = binary.AppendUvarint(index, uint64(o.Size))
		index = binary.AppendUvarint(index, uint64(len(pack)))
		index = binary.AppendUvarint(index, uint64(len(o.Data)))
		if o.Codec == 2 {
			index = append(index, p.bases[i][:]...)
		}
		pack = append(pack, o.Data...)
	}
	return pack, index, cas.Sum(index).String()
}

// RandomFile writes n pseudo-random bytes (from seed) to path.
func RandomFile(path string, n int, seed uint64) error {
	b := make([]byte, n)
	s := seed
	for i := range b {
		s = s*6364136223846793005 + 1442695040888963407
		b[i] = byte(s >> 56)
	}
	return os.WriteFile(path, b, 0o600)
}
