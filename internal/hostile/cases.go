package hostile

import (
	"bytes"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/klauspost/compress/zstd"
)

// Way is how a case reaches art.
type Way int

const (
	// WayStore: art pull -m DEST -d STORE.
	WayStore Way = 1 << iota
	// WayFile: art pull -d LOCAL STORE, then art pull -m DEST -d LOCAL.
	WayFile
	// WayS3: the store's objects as one pack and main's root as the ref
	// on S3; art pull -d LOCAL s3://..., then art pull -m DEST -d LOCAL.
	WayS3
	// AllWays is every way.
	AllWays = WayStore | WayFile | WayS3
	// SQLWays are the ways that carry SQL (schema, projection rows):
	// S3 moves objects and refs only.
	SQLWays = WayStore | WayFile
)

func (w Way) String() string {
	switch w {
	case WayStore:
		return "store"
	case WayFile:
		return "file"
	case WayS3:
		return "s3"
	}
	return fmt.Sprintf("way(%d)", int(w))
}

// Outcome is what a case must end in.
type Outcome int

const (
	// Refused: exit 4 (a corrupt or hostile store) with one line.
	Refused Outcome = iota
	// Limited: refused by a bound the user can raise (exit 1, one line):
	// a state too large, a schema too new.
	Limited
	// Sanitized: may succeed (exit 0) or be refused (exit 1 or 4); either
	// way every invariant holds (nothing outside the destination changed,
	// no privilege bits, .art intact).
	Sanitized
)

// Case is one hostile input.
type Case struct {
	Name  string
	Class string // the class: "names", "1 privilege bits", ...
	Ways  Way
	Want  Outcome
	// Build writes the store (the main branch's state and whatever else).
	Build func(b *Builder) error
	// After, if set, runs on the closed store file (truncate it, replace
	// it with noise).
	After func(path string) error
	// Prepare, if set, shapes the destination before the pull (dest is
	// the workspace directory, outside a sibling directory).
	Prepare func(dest, outside string) error
	// Pack, if set, replaces the S3 delivery: the packs to upload and the
	// root the ref names (S3-only cases).
	Pack func(b *Builder) ([]*Pack, cas.ID, error)
	// Slow cases run only without -short.
	Slow bool
}

// SharedContent is what the fixture's hard-linked file holds: a case
// storing a file with these bytes makes pull see "metadata only".
const SharedContent = "shared between the workspace and outside\n"

// state builds a workspace of entries and sets main to it.
func state(b *Builder, entries []cas.Entry, links []cas.HardLink) error {
	root, err := b.Workspace(entries, links)
	if err != nil {
		return err
	}
	return b.SetMain(root)
}

// withFile builds a state of one file entry made by fn from a valid
// manifest of content.
func withFile(content string, fn func(m cas.ID) []cas.Entry) func(b *Builder) error {
	return func(b *Builder) error {
		m, err := b.File([]byte(content))
		if err != nil {
			return err
		}
		return state(b, fn(m), nil)
	}
}

func named(name string) func(m cas.ID) []cas.Entry {
	return func(m cas.ID) []cas.Entry { return []cas.Entry{FileEntry(name, m, 1, 0o644)} }
}

// zstdFrame compresses n zero bytes.
func zstdFrame(n int, dict []byte) []byte {
	opts := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(zstd.MaxWindowSize)}
	if dict != nil {
		opts = append(opts, zstd.WithEncoderDictRaw(0, dict))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		panic(err)
	}
	defer enc.Close()
	return enc.EncodeAll(make([]byte, n), nil)
}

// Cases returns the corpus.
func Cases() []Case {
	var cs []Case
	add := func(c Case) { cs = append(cs, c) }

	// Names the tree encoding refuses.
	for _, n := range []struct{ name, entry string }{
		{"name-dotdot", ".."}, {"name-dot", "."}, {"name-slash", "../sibling/pwned"}, {"name-nul", "a\x00b"},
		{"name-empty", ""}, {"name-overlong", strings.Repeat("n", 256)},
	} {
		add(Case{Name: n.name, Class: "names", Ways: AllWays, Want: Refused, Build: withFile("x", named(n.entry))})
	}
	add(Case{Name: "name-duplicate", Class: "names", Ways: AllWays, Want: Refused, Build: withFile("x", func(m cas.ID) []cas.Entry {
		return []cas.Entry{FileEntry("a", m, 1, 0o644), FileEntry("a", m, 1, 0o600)}
	})})
	add(Case{Name: "name-unsorted", Class: "names", Ways: AllWays, Want: Refused, Build: withFile("x", func(m cas.ID) []cas.Entry {
		return []cas.Entry{FileEntry("b", m, 1, 0o644), FileEntry("a", m, 1, 0o644)}
	})})
	// A hard-link path that walks through a stored symlink to outside: a
	// state whose link index names no file of its own is corrupt.
	add(Case{Name: "link-through-stored-symlink", Class: "names", Ways: AllWays, Want: Sanitized, Build: func(b *Builder) error {
		m, err := b.File([]byte("x"))
		if err != nil {
			return err
		}
		g := FileEntry("g", m, 1, 0o644)
		g.LinkGroup = 1
		return state(b, []cas.Entry{g, Symlink("l", "../../sibling")},
			[]cas.HardLink{{Group: 1, Paths: [][]byte{[]byte("g"), []byte("l/pwned")}}})
	}})
	// A symlink the state stores, then a directory of the same path in a
	// later pull: the first pull makes the link, the state must not be
	// written through it. Here both at once: the link and a file under a
	// directory named like the link's target.
	add(Case{Name: "stored-symlink-escape", Class: "names", Ways: AllWays, Want: Sanitized,
		Build: withFile("pwned\n", func(m cas.ID) []cas.Entry {
			return []cas.Entry{Symlink("abs", "/etc/passwd"), Symlink("esc", "../sibling")}
		})})
	// The user's own symlink in the destination, where the state has a
	// directory: pull must not write through it.
	add(Case{Name: "user-symlink-in-dest", Class: "names", Ways: AllWays, Want: Sanitized,
		Prepare: func(dest, outside string) error { return os.Symlink("../sibling", dest+"/sub") },
		Build: func(b *Builder) error {
			m, err := b.File([]byte("pwned\n"))
			if err != nil {
				return err
			}
			sub, err := b.Tree([]cas.Entry{FileEntry("file.txt", m, 6, 0o644), FileEntry("pwned", m, 6, 0o644)}, nil)
			if err != nil {
				return err
			}
			return state(b, []cas.Entry{Dir("sub", sub)}, nil)
		}})

	// Modes and kinds.
	add(Case{Name: "mode-type-bits", Class: "modes", Ways: AllWays, Want: Refused, Build: withFile("x", func(m cas.ID) []cas.Entry {
		return []cas.Entry{FileEntry("f", m, 1, 0o100644)}
	})})
	for _, k := range []struct {
		name string
		kind cas.EntryKind
	}{{"kind-device", 5}, {"kind-socket", 6}, {"kind-zero", 0}} {
		add(Case{Name: k.name, Class: "devices/sockets", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
			return state(b, []cas.Entry{{Name: []byte("dev"), Kind: k.kind, Mode: 0o666}}, nil)
		}})
	}

	// 1. Privilege bits and owners.
	add(Case{Name: "setuid-root", Class: "1 privilege bits", Ways: AllWays, Want: Sanitized, Build: withFile("#!/bin/sh\n", func(m cas.ID) []cas.Entry {
		return []cas.Entry{FileEntry("su", m, 10, 0o4755)}
	})})
	add(Case{Name: "setgid-foreign-owner", Class: "1 privilege bits", Ways: AllWays, Want: Sanitized, Build: withFile("#!/bin/sh\n", func(m cas.ID) []cas.Entry {
		e := FileEntry("sg", m, 10, 0o6777)
		e.UID, e.GID = 1000, 1000
		return []cas.Entry{e}
	})})
	add(Case{Name: "setgid-dir", Class: "1 privilege bits", Ways: AllWays, Want: Sanitized, Build: func(b *Builder) error {
		empty, err := b.Tree(nil, nil)
		if err != nil {
			return err
		}
		d := Dir("d", empty)
		d.Mode, d.UID, d.GID = 0o2755, 4242, 4242
		return state(b, []cas.Entry{d}, nil)
	}})

	// The workspace directory itself: its entry is the destination's.
	add(Case{Name: "setgid-workspace-root", Class: "1 privilege bits", Ways: AllWays, Want: Sanitized, Build: func(b *Builder) error {
		empty, err := b.Tree(nil, nil)
		if err != nil {
			return err
		}
		ws := Dir("ws", empty)
		ws.Mode, ws.UID, ws.GID = 0o6777, 4242, 4242
		root, err := b.Tree([]cas.Entry{ws}, nil)
		if err != nil {
			return err
		}
		return b.SetMain(root)
	}})

	// 2. A hard link the user made from the workspace to outside: same
	// content, hostile metadata.
	add(Case{Name: "shared-inode-metadata", Class: "2 shared inode", Ways: AllWays, Want: Sanitized, Build: withFile(SharedContent, func(m cas.ID) []cas.Entry {
		e := FileEntry("shared", m, int64(len(SharedContent)), 0o6777)
		e.MTime = 42
		e.Xattrs = []cas.Xattr{{Name: "user.evil", Value: []byte("1")}}
		return []cas.Entry{e}
	})})

	// A fifo and a symlink can be hard links too: the user's link from
	// the workspace to a fifo or symlink outside, with hostile metadata
	// in the state (mode, mtime), must not change the outside inode.
	add(Case{Name: "shared-inode-fifo-symlink", Class: "2 shared inode", Ways: AllWays, Want: Sanitized,
		Prepare: func(dest, outside string) error {
			if err := unix.Mkfifo(outside+"/fifo", 0o640); err != nil {
				return err
			}
			if err := os.Symlink("file.txt", outside+"/link"); err != nil {
				return err
			}
			if err := os.Link(outside+"/fifo", dest+"/fifo"); err != nil {
				return err
			}
			return unix.Linkat(unix.AT_FDCWD, outside+"/link", unix.AT_FDCWD, dest+"/link", 0)
		},
		Build: func(b *Builder) error {
			l := Symlink("link", "file.txt")
			l.MTime = 42
			return state(b, []cas.Entry{{Name: []byte("fifo"), Kind: cas.EntryFifo, Mode: 0o666, MTime: 42}, l}, nil)
		}})

	// 3. Policy through .art.
	add(Case{Name: "art-missing", Class: "3 .art", Ways: AllWays, Want: Sanitized, Build: withFile("x", named("other"))})
	add(Case{Name: "art-symlink", Class: "3 .art", Ways: AllWays, Want: Sanitized, Build: func(b *Builder) error {
		binds, err := b.File([]byte(`[{"src":"/","dst":"/host","rw":true}]`))
		if err != nil {
			return err
		}
		config, err := b.Tree([]cas.Entry{FileEntry("binds.json", binds, 37, 0o644)}, nil)
		if err != nil {
			return err
		}
		evil, err := b.Tree([]cas.Entry{Dir("config", config)}, nil)
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{Symlink(".art", "evil"), Dir("evil", evil)}, nil)
	}})
	add(Case{Name: "art-file", Class: "3 .art", Ways: AllWays, Want: Sanitized, Build: withFile("x", named(".art"))})
	add(Case{Name: "art-config-replaced", Class: "3 .art", Ways: AllWays, Want: Sanitized, Build: func(b *Builder) error {
		binds, err := b.File([]byte(`[{"src":"/","dst":"/host","rw":true}]`))
		if err != nil {
			return err
		}
		config, err := b.Tree([]cas.Entry{FileEntry("binds.json", binds, 37, 0o644)}, nil)
		if err != nil {
			return err
		}
		art, err := b.Tree([]cas.Entry{Dir("config", config)}, nil)
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir(".art", art)}, nil)
	}})

	// 4. Shapes that cost more than their size.
	add(Case{Name: "dag-bomb", Class: "4 shapes", Ways: AllWays, Want: Limited, Build: func(b *Builder) error {
		m, err := b.File([]byte("x"))
		if err != nil {
			return err
		}
		t, err := b.Tree([]cas.Entry{FileEntry("f", m, 1, 0o644)}, nil)
		if err != nil {
			return err
		}
		for level := 0; level < 8; level++ {
			var es []cas.Entry
			for i := 0; i < 32; i++ {
				es = append(es, Dir(fmt.Sprintf("d%02d", i), t))
			}
			if t, err = b.Tree(es, nil); err != nil {
				return err
			}
		}
		return state(b, []cas.Entry{Dir("bomb", t)}, nil)
	}})
	add(Case{Name: "deep-nesting", Class: "4 shapes", Ways: AllWays, Want: Sanitized, Build: func(b *Builder) error {
		t, err := b.Tree(nil, nil)
		if err != nil {
			return err
		}
		for i := 0; i < 10000; i++ {
			if t, err = b.Tree([]cas.Entry{Dir("d", t)}, nil); err != nil {
				return err
			}
		}
		return state(b, []cas.Entry{Dir("deep", t)}, nil)
	}})
	add(Case{Name: "wide-dir", Class: "4 shapes", Ways: AllWays, Want: Sanitized, Slow: true, Build: func(b *Builder) error {
		m, err := b.File(nil)
		if err != nil {
			return err
		}
		es := make([]cas.Entry, 0, 50000)
		for i := 0; i < cap(es); i++ {
			es = append(es, FileEntry(fmt.Sprintf("f%07d", i), m, 0, 0o644))
		}
		wide, err := b.Tree(es, nil)
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir("wide", wide)}, nil)
	}})
	add(Case{Name: "projection-cycle", Class: "4 shapes", Ways: SQLWays, Want: Refused, Build: func(b *Builder) error {
		// main's live tree as dirty rows: / -> ws -> a -> (loop) ws.
		var branch int64
		if err := b.Raw.QueryRow(`SELECT id FROM branches WHERE name = 'main'`).Scan(&branch); err != nil {
			return err
		}
		if err := b.SetMain(cas.ID{}); err != nil {
			return err
		}
		for _, q := range []struct {
			q    string
			args []any
		}{
			{`UPDATE nodes SET state = 2, target = NULL WHERE branch = ? AND ino = 1`, []any{branch}},
			{`INSERT INTO nodes (branch, ino, kind, mode, uid, gid, mtime_ns, ctime_ns, size, nlink, parent, state) VALUES (?, 2, 2, 493, 0, 0, 0, 0, 0, 2, 1, 2), (?, 3, 2, 493, 0, 0, 0, 0, 0, 2, 2, 2)`, []any{branch, branch}},
			{`INSERT INTO dentries (branch, parent, name, ino) VALUES (?, 1, CAST('ws' AS BLOB), 2), (?, 2, CAST('a' AS BLOB), 3), (?, 3, CAST('loop' AS BLOB), 2)`, []any{branch, branch, branch}},
		} {
			if err := b.Exec(q.q, q.args...); err != nil {
				return err
			}
		}
		return nil
	}})
	for _, v := range []struct{ name, sql string }{
		{"view-objects", `DROP TABLE objects; CREATE VIEW objects AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r)
			SELECT randomblob(32) AS id, 3 AS kind, 0 AS codec, 900000000 AS size, zeroblob(900000000) AS data FROM r`},
		{"view-branches", `DROP TABLE branches; CREATE VIEW branches AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r)
			SELECT n AS id, 'main' AS name, 0 AS head_seq, zeroblob(900000000) AS head_hash, 0 AS event_count, 2 AS next_ino, 0 AS created_ns, NULL AS deleted_ns FROM r`},
		{"trigger", `CREATE TRIGGER t BEFORE INSERT ON ops BEGIN SELECT count(*) FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT n FROM r); END`},
		{"extra-index", `CREATE INDEX evil ON objects(size)`},
	} {
		add(Case{Name: v.name, Class: "4 views/schema", Ways: SQLWays, Want: Refused, Build: func(b *Builder) error {
			if err := withFile("x", named("f"))(b); err != nil {
				return err
			}
			return b.Exec(v.sql)
		}})
	}
	add(Case{Name: "huge-value", Class: "4 views/schema", Ways: SQLWays, Want: Refused, Build: func(b *Builder) error {
		if err := withFile("x", named("f"))(b); err != nil {
			return err
		}
		return b.Exec(`UPDATE branches SET head_hash = zeroblob(80000000)`)
	}})

	// zstd bombs: a small frame that inflates far past the declared size.
	add(Case{Name: "zstd-bomb-chunk", Class: "zstd bombs", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		frame := zstdFrame(256<<20, nil)
		id := cas.Sum([]byte("bomb"))
		if err := b.Row(id, cas.KindChunk, 1, cas.MaxChunk, frame); err != nil {
			return err
		}
		m, err := b.Object(cas.KindManifest, (&cas.Manifest{Size: cas.MaxChunk, Extents: []cas.Extent{{ID: id, Len: cas.MaxChunk}}}).Encode())
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", m, cas.MaxChunk, 0o644)}, nil)
	}})
	add(Case{Name: "zstd-bomb-tree", Class: "zstd bombs", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		frame := zstdFrame(cas.MaxObjectSize, nil)
		id := cas.Sum([]byte("tree bomb"))
		if err := b.Row(id, cas.KindTree, 1, cas.MaxObjectSize, frame); err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir("d", id)}, nil)
	}})
	add(Case{Name: "zstd-no-size", Class: "zstd bombs", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		// A frame that does not declare its size and inflates past the
		// row's.
		var buf bytes.Buffer
		w, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		w.Write(make([]byte, 8<<20))
		w.Close()
		id := cas.Sum([]byte("nosize"))
		if err := b.Row(id, cas.KindChunk, 1, 100, buf.Bytes()); err != nil {
			return err
		}
		m, err := b.Object(cas.KindManifest, (&cas.Manifest{Size: 100, Extents: []cas.Extent{{ID: id, Len: 100}}}).Encode())
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", m, 100, 0o644)}, nil)
	}})

	// Bad hashes, missing objects, wrong sizes, wrong kinds.
	add(Case{Name: "bad-hash-chunk", Class: "bad hashes", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		id := cas.Sum([]byte("the real bytes"))
		if err := b.Row(id, cas.KindChunk, 0, 14, []byte("other bytes!!!")); err != nil {
			return err
		}
		m, err := b.Object(cas.KindManifest, (&cas.Manifest{Size: 14, Extents: []cas.Extent{{ID: id, Len: 14}}}).Encode())
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", m, 14, 0o644)}, nil)
	}})
	add(Case{Name: "bad-hash-tree", Class: "bad hashes", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		m, err := b.File([]byte("x"))
		if err != nil {
			return err
		}
		enc := EncodeTree([]cas.Entry{FileEntry("f", m, 1, 0o644)}, nil)
		id := cas.Sum([]byte("not the tree"))
		if err := b.Row(id, cas.KindTree, 0, int64(len(enc)), enc); err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir("d", id)}, nil)
	}})
	add(Case{Name: "missing-manifest", Class: "missing objects", Ways: AllWays, Want: Refused,
		Build: func(b *Builder) error {
			return state(b, []cas.Entry{FileEntry("f", cas.Sum([]byte("nowhere")), 1, 0o644)}, nil)
		}})
	add(Case{Name: "missing-chunk", Class: "missing objects", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		m, err := b.Object(cas.KindManifest, (&cas.Manifest{Size: 5, Extents: []cas.Extent{{ID: cas.Sum([]byte("hello")), Len: 5}}}).Encode())
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", m, 5, 0o644)}, nil)
	}})
	add(Case{Name: "missing-subtree", Class: "missing objects", Ways: AllWays, Want: Refused,
		Build: func(b *Builder) error { return state(b, []cas.Entry{Dir("d", cas.Sum([]byte("nowhere")))}, nil) }})
	add(Case{Name: "size-entry-vs-manifest", Class: "wrong sizes", Ways: AllWays, Want: Refused, Build: withFile("five!", func(m cas.ID) []cas.Entry {
		return []cas.Entry{FileEntry("f", m, 1<<30, 0o644)}
	})})
	add(Case{Name: "size-row-vs-data", Class: "wrong sizes", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		data := []byte("hello")
		id := cas.Sum(data)
		if err := b.Row(id, cas.KindChunk, 0, 50000, data); err != nil {
			return err
		}
		m, err := b.Object(cas.KindManifest, (&cas.Manifest{Size: 5, Extents: []cas.Extent{{ID: id, Len: 5}}}).Encode())
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", m, 5, 0o644)}, nil)
	}})
	add(Case{Name: "size-extent-vs-chunk", Class: "wrong sizes", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		data := []byte("hello")
		id, err := b.Object(cas.KindChunk, data)
		if err != nil {
			return err
		}
		m, err := b.Object(cas.KindManifest, (&cas.Manifest{Size: 50000, Extents: []cas.Extent{{ID: id, Len: 50000}}}).Encode())
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", m, 50000, 0o644)}, nil)
	}})
	add(Case{Name: "kind-dir-is-manifest", Class: "wrong kinds", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		m, err := b.File([]byte("x"))
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir("d", m)}, nil)
	}})
	add(Case{Name: "kind-file-is-tree", Class: "wrong kinds", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		t, err := b.Tree(nil, nil)
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{FileEntry("f", t, 0, 0o644)}, nil)
	}})
	add(Case{Name: "kind-row-unknown", Class: "wrong kinds", Ways: AllWays, Want: Refused, Build: func(b *Builder) error {
		data := EncodeTree([]cas.Entry{Symlink("kind", "9")}, nil) // not the empty tree every store has
		id := cas.Sum(data)
		if err := b.Row(id, 9, 0, int64(len(data)), data); err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir("d", id)}, nil)
	}})

	// Whole files.
	add(Case{Name: "schema-too-new", Class: "schema too new", Ways: SQLWays, Want: Limited, Build: func(b *Builder) error {
		if err := withFile("x", named("f"))(b); err != nil {
			return err
		}
		return b.Exec(`CREATE TABLE future (x); INSERT INTO schema_migrations VALUES (9999, 'future', 0)`)
	}})
	add(Case{Name: "random-file", Class: "random/truncated files", Ways: SQLWays, Want: Refused,
		Build: withFile("x", named("f")),
		After: func(path string) error { return RandomFile(path, 256<<10, 1) }})
	add(Case{Name: "random-after-header", Class: "random/truncated files", Ways: SQLWays, Want: Refused,
		Build: withFile("x", named("f")),
		After: func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			s := uint64(7)
			for i := 100; i < len(b); i++ {
				s = s*6364136223846793005 + 1442695040888963407
				b[i] = byte(s >> 56)
			}
			return os.WriteFile(path, b, 0o600)
		}})
	add(Case{Name: "truncated", Class: "random/truncated files", Ways: SQLWays, Want: Refused,
		Build: func(b *Builder) error {
			m, err := b.File(bytes.Repeat([]byte("0123456789abcdef"), 1<<16)) // 1 MiB: the file has many pages
			if err != nil {
				return err
			}
			return state(b, []cas.Entry{FileEntry("f", m, 1<<20, 0o644)}, nil)
		},
		After: func(path string) error {
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()/2)
		}})

	// 5. Limits met half-way: more names of one file than a filesystem
	// allows links (ext4: 65,000).
	add(Case{Name: "too-many-links", Class: "5 partial apply", Ways: AllWays, Want: Sanitized, Slow: true, Build: func(b *Builder) error {
		m, err := b.File([]byte("x"))
		if err != nil {
			return err
		}
		const n = 70000
		es := make([]cas.Entry, 0, n)
		paths := make([][]byte, 0, n)
		for i := 0; i < n; i++ {
			e := FileEntry(fmt.Sprintf("l%06d", i), m, 1, 0o644)
			e.LinkGroup = 1
			es = append(es, e)
			paths = append(paths, []byte("many/"+string(e.Name)))
		}
		many, err := b.Tree(es, nil)
		if err != nil {
			return err
		}
		return state(b, []cas.Entry{Dir("many", many)}, []cas.HardLink{{Group: 1, Paths: paths}})
	}})

	// S3 packs.
	add(Case{Name: "s3-delta-bomb", Class: "4 shapes (S3)", Ways: WayS3, Want: Refused, Pack: func(b *Builder) ([]*Pack, cas.ID, error) {
		// 48 tree deltas sharing one small frame of 64 MiB of zeros.
		baseData := EncodeTree(nil, nil)
		base := cas.Sum(baseData)
		frame := zstdFrame(cas.MaxObjectSize, baseData)
		p := &Pack{}
		p.Add(cas.Raw{ID: base, Kind: cas.KindTree, Size: int64(len(baseData)), Data: baseData}, cas.ID{})
		var es []cas.Entry
		for i := 0; i < 48; i++ {
			id := cas.Sum([]byte(fmt.Sprintf("delta %d", i)))
			p.Add(cas.Raw{ID: id, Kind: cas.KindTree, Codec: 2, Size: cas.MaxObjectSize, Data: frame}, base)
			es = append(es, Dir(fmt.Sprintf("d%02d", i), id))
		}
		ws := EncodeTree(es, nil)
		root := EncodeTree([]cas.Entry{Dir("ws", cas.Sum(ws))}, nil)
		p.Add(cas.Raw{ID: cas.Sum(ws), Kind: cas.KindTree, Size: int64(len(ws)), Data: ws}, cas.ID{})
		p.Add(cas.Raw{ID: cas.Sum(root), Kind: cas.KindTree, Size: int64(len(root)), Data: root}, cas.ID{})
		return []*Pack{p}, cas.Sum(root), nil
	}})
	add(Case{Name: "s3-delta-cycle", Class: "4 shapes (S3)", Ways: WayS3, Want: Refused, Pack: func(b *Builder) ([]*Pack, cas.ID, error) {
		p := &Pack{}
		a, c := cas.Sum([]byte("a")), cas.Sum([]byte("c"))
		p.Add(cas.Raw{ID: a, Kind: cas.KindTree, Codec: 2, Size: 10, Data: []byte("x")}, c)
		p.Add(cas.Raw{ID: c, Kind: cas.KindTree, Codec: 2, Size: 10, Data: []byte("x")}, a)
		ws := EncodeTree([]cas.Entry{Dir("d", a)}, nil)
		root := EncodeTree([]cas.Entry{Dir("ws", cas.Sum(ws))}, nil)
		p.Add(cas.Raw{ID: cas.Sum(ws), Kind: cas.KindTree, Size: int64(len(ws)), Data: ws}, cas.ID{})
		p.Add(cas.Raw{ID: cas.Sum(root), Kind: cas.KindTree, Size: int64(len(root)), Data: root}, cas.ID{})
		return []*Pack{p}, cas.Sum(root), nil
	}})
	return cs
}
