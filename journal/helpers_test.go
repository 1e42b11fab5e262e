package journal_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// openStore creates a fresh store under t.TempDir() and closes it at the end
// of the test.
func openStore(t testing.TB) *journal.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(context.Background(), path, journal.Options{Create: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawSQL opens a second, plain connection to the store file, for counting
// rows and for tampering with them behind the journal's back.
func rawSQL(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func count(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// putData stores data as file content inside tx and returns its manifest.
func putData(tx *journal.Tx, data string) (cas.ID, error) {
	id, _, err := tx.Objects().PutFile(context.Background(), strings.NewReader(data))
	return id, err
}

// mustDo runs fn as one operation on branch and fails the test on error.
func mustDo(t testing.TB, db *journal.DB, branch string, fn func(*journal.Tx) error) *journal.Op {
	t.Helper()
	op, err := db.Do(context.Background(), branch, "run", "test", fn)
	if err != nil {
		t.Fatalf("do on %s: %v", branch, err)
	}
	return op
}

// writeFile creates or overwrites the file at path (parents must exist).
func writeFile(tx *journal.Tx, path, data string, mtime int64) error {
	id, err := putData(tx, data)
	if err != nil {
		return err
	}
	if n, err := tx.Resolve([]byte(path)); err == nil {
		_, err = tx.Write(n.Ino, id, int64(len(data)), mtime, []journal.Range{{Off: 0, Len: int64(len(data))}})
		return err
	}
	dir, name := splitPath(path)
	parent, err := tx.Resolve([]byte(dir))
	if err != nil {
		return err
	}
	_, err = tx.Create(parent.Ino, []byte(name), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, MTime: mtime, Content: id, Size: int64(len(data))})
	return err
}

// mkdirAll creates the directories of path that do not exist.
func mkdirAll(tx *journal.Tx, path string) error {
	cur := ""
	for _, c := range strings.Split(path, "/") {
		next := c
		if cur != "" {
			next = cur + "/" + c
		}
		if _, err := tx.Resolve([]byte(next)); errors.Is(err, syscall.ENOENT) {
			parent, err := tx.Resolve([]byte(cur))
			if err != nil {
				return err
			}
			if _, err := tx.Create(parent.Ino, []byte(c), journal.Attr{Kind: cas.EntryDir, Mode: 0o755}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		cur = next
	}
	return nil
}

func splitPath(p string) (dir, name string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

// errnoIn returns the syscall.Errno err wraps, 0 for nil, or EIO-like
// sentinel -1 for an error that wraps no errno.
func errnoIn(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return ^syscall.Errno(0)
}

func errnoName(e syscall.Errno) string {
	switch e {
	case 0:
		return "ok"
	case ^syscall.Errno(0):
		return "non-errno error"
	}
	return fmt.Sprintf("%s(%d)", e.Error(), int(e))
}

// treeMap describes every path below root as "kind:mode:...": content for
// files, target for symlinks, xattrs. With full it also shows directory
// mtimes and the names of hard-linked files, which Diff does not compare.
func treeMap(t testing.TB, objs *cas.Store, root cas.ID, full bool) map[string]string {
	t.Helper()
	m, err := treeMapErr(objs, root, full)
	if err != nil {
		t.Fatalf("read tree %s: %v", root.Short(), err)
	}
	return m
}

func treeMapErr(objs *cas.Store, root cas.ID, full bool) (map[string]string, error) {
	ctx := context.Background()
	out := map[string]string{}
	rt, err := objs.GetTree(ctx, root)
	if err != nil {
		return nil, err
	}
	links := map[uint64][]string{}
	for _, hl := range rt.Links {
		for _, p := range hl.Paths {
			links[hl.Group] = append(links[hl.Group], string(p))
		}
	}
	var walk func(prefix string, tr *cas.Tree) error
	walk = func(prefix string, tr *cas.Tree) error {
		for _, e := range tr.Entries {
			p := prefix + string(e.Name)
			var b strings.Builder
			fmt.Fprintf(&b, "%s:%04o:u%d:g%d", e.Kind, e.Mode, e.UID, e.GID)
			switch e.Kind {
			case cas.EntryFile:
				var buf bytes.Buffer
				if _, err := objs.ReadFile(ctx, e.Target, &buf); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				fmt.Fprintf(&b, ":m%d:%s", e.MTime, contentDesc(buf.String()))
				if int64(buf.Len()) != e.Size {
					fmt.Fprintf(&b, ":SIZE=%d", e.Size)
				}
				if e.LinkGroup != 0 && full {
					ps := links[e.LinkGroup]
					sort.Strings(ps)
					fmt.Fprintf(&b, ":links=%v", ps)
				}
			case cas.EntrySymlink:
				fmt.Fprintf(&b, ":m%d:%q", e.MTime, e.Link)
			case cas.EntryFifo:
				fmt.Fprintf(&b, ":m%d", e.MTime)
			case cas.EntryDir:
				if full {
					fmt.Fprintf(&b, ":m%d", e.MTime)
				}
			}
			b.WriteString(xattrString(e.Xattrs))
			out[p] = b.String()
			if e.Kind == cas.EntryDir {
				sub, err := objs.GetTree(ctx, e.Target)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				if err := walk(p+"/", sub); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", rt); err != nil {
		return nil, err
	}
	return out, nil
}

// contentDesc shows short content as is and long content by length and hash.
func contentDesc(s string) string {
	if len(s) <= 48 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q...(%d bytes, %s)", s[:16], len(s), cas.Sum([]byte(s)).Short())
}

func xattrString(xs []cas.Xattr) string {
	if len(xs) == 0 {
		return ""
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%s=%q", x.Name, x.Value)
	}
	sort.Strings(parts)
	return ":x[" + strings.Join(parts, ",") + "]"
}

// mapDiff describes how two path maps differ ("" when equal).
func mapDiff(want, got map[string]string) string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var b strings.Builder
	n := 0
	for _, k := range sorted {
		w, okw := want[k]
		g, okg := got[k]
		switch {
		case okw && okg && w == g:
			continue
		case !okg:
			fmt.Fprintf(&b, "  missing %q (want %s)\n", k, w)
		case !okw:
			fmt.Fprintf(&b, "  extra   %q (%s)\n", k, g)
		default:
			fmt.Fprintf(&b, "  differs %q\n    want %s\n    got  %s\n", k, w, g)
		}
		if n++; n >= 20 {
			b.WriteString("  ...\n")
			break
		}
	}
	return b.String()
}

// diffPaths lists the paths Diff reports between a and b, sorted.
func diffPaths(t testing.TB, objs *cas.Store, a, b cas.ID) []string {
	t.Helper()
	var out []string
	err := journal.Diff(context.Background(), objs, a, b, func(c journal.Change) error {
		out = append(out, string(c.Path))
		return nil
	})
	if err != nil {
		t.Fatalf("diff %s %s: %v", a.Short(), b.Short(), err)
	}
	sort.Strings(out)
	return out
}

// changedKeys lists the keys whose values differ between two maps, sorted.
func changedKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func headRoot(t testing.TB, db *journal.DB, branch string) cas.ID {
	t.Helper()
	st, err := db.Head(context.Background(), branch)
	if err != nil {
		t.Fatalf("head of %s: %v", branch, err)
	}
	return st.Root
}

func resolve(t testing.TB, db *journal.DB, rev string) journal.State {
	t.Helper()
	st, err := db.Resolve(context.Background(), rev, journal.DefaultBranch)
	if err != nil {
		t.Fatalf("resolve %q: %v", rev, err)
	}
	return st
}
