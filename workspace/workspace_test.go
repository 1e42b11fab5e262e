package workspace_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	mrand "math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

func openDB(t testing.TB) (*journal.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ws.db")
	db, err := journal.Open(context.Background(), path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func write(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// richTree builds a workspace with every supported kind and awkward names.
func richTree(t *testing.T, ws string) {
	t.Helper()
	write(t, filepath.Join(ws, "main.py"), []byte("print('hello')\n"), 0o644)
	write(t, filepath.Join(ws, "empty"), nil, 0o600)
	write(t, filepath.Join(ws, "bin", "tool"), random(100_000), 0o755)
	write(t, filepath.Join(ws, "big.bin"), random(3<<20), 0o644)
	write(t, filepath.Join(ws, "setuid"), []byte("x"), 0o4755)
	write(t, filepath.Join(ws, "line\nbreak"), []byte("newline in name"), 0o644)
	write(t, filepath.Join(ws, "bad\xff\xfeutf8"), []byte("invalid utf-8 name"), 0o644)
	write(t, filepath.Join(ws, "deep", strings.Repeat("n", 255)), []byte("255-byte name"), 0o644)
	write(t, filepath.Join(ws, "sp ace", "ünïcode ✓"), []byte("unicode"), 0o640)
	if err := os.MkdirAll(filepath.Join(ws, "emptydir", "nested-empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"main.py", "rel-link"}, {"/etc/hostname", "abs-link"}, {"missing/target", "dangling"}, {"bin", "dir-link"}} {
		if err := os.Symlink(l[0], filepath.Join(ws, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(ws, "main.py"), filepath.Join(ws, "bin", "hard-main")); err != nil {
		t.Fatal(err)
	}
	// A sparse file: 1 MiB hole, 4 KiB data, 1 MiB hole, 4 KiB data.
	f, err := os.Create(filepath.Join(ws, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{1 << 20, 2<<20 + 4096} {
		if _, err := f.WriteAt(random(4096), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if testutil.XattrsSupported(ws) {
		for _, p := range []string{"main.py", "bin"} {
			if err := unix.Setxattr(filepath.Join(ws, p), "user.note", []byte("v-"+p), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(ws, "empty"), 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	// ns mtimes, set last (children change directory mtimes).
	ts := time.Unix(1_700_000_000, 123456789)
	filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error {
		unix.UtimesNano(p, []unix.Timespec{unix.NsecToTimespec(ts.UnixNano()), unix.NsecToTimespec(ts.UnixNano())})
		return nil
	})
	// Special files: captured never, opened never.
	if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func describe(t *testing.T, dir string) map[string]string {
	d := testutil.DescribeTree(t, dir, testutil.TreeOptions{DirMTimes: true, Owners: os.Geteuid() == 0})
	delete(d, "fifo")
	return d
}

func TestRoundTripEveryKind(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	richTree(t, src)
	var warn bytes.Buffer
	st, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "fifo") || st.Skipped != 1 {
		t.Fatalf("want a warning for the fifo and 1 skipped, got %d: %q", st.Skipped, warn.String())
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	// SameOwner: an exact restore, owners and setuid bits included.
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head, SameOwner: true}); err != nil {
		t.Fatal(err)
	}
	if d := testutil.DiffTrees(describe(t, src), describe(t, dst)); d != "" {
		t.Fatalf("pull does not reproduce the pushed tree:\n%s", d)
	}
	if got, max := testutil.Blocks(t, filepath.Join(dst, "sparse")), int64(64); got > max {
		t.Fatalf("sparse file has %d blocks after pull, want <= %d (holes lost)", got, max)
	}
	// A second export into the same directory changes nothing.
	st2, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head, SameOwner: true})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Written != 0 || st2.Deleted != 0 || st2.Updated != 0 {
		t.Fatalf("second pull wrote %+v, want nothing", st2)
	}
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

func TestIncrementalPush(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	for i := 0; i < 50; i++ {
		write(t, filepath.Join(ws, "d", string(rune('a'+i%5)), "f"+string(rune('A'+i))), random(2000), 0o644)
	}
	old := time.Now().Add(-time.Hour) // outside the racy-clean window
	filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, old, old) })
	first, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := first.New, 50; got != want {
		t.Fatalf("first push: new = %d, want %d", got, want)
	}
	// Nothing changed: nothing is read.
	second, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	if second.BytesRead != 0 || second.Unchanged != 50 || second.BytesStored != 0 {
		t.Fatalf("no-op push: %+v, want 0 bytes read, 50 unchanged", second)
	}
	if first.Snapshot.Root != second.Snapshot.Root {
		t.Fatal("no-op push changed the root")
	}
	// Edit one, delete one, add one, chmod one.
	write(t, filepath.Join(ws, "d", "a", "fA"), []byte("edited"), 0o644)
	os.Remove(filepath.Join(ws, "d", "b", "fB"))
	write(t, filepath.Join(ws, "new"), []byte("new"), 0o644)
	os.Chmod(filepath.Join(ws, "d", "c", "fC"), 0o600)
	third, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	if third.New != 1 || third.Changed != 1 || third.Deleted != 1 || third.Unchanged != 48 {
		t.Fatalf("third push: %+v", third)
	}
	// chmod changes ctime, so fC is re-read (and found unchanged in content).
	if got, want := third.BytesRead, int64(len("edited")+len("new")+2000); got != want {
		t.Fatalf("third push read %d bytes, want %d: only the files whose stat changed", got, want)
	}
	var names []string
	err = journal.Diff(ctx, db.Objects(), second.Snapshot.Root, third.Snapshot.Root, func(c journal.Change) error {
		if c.New == nil || c.New.Kind != cas.EntryDir {
			names = append(names, string(c.Kind)+" "+string(c.Path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names, ","), "M ws/d/a/fA,D ws/d/b/fB,M ws/d/c/fC,A ws/new"; got != want {
		t.Fatalf("diff = %s, want %s", got, want)
	}
	// The previous state is one snapshot back.
	prev, err := db.Resolve(ctx, "main~1", "main")
	if err != nil {
		t.Fatal(err)
	}
	if prev.Root != second.Snapshot.Root {
		t.Fatalf("main~1 = %s, want the second push's snapshot", prev.Root.Short())
	}
}

func countChunks(t *testing.T, dbPath string) int {
	t.Helper()
	sdb, err := sql.Open("sqlite3", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var n int
	if err := sdb.QueryRow(`SELECT count(*) FROM objects WHERE kind = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDedup(t *testing.T) {
	ctx := context.Background()
	db, dbPath := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	data := random(10 << 20)
	write(t, filepath.Join(ws, "a.bin"), data, 0o644)
	write(t, filepath.Join(ws, "copy", "a.bin"), data, 0o644)
	st, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	if st.BytesStored > int64(len(data))+(64<<10) {
		t.Fatalf("two identical 10 MiB files stored %d bytes, want about 10 MiB", st.BytesStored)
	}
	before := countChunks(t, dbPath)
	data[5<<20] ^= 1
	write(t, filepath.Join(ws, "a.bin"), data, 0o644)
	st, err = workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	// A flipped bit changes the chunk holding it. When it also moves that
	// chunk's cut, the next chunks start at other offsets and the cuts find
	// the old ones again within a chunk or two: over random data about 1 edit
	// in 100 makes 2 new chunks, 1 in 400 makes 3, each more about 100 times
	// rarer. 8 is never reached by chunking that deduplicates and far below
	// the ~640 chunks of a store that does not.
	const most = 8
	if got := countChunks(t, dbPath) - before; got > most {
		t.Fatalf("a 1-byte edit of a 10 MiB file stored %d new chunks, want at most %d", got, most)
	}
	if st.BytesStored > most*cas.MaxChunk+4096 {
		t.Fatalf("a 1-byte edit stored %d bytes", st.BytesStored)
	}
}

// putRaw stores bytes under their hash without validation, as a hostile
// remote could.
func putRaw(t *testing.T, dbPath string, kind cas.Kind, data []byte) cas.ID {
	t.Helper()
	sdb, err := sql.Open("sqlite3", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	id := cas.Sum(data)
	if _, err := sdb.Exec(`INSERT OR IGNORE INTO objects (id, kind, codec, size, data) VALUES (?,?,0,?,?)`, id[:], int(kind), len(data), data); err != nil {
		t.Fatal(err)
	}
	return id
}

// hostileRoot returns a root tree holding /ws/ whose tree has one entry
// named name (any bytes), pointing to a small file.
func hostileRoot(t *testing.T, db *journal.DB, dbPath string, name []byte) cas.ID {
	t.Helper()
	m := putRaw(t, dbPath, cas.KindChunk, []byte("evil\n"))
	man := (&cas.Manifest{Size: 5, Extents: []cas.Extent{{ID: m, Len: 5}}}).Encode()
	mid := putRaw(t, dbPath, cas.KindManifest, man)
	// Encode a valid tree with a placeholder of the same length, then
	// swap in the hostile name and store the bytes under their hash.
	placeholder := bytes.Repeat([]byte("q"), len(name))
	good := &cas.Tree{Entries: []cas.Entry{{Name: []byte("aaa-ok"), Kind: cas.EntryFile, Mode: 0o644, Size: 5, Target: mid},
		{Name: placeholder, Kind: cas.EntryFile, Mode: 0o644, Size: 5, Target: mid}}}
	enc, err := good.Encode()
	if err != nil {
		t.Fatal(err)
	}
	inner := putRaw(t, dbPath, cas.KindTree, bytes.Replace(enc, placeholder, name, 1))
	wsTree, err := (&cas.Tree{Entries: []cas.Entry{{Name: []byte("ws"), Kind: cas.EntryDir, Mode: 0o755, Target: inner}}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	return putRaw(t, dbPath, cas.KindTree, wsTree)
}

func TestPullRefusesHostileStore(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"..", ".", "../../x", "/etc/passwd", "a\x00b", "sub/../../x"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			db, dbPath := openDB(t)
			root := hostileRoot(t, db, dbPath, []byte(name))
			base := t.TempDir()
			dst := filepath.Join(base, "ws")
			write(t, filepath.Join(dst, "keep"), []byte("host file"), 0o644)
			before := describe(t, base)
			_, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: journal.State{Root: root}})
			if err == nil {
				t.Fatalf("pull of a tree with entry %q succeeded", name)
			}
			if !errors.Is(err, cas.ErrMalformed) && !errors.Is(err, cas.ErrCorrupt) {
				t.Fatalf("error %v does not say the object is malformed", err)
			}
			if d := testutil.DiffTrees(before, describe(t, base)); d != "" {
				t.Fatalf("refused pull changed the host:\n%s", d)
			}
		})
	}
}

func TestPullDoesNotFollowHostSymlinks(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(src, "a", "x"), []byte("payload"), 0o644)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	head, _ := db.Resolve(ctx, "main", "main")
	// The destination holds a symlink "a" pointing outside it.
	outside := t.TempDir()
	dst := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(dst, 0o755)
	if err := os.Symlink(outside, filepath.Join(dst, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("pull wrote %d entries through a symlink outside the workspace", len(ents))
	}
	if fi, err := os.Lstat(filepath.Join(dst, "a")); err != nil || !fi.IsDir() {
		t.Fatalf("a should now be a real directory: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a", "x")); string(b) != "payload" {
		t.Fatalf("a/x = %q", b)
	}
}

func TestPullCorruptChunkChangesNothing(t *testing.T) {
	ctx := context.Background()
	db, dbPath := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(src, "a.txt"), []byte("first version"), 0o644)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	head, _ := db.Resolve(ctx, "main", "main")
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head}); err != nil {
		t.Fatal(err)
	}
	// A new version whose only chunk we then damage.
	content := random(200_000)
	write(t, filepath.Join(src, "a.txt"), content, 0o644)
	write(t, filepath.Join(src, "b.txt"), []byte("another file"), 0o644)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	sdb, _ := sql.Open("sqlite3", dbPath)
	defer sdb.Close()
	first, _ := cas.NewChunker(bytes.NewReader(content)).Next()
	id := cas.Sum(first)
	if res, err := sdb.Exec(`UPDATE objects SET data = substr(data, 1, 100) || (CASE WHEN substr(data, 101, 1) = X'00' THEN X'01' ELSE X'00' END) || substr(data, 102) WHERE id = ?`, id[:]); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatal("chunk not found to corrupt")
	}
	before := describe(t, filepath.Dir(dst))
	head, _ = db.Resolve(ctx, "main", "main")
	_, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head})
	if !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("pull of a corrupt chunk: err = %v, want ErrCorrupt", err)
	}
	if d := testutil.DiffTrees(before, describe(t, filepath.Dir(dst))); d != "" {
		t.Fatalf("failed pull changed the host:\n%s", d)
	}
}

func TestPullNeverWritesPolicy(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	binds := filepath.Join(src, ".art", "config", "binds.json")
	write(t, binds, []byte(`{"binds":[]}`), 0o644)
	write(t, filepath.Join(src, "code.go"), []byte("package x"), 0o644)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	// The store's copy is what an agent could have changed; the host's
	// policy is edited by its owner meanwhile.
	_, err := db.Do(ctx, "main", "test", "agent edits policy", func(tx *journal.Tx) error {
		n, err := tx.Resolve([]byte("ws/.art/config/binds.json"))
		if err != nil {
			return err
		}
		m, _, err := tx.Objects().PutFile(ctx, strings.NewReader(`{"binds":[{"host":"/","guest":"/host","readonly":false}]}`))
		if err != nil {
			return err
		}
		_, err = tx.Write(n.Ino, m, 56, time.Now().UnixNano(), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, binds, []byte(`{"binds":[{"host":"/data","guest":"/data","readonly":true}]}`), 0o644)
	head, _ := db.Resolve(ctx, "main", "main")
	var warn bytes.Buffer
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: src, State: head, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(binds); !strings.Contains(string(b), `"/data"`) {
		t.Fatalf("pull overwrote the host's binds.json: %s", b)
	}
}

// TestPullSanitizesByDefault: without SameOwner no setuid/setgid bit and
// no stored owner reaches the host, and a second pull finds nothing to do.
func TestPullSanitizesByDefault(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	richTree(t, src)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dst, 4321, 8765); err != nil {
			t.Fatal(err)
		}
	}
	var owner unix.Stat_t
	if err := unix.Stat(dst, &owner); err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head}); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "setuid"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o755 {
		t.Errorf("setuid: mode %04o, want 0755 (setuid dropped)", st.Mode&0o7777)
	}
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Error(err)
			return nil
		}
		if st.Uid != owner.Uid || st.Gid != owner.Gid {
			t.Errorf("%s: owner %d:%d, want the destination's %d:%d", p, st.Uid, st.Gid, owner.Uid, owner.Gid)
		}
		return nil
	})
	st2, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Written != 0 || st2.Deleted != 0 || st2.Updated != 0 {
		t.Fatalf("second pull wrote %+v, want nothing", st2)
	}
}

// TestPullReplacesSharedInode: a destination file hard-linked to a file
// outside gets the state's metadata as a new inode; the outside file is
// untouched.
func TestPullReplacesSharedInode(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	base := t.TempDir()
	src, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	write(t, filepath.Join(src, "shared"), []byte("same bytes\n"), 0o600)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(base, "dst", "ws")
	write(t, outside, []byte("same bytes\n"), 0o644)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(dst, "shared")); err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head}); err != nil {
		t.Fatal(err)
	}
	fo, err := os.Stat(outside)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := os.Stat(filepath.Join(dst, "shared"))
	if err != nil {
		t.Fatal(err)
	}
	if fo.Mode().Perm() != 0o644 {
		t.Errorf("outside file: mode %v, want 0644 (changed through the shared inode)", fo.Mode())
	}
	if fd.Mode().Perm() != 0o600 || os.SameFile(fo, fd) {
		t.Errorf("destination file: mode %v, same inode %v; want 0600 on a new inode", fd.Mode(), os.SameFile(fo, fd))
	}
}

// TestPullNeverTouchesArtDir: a state without .art, or with .art as a
// symlink, neither removes the host's .art nor writes through it.
func TestPullNeverTouchesArtDir(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(src, "evil", "config", "binds.json"), []byte(`{"binds":[{"host":"/","guest":"/host"}]}`), 0o644)
	if err := os.Symlink("evil", filepath.Join(src, ".art")); err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
		t.Fatal(err)
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	binds := filepath.Join(dst, ".art", "config", "binds.json")
	write(t, binds, []byte(`{"binds":[]}`), 0o644)
	var warn bytes.Buffer
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, ".art")); err != nil || !fi.IsDir() {
		t.Fatalf(".art after pull: %v %v, want the host's directory", fi, err)
	}
	if b, err := os.ReadFile(binds); err != nil || string(b) != `{"binds":[]}` {
		t.Fatalf("binds.json after pull: %q %v", b, err)
	}
	if !strings.Contains(warn.String(), "not writing .art") {
		t.Errorf("no warning about the stored .art symlink: %q", warn.String())
	}
}

// TestRandomTreesRoundTrip pushes and pulls seeded random trees through a
// series of random edits; every pull must reproduce the host tree.
func TestRandomTreesRoundTrip(t *testing.T) {
	ctx := context.Background()
	seed := time.Now().UnixNano()
	if s, ok := os.LookupEnv("ART_TEST_SEED"); ok {
		v, _ := new(big.Int).SetString(s, 10)
		seed = v.Int64()
	}
	t.Logf("seed %d (rerun with ART_TEST_SEED=%d)", seed, seed)
	rng := mrand.New(mrand.NewSource(seed))
	db, _ := openDB(t)
	src := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(src, 0o755)
	var files []string
	for round := 0; round < 8; round++ {
		for i := 0; i < 30; i++ {
			switch op := rng.Intn(10); {
			case op < 5 || len(files) == 0:
				p := filepath.Join(src, []string{"", "a", "a/b", "c"}[rng.Intn(4)], "f"+string(rune('a'+rng.Intn(26))))
				if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
					continue
				}
				data := make([]byte, rng.Intn(70_000))
				rng.Read(data)
				write(t, p, data, os.FileMode(0o600|rng.Intn(0o200)))
				files = append(files, p)
			case op < 7:
				os.Remove(files[rng.Intn(len(files))])
			case op < 8:
				p := files[rng.Intn(len(files))]
				os.Rename(p, p+"-moved")
				files = append(files, p+"-moved")
			default:
				p := files[rng.Intn(len(files))]
				if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
					f.WriteAt([]byte("patch"), int64(rng.Intn(1000)))
					f.Close()
				}
			}
		}
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: src}); err != nil {
			t.Fatalf("seed %d round %d: push: %v", seed, round, err)
		}
		head, _ := db.Resolve(ctx, "main", "main")
		dst := filepath.Join(t.TempDir(), "ws")
		if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: head}); err != nil {
			t.Fatalf("seed %d round %d: pull: %v", seed, round, err)
		}
		opts := testutil.TreeOptions{}
		if d := testutil.DiffTrees(testutil.DescribeTree(t, src, opts), testutil.DescribeTree(t, dst, opts)); d != "" {
			t.Fatalf("seed %d round %d: pull differs from host:\n%s", seed, round, d)
		}
	}
	if rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true}); err != nil || !rep.OK() {
		t.Fatalf("seed %d: verify: %v %+v", seed, err, rep)
	}
}

// TestPullMoreLinksThanTheFileSystemAllows: a hard-link group larger than
// the destination's link limit (ext4: 65,000; /tmp on the CI machines) is
// written whole, the names past the limit on a second inode, instead of
// failing half-way.
func TestPullMoreLinksThanTheFileSystemAllows(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 66,000 links")
	}
	ctx := context.Background()
	db, _ := openDB(t)
	const n = 66000
	var root cas.ID
	_, err := db.Do(ctx, "main", "test", "a link group past ext4's limit", func(tx *journal.Tx) error {
		objs := tx.Objects()
		m, _, err := objs.PutFile(ctx, strings.NewReader("x"))
		if err != nil {
			return err
		}
		many := &cas.Tree{}
		link := cas.HardLink{Group: 1}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("l%06d", i)
			many.Entries = append(many.Entries, cas.Entry{Name: []byte(name), Kind: cas.EntryFile, Mode: 0o644, Size: 1, Target: m, LinkGroup: 1})
			link.Paths = append(link.Paths, []byte("ws/many/"+name))
		}
		manyID, _, err := objs.PutTree(ctx, many)
		if err != nil {
			return err
		}
		ws, _, err := objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{{Name: []byte("many"), Kind: cas.EntryDir, Mode: 0o755, Target: manyID}}})
		if err != nil {
			return err
		}
		root, _, err = objs.PutTree(ctx, &cas.Tree{Entries: []cas.Entry{{Name: []byte("ws"), Kind: cas.EntryDir, Mode: 0o755, Target: ws}}, Links: []cas.HardLink{link}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := db.Objects()
	dst := filepath.Join(t.TempDir(), "ws")
	if _, err := workspace.Export(ctx, objs, workspace.ExportOptions{Dir: dst, State: journal.State{Root: root}}); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(filepath.Join(dst, "many"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != n {
		t.Fatalf("%d names pulled, want %d", len(names), n)
	}
	inodes := map[uint64]int{}
	for _, d := range names {
		var st unix.Stat_t
		p := filepath.Join(dst, "many", d.Name())
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		inodes[st.Ino]++
		if st.Size != 1 {
			t.Fatalf("%s: size %d", p, st.Size)
		}
	}
	t.Logf("%d names on %d inodes", len(names), len(inodes))
	var fsst unix.Statfs_t
	if err := unix.Statfs(dst, &fsst); err != nil {
		t.Fatal(err)
	}
	if fsst.Type == unix.EXT4_SUPER_MAGIC && len(inodes) < 2 {
		t.Fatalf("%d names on one inode of ext4, whose limit is 65,000", n)
	}
}

// TestPullStagingNames: a pull removes only the staging directories art
// made (its name pattern and marker, or empty), never a user's directory
// of a similar name, and never writes a staging name from a state.
func TestPullStagingNames(t *testing.T) {
	ctx := context.Background()
	db, dbPath := openDB(t)
	m := putRaw(t, dbPath, cas.KindChunk, []byte("data\n"))
	mid := putRaw(t, dbPath, cas.KindManifest, (&cas.Manifest{Size: 5, Extents: []cas.Extent{{ID: m, Len: 5}}}).Encode())
	file := func(name string) cas.Entry {
		return cas.Entry{Name: []byte(name), Kind: cas.EntryFile, Mode: 0o644, Size: 5, Target: mid}
	}
	inner, err := (&cas.Tree{Entries: []cas.Entry{file(".art-staging-cccccccccccc"), file("ok")}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	wsTree, err := (&cas.Tree{Entries: []cas.Entry{{Name: []byte("ws"), Kind: cas.EntryDir, Mode: 0o755,
		Target: putRaw(t, dbPath, cas.KindTree, inner)}}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	root := putRaw(t, dbPath, cas.KindTree, wsTree)

	dst := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(dst, ".art-staging-notes", "x"), []byte("user's\n"), 0o644)
	write(t, filepath.Join(dst, ".art-staging-0123456789ab", "y"), []byte("user's too\n"), 0o644)
	write(t, filepath.Join(dst, ".art-staging-aaaaaaaaaaaa", ".art-staging"), nil, 0o600)
	write(t, filepath.Join(dst, ".art-staging-aaaaaaaaaaaa", "0"), []byte("stale"), 0o600)
	if err := os.Mkdir(filepath.Join(dst, ".art-staging-bbbbbbbbbbbb"), 0o700); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	if _, err := workspace.Export(ctx, db.Objects(), workspace.ExportOptions{Dir: dst, State: journal.State{Root: root}, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{".art-staging-notes/x", ".art-staging-0123456789ab/y", "ok"} {
		if _, err := os.Stat(filepath.Join(dst, keep)); err != nil {
			t.Errorf("%s after the pull: %v", keep, err)
		}
	}
	for _, gone := range []string{".art-staging-aaaaaaaaaaaa", ".art-staging-bbbbbbbbbbbb", ".art-staging-cccccccccccc"} {
		if _, err := os.Lstat(filepath.Join(dst, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the pull: %v, want it absent", gone, err)
		}
	}
	if !strings.Contains(warn.String(), "not writing .art-staging-cccccccccccc") {
		t.Errorf("no warning about the stored staging name: %q", warn.String())
	}
}
