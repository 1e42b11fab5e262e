package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/migrations"
)

// randBytes is n incompressible bytes, the same for the same seed.
func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// readHead returns the content of path in branch's head.
func readHead(t testing.TB, db *journal.DB, branch, path string) []byte {
	t.Helper()
	b, err := readHeadErr(db, branch, path)
	if err != nil {
		t.Fatalf("read %s:%s: %v", branch, path, err)
	}
	return b
}

func readHeadErr(db *journal.DB, branch, path string) ([]byte, error) {
	ctx := context.Background()
	st, err := db.Head(ctx, branch)
	if err != nil {
		return nil, err
	}
	e, err := db.Objects().LookupPath(ctx, st.Root, path)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := db.Objects().ReadFile(ctx, e.Target, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// packFiles lists the pack files of the store at path.
func packFiles(t testing.TB, path string) []string {
	t.Helper()
	ents, err := os.ReadDir(cas.PacksDir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// allocated is the disk space file p occupies.
func allocated(t testing.TB, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// Large content goes to a pack, small content stays inline, both read
// back verified, also after reopening and from a read-only handle.
func TestPacksWriteRead(t *testing.T) {
	db := openStore(t)
	path := db.Path()
	big := randBytes(1, 3<<20)
	small := randBytes(2, 100<<10)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "small", string(small), 1) })
	raw := rawSQL(t, path)
	if n := count(t, raw, `SELECT count(*) FROM objects WHERE pack != 0`); n != 0 {
		t.Fatalf("a 100 KiB file packed %d objects, want none", n)
	}
	if p := packFiles(t, path); len(p) != 0 {
		t.Fatalf("packs after small writes only: %v", p)
	}
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "big", string(big), 1) })
	packed := count(t, raw, `SELECT count(*) FROM objects WHERE pack != 0`)
	if packed < 100 || count(t, raw, `SELECT count(*) FROM objects WHERE pack != 0 AND length(data) != 0`) != 0 {
		t.Fatalf("a 3 MiB file packed %d objects, want most of its chunks, with empty data", packed)
	}
	if p := packFiles(t, path); len(p) != 1 || !strings.HasSuffix(p[0], ".pack") {
		t.Fatalf("pack files %v, want one", p)
	}
	if !bytes.Equal(readHead(t, db, "main", "big"), big) || !bytes.Equal(readHead(t, db, "main", "small"), small) {
		t.Fatal("content differs after write")
	}
	mustVerify(t, db)
	if _, err := db.TakeSnapshot(context.Background(), "main", "s"); err != nil {
		t.Fatal(err)
	}
	u, err := db.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if u.Chunks.Stored < int64(len(big)) {
		t.Fatalf("usage counts %d stored chunk bytes, want at least the packed %d", u.Chunks.Stored, len(big))
	}
	db.Close()

	db2, err := journal.Open(context.Background(), path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if !bytes.Equal(readHead(t, db2, "main", "big"), big) {
		t.Fatal("content differs read-only")
	}
	mustVerify(t, db2)
}

// A read-only open of a store without packs (a pull source) creates no
// pack directory, and one of a store with packs adds no file to it.
func TestPacksReadOnlyOpenCreatesNothing(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	path := db.Path()
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "a", "small", 1) })
	if _, err := db.TakeSnapshot(ctx, "main", "s"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := journal.Open(ctx, path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(readHead(t, ro, "main", "a")) != "small" {
		t.Fatal("content differs")
	}
	mustVerify(t, ro)
	if _, err := ro.GC(ctx, journal.GCOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if _, err := os.Lstat(cas.PacksDir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open made %s: %v", cas.PacksDir(path), err)
	}

	db, err = journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "big", string(randBytes(3, 2<<20)), 1) })
	if _, err := db.TakeSnapshot(ctx, "main", "s2"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := packFiles(t, path)
	ro, err = journal.Open(ctx, path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	readHead(t, ro, "main", "big")
	mustVerify(t, ro)
	ro.Close()
	if after := packFiles(t, path); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("read-only open changed the pack directory: %v -> %v", before, after)
	}
}

// A damaged byte in a pack is found by verify, which names the object,
// and by every read of it.
func TestPacksVerifyFindsDamage(t *testing.T) {
	db := openStore(t)
	path := db.Path()
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "big", string(randBytes(4, 2<<20)), 1) })
	var idb []byte
	var pack, off, n int64
	if err := rawSQL(t, path).QueryRow(`SELECT id, pack, pack_off, pack_len FROM objects WHERE pack != 0 ORDER BY rowid DESC LIMIT 1`).
		Scan(&idb, &pack, &off, &n); err != nil {
		t.Fatal(err)
	}
	var id cas.ID
	copy(id[:], idb)
	f, err := os.OpenFile(filepath.Join(cas.PacksDir(path), packFiles(t, path)[0]), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	if _, err := f.ReadAt(b, off+n/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off+n/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, err := db.Verify(context.Background(), journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) == 0 || rep.Problems[0].Object != id.String() || rep.Problems[0].What != "object" {
		t.Fatalf("verify problems %+v, want object %s", rep.Problems, id)
	}
	if len(rep.Problems[0].Paths) == 0 || !strings.Contains(strings.Join(rep.Problems[0].Paths, " "), "big") {
		t.Fatalf("verify does not name the damaged file: %+v", rep.Problems[0])
	}
	var ce *cas.CorruptError
	if _, err := readHeadErr(db, "main", "big"); !errors.As(err, &ce) || ce.ID != id {
		t.Fatalf("read of the damaged file: %v, want a CorruptError naming %s", err, id.Short())
	}
}

// Lying pack coordinates in a row are refused before anything is
// allocated or read out of range.
func TestPacksHostileRow(t *testing.T) {
	db := openStore(t)
	path := db.Path()
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "big", string(randBytes(5, 2<<20)), 1) })
	raw := rawSQL(t, path)
	var idb []byte
	if err := raw.QueryRow(`SELECT id FROM objects WHERE pack != 0 LIMIT 1`).Scan(&idb); err != nil {
		t.Fatal(err)
	}
	var id cas.ID
	copy(id[:], idb)
	// A FIFO named like a pack: reading it must not block.
	if err := syscall.Mkfifo(filepath.Join(cas.PacksDir(path), fmt.Sprintf("%016x.pack", 54321)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, set string }{
		{"fifo pack", `pack = 54321`},
		{"huge length", `pack_len = 1 << 40`},
		{"past the end", `pack_off = 1 << 40`},
		{"negative offset", `pack_off = -5`},
		{"missing pack", `pack = 12345`},
		{"inline bytes too", `data = x'00'`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := raw.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var pack, off, n int64
			var data []byte
			if err := tx.QueryRow(`SELECT pack, pack_off, pack_len, data FROM objects WHERE id = ?`, idb).Scan(&pack, &off, &n, &data); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`UPDATE objects SET `+c.set+` WHERE id = ?`, idb); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			defer raw.Exec(`UPDATE objects SET pack = ?, pack_off = ?, pack_len = ?, data = ? WHERE id = ?`, pack, off, n, data, idb)
			var ce *cas.CorruptError
			if _, _, err := db.Objects().Get(context.Background(), id); !errors.As(err, &ce) || ce.ID != id {
				t.Fatalf("Get: %v, want a CorruptError naming the object", err)
			}
			if _, err := db.Objects().GetRaw(context.Background(), id); !errors.As(err, &ce) {
				t.Fatalf("GetRaw: %v, want a CorruptError", err)
			}
		})
	}
	mustVerify(t, db)
}

// A store written by the previous art (schema 5, every object inline:
// testdata/store-v5.art, made by that binary) opens, migrates, reads,
// verifies, and then takes packed content.
func TestPacksMigrateOldStore(t *testing.T) {
	ctx := context.Background()
	old, err := os.ReadFile("testdata/store-v5.art")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.art")
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	raw := rawSQL(t, path)
	if v := count(t, raw, `SELECT max(version) FROM schema_migrations`); v != 5 {
		t.Fatalf("fixture at version %d, want 5", v)
	}
	db, err := journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v := count(t, raw, `SELECT max(version) FROM schema_migrations`); v != migrations.Latest() {
		t.Fatalf("migrated to %d, want %d", v, migrations.Latest())
	}
	// What the fixture's maker wrote (see the commit that added it).
	want := map[string][]byte{
		"f0": []byte("hello\n"),
		"f1": []byte(strings.Repeat("compressible line\n", 4000)),
		"f2": randBytes(6, 160<<10),
	}
	for p, w := range want {
		if !bytes.Equal(readHead(t, db, "main", p), w) {
			t.Fatalf("%s differs after migration", p)
		}
	}
	mustVerify(t, db)
	big := randBytes(7, 3<<20)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "big", string(big), 1) })
	if count(t, raw, `SELECT count(*) FROM objects WHERE pack != 0`) == 0 {
		t.Fatal("migrated store packs nothing")
	}
	db.Close()
	// Reopening checks the migrated schema is exactly art's.
	db, err = journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readHead(t, db, "main", "big"), big) || !bytes.Equal(readHead(t, db, "main", "f2"), want["f2"]) {
		t.Fatal("content differs after reopening")
	}
	if _, err := db.GC(ctx, journal.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, db)
}

// gc punches the packed bytes of the objects it removes out of their
// pack, keeps the live ones, and deletes a pack no object is left in.
func TestPacksGCReclaims(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	path := db.Path()
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "small", "x", 1) })
	other := func(fn func(*journal.DB)) string {
		o, err := journal.Open(ctx, path, journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		before := packFiles(t, path)
		fn(o)
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		for _, p := range packFiles(t, path) {
			if !strings.Contains(strings.Join(before, " "), p) {
				return filepath.Join(cas.PacksDir(path), p)
			}
		}
		t.Fatal("no new pack")
		return ""
	}
	garbage := func(o *journal.DB, seed int64) {
		err := o.ReceiveObjects(ctx, func(objs *cas.Store) error {
			_, _, err := objs.PutFile(ctx, bytes.NewReader(randBytes(seed, 4<<20)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	live := randBytes(8, 3<<20)
	// One pack with dead and live objects, one with dead ones only.
	mixed := other(func(o *journal.DB) {
		garbage(o, 9)
		mustDo(t, o, "main", func(tx *journal.Tx) error { return writeFile(tx, "live", string(live), 1) })
	})
	dead := other(func(o *journal.DB) { garbage(o, 10) })
	// A pack creation that died before naming its pack left its
	// temporary file: gc removes it (no one holds its lock).
	stale := filepath.Join(cas.PacksDir(path), fmt.Sprintf("%016x.pack.tmp", 777))
	if err := os.WriteFile(stale, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	// One just made may be a writer's between its create and its lock:
	// gc leaves it. The stale one is older than that.
	fresh := filepath.Join(cas.PacksDir(path), fmt.Sprintf("%016x.pack.tmp", 778))
	if err := os.WriteFile(fresh, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "small", "y", 2) })
	mixedBefore := allocated(t, mixed)
	rep, err := db.GC(ctx, journal.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Of each 4 MiB garbage file, the first MiB is inline (small content
	// stays in the store file) and 3 MiB packed.
	if rep.Removed < 200 || rep.PacksRemoved != 1 || rep.PackBytesFreed < 6<<20-64<<10 {
		t.Fatalf("gc %+v: want the two garbage files' chunks removed, one pack deleted, 6 MiB of packs freed", rep)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wholly dead pack %s: %v", dead, err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temporary pack %s: %v", stale, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("gc removed a temporary pack made just now: %v", err)
	}
	if a := allocated(t, mixed); a > mixedBefore-(3<<20-64<<10) {
		t.Fatalf("mixed pack occupies %d bytes after gc, %d before: the dead 4 MiB were not freed", a, mixedBefore)
	}
	if !bytes.Equal(readHead(t, db, "main", "live"), live) {
		t.Fatal("live content differs after gc")
	}
	mustVerify(t, db)
	if rep.FileAfter >= rep.FileBefore-(7<<20) {
		t.Fatalf("store and packs %d -> %d bytes, want 7 MiB less", rep.FileBefore, rep.FileAfter)
	}
}

// Environment of TestHelperProcessPackCrash.
const packCrashEnv = "ART_JOURNAL_TEST_PACK_CRASH" // the store path

// TestHelperProcessPackCrash is not a test: TestPacksCrashBeforeCommit
// runs the test binary with it selected to get a writer to kill. It
// commits one large file, then writes another inside a transaction,
// says "ready" once that file's bytes are in its pack, and waits.
func TestHelperProcessPackCrash(t *testing.T) {
	path := os.Getenv(packCrashEnv)
	if path == "" {
		return
	}
	ctx := context.Background()
	db, err := journal.Open(ctx, path, journal.Options{Durability: journal.DurabilityFull})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Do(ctx, "main", "run", "committed", func(tx *journal.Tx) error {
		return writeFile(tx, "committed", string(randBytes(11, 3<<20)), 1)
	}); err != nil {
		t.Fatal(err)
	}
	db.Do(ctx, "main", "run", "torn", func(tx *journal.Tx) error {
		// Past the writer's staging buffer (4 MiB), so that bytes of it
		// reach the pack file before the kill.
		if err := writeFile(tx, "torn", string(randBytes(12, 10<<20)), 1); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("ready\n")
		select {} // until killed
	})
}

// A writer killed (SIGKILL) after appending a file's bytes to its pack
// but before the transaction naming them commits: what it committed
// before survives, nothing names the bytes past it (then torn off by a
// truncation, as a crash in mid-write leaves them), verify is clean, and
// gc gives the unreferenced tail back.
func TestPacksCrashBeforeCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.art")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessPackCrash$", "-test.count=1")
	// The helper's private TMPDIR (testutil.Main), left by the kill, goes
	// with this test's.
	cmd.Env = append(os.Environ(), packCrashEnv+"="+path, "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper said %q: %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	io.Copy(io.Discard, out)

	packs := packFiles(t, path)
	if len(packs) != 1 {
		t.Fatalf("packs %v, want the writer's one", packs)
	}
	pack := filepath.Join(cas.PacksDir(path), packs[0])
	raw := rawSQL(t, path)
	var end sql.NullInt64
	if err := raw.QueryRow(`SELECT max(pack_off + pack_len) FROM objects WHERE pack != 0`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(pack)
	if err != nil {
		t.Fatal(err)
	}
	// Some of the uncommitted file's 10 MiB went in after the committed
	// file's (what was still staged died with the writer).
	if !end.Valid || st.Size() < end.Int64+(2<<20) {
		t.Fatalf("pack holds %d bytes, rows name up to %v: want the uncommitted file's bytes beyond", st.Size(), end)
	}
	// A crash in mid-append leaves a torn tail: cut the pack in the
	// middle of the uncommitted bytes.
	if err := os.Truncate(pack, end.Int64+(1<<20)+123); err != nil {
		t.Fatal(err)
	}
	db, err = journal.Open(ctx, path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !bytes.Equal(readHead(t, db, "main", "committed"), randBytes(11, 3<<20)) {
		t.Fatal("committed file differs after the crash")
	}
	if _, err := readHeadErr(db, "main", "torn"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("uncommitted file: %v, want not found", err)
	}
	mustVerify(t, db)
	before := allocated(t, pack)
	rep, err := db.GC(ctx, journal.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PackBytesFreed < 1<<20-8192 || allocated(t, pack) > before-(1<<20-8192) {
		t.Fatalf("gc freed %d pack bytes (%d -> %d allocated), want the 1 MiB unreferenced tail", rep.PackBytesFreed, before, allocated(t, pack))
	}
	if !bytes.Equal(readHead(t, db, "main", "committed"), randBytes(11, 3<<20)) {
		t.Fatal("committed file differs after gc")
	}
	mustVerify(t, db)
}

// A store opened through a symbolic link keeps its packs beside the
// target, where SQLite keeps its WAL: opened through the link or through
// the target, it is one store.
func TestPacksStoreOpenedThroughLink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	real := filepath.Join(dir, "real.art")
	link := filepath.Join(dir, "link.art")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Open(ctx, link, journal.Options{Create: true}); err == nil {
		t.Fatal("a store was created through a dangling link")
	}
	db0, err := journal.Open(ctx, real, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db0.Close()
	db, err := journal.Open(ctx, link, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := randBytes(7, 3<<20)
	mustDo(t, db, "main", func(tx *journal.Tx) error { return writeFile(tx, "big", string(big), 1) })
	if db.Path() != real {
		t.Errorf("Path() = %s, want the link's target %s", db.Path(), real)
	}
	db.Close()
	if p := packFiles(t, real); len(p) == 0 {
		t.Fatal("no pack beside the target")
	}
	if _, err := os.Lstat(cas.PacksDir(link)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a pack directory beside the link: %v", err)
	}
	db2, err := journal.Open(ctx, real, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if !bytes.Equal(readHead(t, db2, "main", "big"), big) {
		t.Fatal("content differs read through the target")
	}
	mustVerify(t, db2)
}
