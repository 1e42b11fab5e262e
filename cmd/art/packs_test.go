package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"golang.org/x/sys/unix"
)

// Issue 28, cases 5 and 8: a failed or interrupted push leaves no pack
// bytes, gc works on a full disk, Ctrl-C exits 130 saying what was
// recorded; a store copied without its packs is reported one line per
// pack, and art backup copies a live store.

// randFile writes n pseudo-random (incompressible) bytes to path.
func randFile(t *testing.T, path string, seed uint64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// freeBytes is what the file system holding dir has free.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fill writes a file into dir until the file system is full, and
// returns a function that removes it.
func fill(t *testing.T, dir string) func() {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := len(buf); n > 0; {
		_, err := f.Write(buf[:n])
		if err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatal(err)
			}
			n /= 2 // the last bytes, a page at a time
		}
		if n < 4096 {
			break
		}
	}
	if free := freeBytes(t, dir); free != 0 {
		t.Fatalf("the file system still has %d bytes free", free)
	}
	return func() { os.Remove(p) }
}

// packSizes maps each pack file of the store at db to its size.
func packSizes(t *testing.T, db string) map[int64]int64 {
	t.Helper()
	ents, err := os.ReadDir(cas.PacksDir(db))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	for _, e := range ents {
		num, ok := cas.ParsePackName(e.Name())
		if !ok {
			t.Fatalf("stray file in the pack directory: %s", e.Name())
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[num] = info.Size()
	}
	return out
}

// namedEnds maps each pack the rows of the store at db name to the end
// of the last range they name.
func namedEnds(t *testing.T, db string) map[int64]int64 {
	t.Helper()
	sdb, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	rows, err := sdb.Query(`SELECT pack, max(pack_off + pack_len) FROM objects WHERE pack != 0 GROUP BY pack`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var num, end int64
		if err := rows.Scan(&num, &end); err != nil {
			t.Fatal(err)
		}
		out[num] = end
	}
	return out
}

// orphanBytes is how many pack bytes of the store at db no row names (no
// process may have it open).
func orphanBytes(t *testing.T, db string) int64 {
	t.Helper()
	named := namedEnds(t, db)
	var n int64
	for num, size := range packSizes(t, db) {
		n += size - named[num]
	}
	return n
}

// signalWhen starts cmd and sends it sig once ready() holds (polled), and
// returns its exit status and stderr. ok is false when the command ended
// before ready() held.
func signalWhen(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, ready func() bool) (code int, stderr string, ok bool) {
	t.Helper()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return cmd.ProcessState.ExitCode(), errb.String(), false
		case <-tick.C:
			if ready() {
				cmd.Process.Signal(sig)
				<-done
				return cmd.ProcessState.ExitCode(), errb.String(), true
			}
		}
	}
}

// packsOver reports whether the packs of db hold more than n bytes.
func packsOver(db string, n int64) func() bool {
	return func() bool {
		ents, _ := os.ReadDir(cas.PacksDir(db))
		var total int64
		for _, e := range ents {
			if info, err := e.Info(); err == nil {
				total += info.Size()
			}
		}
		return total > n
	}
}

// TestPushDiskFull: a push that fills the file system fails with one line
// and a hint, leaves no pack bytes and records its op as failed; bytes a
// killed push left are counted by art status and given back by art gc on
// a file system with no byte free (issue 28, case 5).
func TestPushDiskFull(t *testing.T) {
	small := smallFS(t, "64m")
	db := filepath.Join(small, "ws.db")
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	mustArt(t, "push", "-m", ws, "-d", db, "-q")

	big := filepath.Join(t.TempDir(), "big", "ws")
	randFile(t, filepath.Join(big, "big.bin"), 1, 100<<20)
	_, errs, code := art(t, "push", "-m", big, "-d", db, "-q")
	if code != exitFailure || !strings.Contains(errs, "no space left on device") || !strings.Contains(errs, "hint: the file system is full") {
		t.Fatalf("push onto a full file system: exit %d, stderr %q", code, errs)
	}
	if n := orphanBytes(t, db); n != 0 {
		t.Fatalf("the failed push left %d pack bytes no row names (packs %v, named %v)", n, packSizes(t, db), namedEnds(t, db))
	}
	if log := mustArt(t, "log", "-d", db); !strings.Contains(strings.SplitN(log, "\n", 2)[0], "[exit 1]") {
		t.Fatalf("the failed push's op is not recorded as failed:\n%s", log)
	}

	// A push killed while it appends leaves bytes that gc must free, even
	// with the file system full to the last byte.
	mid := filepath.Join(t.TempDir(), "mid", "ws")
	randFile(t, filepath.Join(mid, "mid.bin"), 2, 40<<20)
	if _, _, ok := signalWhen(t, artCmd(t, "push", "-m", mid, "-d", db, "-q"), syscall.SIGKILL, packsOver(db, 8<<20)); !ok {
		t.Fatal("the push ended before it had appended 8 MiB")
	}
	orphan := orphanBytes(t, db)
	if orphan < 8<<20 {
		t.Fatalf("the killed push left %d orphan pack bytes; want more than 8 MiB", orphan)
	}
	if out := mustArt(t, "status", "-d", db); !strings.Contains(out, "of pack bytes no object names") {
		t.Fatalf("art status does not count the orphan pack bytes:\n%s", out)
	}
	fill(t, small)
	out, errs, code := art(t, "gc", "-d", db, "--grace", "0")
	if code != 0 {
		t.Fatalf("gc on a full file system: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "removed") || freeBytes(t, small) < orphan/2 {
		t.Fatalf("gc freed %d bytes of %d orphans:\n%s", freeBytes(t, small), orphan, out)
	}
	if n := orphanBytes(t, db); n != 0 {
		t.Fatalf("after gc: %d orphan pack bytes", n)
	}
	if err := os.Remove(filepath.Join(small, "filler")); err != nil {
		t.Fatal(err)
	}
	mustArt(t, "verify", "-d", db)
}

// TestPushInterrupted: SIGINT at several points of a big push (into the
// store, to a store file, and a pull into a store) exits 130 with one line
// saying what was recorded and leaves no orphan pack bytes; a push that
// got to commit reports success (issue 28, case 5).
func TestPushInterrupted(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "src", "ws")
	big := randFile(t, filepath.Join(ws, "big.bin"), 3, 64<<20)
	writeFile(t, filepath.Join(ws, "small.txt"), "small\n")

	outcomes := map[string]int{}
	for i, at := range []int64{0, 16 << 20, 40 << 20, 60 << 20, 200 << 20} {
		db := filepath.Join(base, "s"+strconv.Itoa(i), "ws.db")
		if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
			t.Fatal(err)
		}
		code, stderr, _ := signalWhen(t, artCmd(t, "push", "-m", ws, "-d", db, "-q"), syscall.SIGINT, packsOver(db, at))
		switch code {
		case 130:
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "art: push interrupted") {
				t.Fatalf("signal at %d MiB: stderr %q, want one line saying what was recorded", at>>20, stderr)
			}
			if strings.Contains(stderr, "nothing recorded") {
				outcomes["nothing recorded"]++
			} else {
				outcomes["partly recorded"]++
			}
			if log := mustBin(t, "log", "-d", db); !strings.Contains(strings.SplitN(log, "\n", 2)[0], "[interrupted]") {
				t.Fatalf("signal at %d MiB: the op is not marked interrupted:\n%s", at>>20, log)
			}
		case 0:
			outcomes["success"]++
			got, errs, code := binArt(t, "cat", "-d", db, "main:ws/big.bin")
			if code != 0 || got != string(big) {
				t.Fatalf("signal at %d MiB: rc 0 but big.bin reads back %d bytes, %q", at>>20, len(got), errs)
			}
		default:
			t.Fatalf("signal at %d MiB: exit %d, stderr %q; want 130, or 0 once committed", at>>20, code, stderr)
		}
		if n := orphanBytes(t, db); n != 0 {
			t.Fatalf("signal at %d MiB (exit %d): %d orphan pack bytes", at>>20, code, n)
		}
		mustBin(t, "verify", "-d", db)
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["nothing recorded"] == 0 {
		t.Fatalf("no signal landed before the commit: %v", outcomes)
	}

	// To and from another store file.
	src := filepath.Join(base, "full", "ws.db")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	mustBin(t, "push", "-m", ws, "-d", src, "-q")
	for _, c := range []struct{ verb, db, remote string }{
		{"push", src, filepath.Join(base, "to", "copy.db")},
		{"pull", filepath.Join(base, "from", "copy.db"), src},
	} {
		dest := c.remote
		if c.verb == "pull" {
			dest = c.db
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			t.Fatal(err)
		}
		code, stderr, ok := signalWhen(t, artCmd(t, c.verb, "-d", c.db, c.remote), syscall.SIGINT, packsOver(dest, 8<<20))
		if !ok {
			t.Fatalf("%s ended before it had stored 8 MiB", c.verb)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 130 || len(lines) != 1 || !strings.Contains(stderr, c.verb+" interrupted: nothing recorded, no branch moved") {
			t.Fatalf("%s interrupted: exit %d, stderr %q", c.verb, code, stderr)
		}
		if n := orphanBytes(t, dest); n != 0 {
			t.Fatalf("%s interrupted: %d orphan pack bytes in %s", c.verb, n, dest)
		}
		// And the transfer completes when run again.
		mustBin(t, c.verb, "-d", c.db, c.remote)
		if got, _, code := binArt(t, "cat", "-d", dest, "main:ws/big.bin"); code != 0 || got != string(big) {
			t.Fatalf("after the %s was run again: big.bin exit %d, %d bytes", c.verb, code, len(got))
		}
	}
}

// TestVerifyCopiedStore: a store file copied without its packs, and one
// with a pack cut short, are reported in one line per pack naming what it
// affects, never one line per chunk; art cat of such a file writes nothing
// and says how to copy a store (issue 28, case 8).
func TestVerifyCopiedStore(t *testing.T) {
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	randFile(t, filepath.Join(ws, "a.bin"), 4, 12<<20)
	mustArt(t, "push", "-m", ws, "-d", db, "-q")
	b := randFile(t, filepath.Join(ws, "b.bin"), 5, 12<<20)
	mustArt(t, "push", "-m", ws, "-d", db, "-q") // a second process: a second pack
	packs := packSizes(t, db)
	if len(packs) != 2 {
		t.Fatalf("want two packs, got %v", packs)
	}
	dbBytes, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(base, "copy.db")
	if err := os.WriteFile(cp, dbBytes, 0o600); err != nil {
		t.Fatal(err)
	}

	damaged := func(out string) []string {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "DAMAGED") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	out, _, code := art(t, "verify", "-d", cp)
	lines := damaged(out)
	if code != exitCorrupt || len(lines) != 2 || strings.Count(out, "\n") > 5 {
		t.Fatalf("verify of the file alone: exit %d, want 4 and one DAMAGED line per pack:\n%s", code, out)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "DAMAGED pack ") || !strings.Contains(l, "copy.db.packs is missing") || !strings.Contains(l, "branch main") {
			t.Fatalf("a pack line does not say the pack directory is missing and what it affects: %q", l)
		}
	}
	if !strings.Contains(out, "ws/a.bin") || !strings.Contains(out, "ws/b.bin") || !strings.Contains(out, "art backup") {
		t.Fatalf("verify does not name the affected paths and how to copy a store:\n%s", out)
	}
	stdout, stderr, code := art(t, "cat", "-d", cp, "main:ws/b.bin")
	if code != exitCorrupt || stdout != "" || !strings.Contains(stderr, "copy.db.packs") {
		t.Fatalf("cat with the packs missing: exit %d, %d bytes written, stderr %q", code, len(stdout), stderr)
	}

	// The packs copied, but the one holding b.bin cut short.
	if err := os.Mkdir(cas.PacksDir(cp), 0o700); err != nil {
		t.Fatal(err)
	}
	var newest int64
	sdb, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	if err := sdb.QueryRow(`SELECT pack FROM objects WHERE pack != 0 ORDER BY rowid DESC LIMIT 1`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	for num, size := range packs {
		data, err := os.ReadFile(filepath.Join(cas.PacksDir(db), cas.PackName(num)))
		if err != nil {
			t.Fatal(err)
		}
		if num == newest {
			data = data[:size/2]
		}
		if err := os.WriteFile(filepath.Join(cas.PacksDir(cp), cas.PackName(num)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code = art(t, "verify", "-d", cp)
	lines = damaged(out)
	if code != exitCorrupt || len(lines) != 1 || !strings.HasPrefix(lines[0], "DAMAGED pack "+cas.PackName(newest)+": short") ||
		!strings.Contains(lines[0], "ws/b.bin") || strings.Contains(lines[0], "ws/a.bin") {
		t.Fatalf("verify with a short pack: exit %d, want one line for pack %s affecting ws/b.bin:\n%s", code, cas.PackName(newest), out)
	}
	stdout, stderr, code = art(t, "cat", "-d", cp, "main:ws/b.bin")
	if code != exitCorrupt || stdout != "" {
		t.Fatalf("cat of a file past a short pack's end: exit %d, %d bytes written, stderr %q", code, len(stdout), stderr)
	}
	mustArt(t, "cat", "-d", cp, "main:ws/a.bin")
	out = mustArtCode(t, exitCorrupt, "verify", "-d", cp, "--json")
	var rep struct {
		Problems []struct {
			What     string   `json:"what"`
			Objects  []string `json:"objects"`
			Affected int      `json:"affected"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].What != "pack" || len(rep.Problems[0].Objects) < 2 || rep.Problems[0].Affected != 1 {
		t.Fatalf("verify --json: want the short pack with every damaged object listed:\n%s", out)
	}

	// The whole store, copied right, reads back.
	bk := filepath.Join(base, "backup.db")
	mustArt(t, "backup", "-d", db, bk)
	if got := mustArt(t, "cat", "-d", bk, "main:ws/b.bin"); got != string(b) {
		t.Fatalf("b.bin from the backup: %d bytes", len(got))
	}
}

// mustArtCode runs art in-process and fails unless it exits with code.
func mustArtCode(t *testing.T, code int, args ...string) string {
	t.Helper()
	out, errs, got := art(t, args...)
	if got != code {
		t.Fatalf("art %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errs)
	}
	return out
}

// TestBackupLiveStore: art backup copies a store other processes keep
// writing (new packs, new ops) into a store that verifies and holds the
// history, and never overwrites (issue 28, case 8).
func TestBackupLiveStore(t *testing.T) {
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	big := randFile(t, filepath.Join(ws, "big.bin"), 6, 8<<20)
	mustArt(t, "push", "-m", ws, "-d", db, "-q")

	// A writer in other processes: pushes of a changing big file.
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		var err error
		for i := uint64(0); err == nil; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			b := make([]byte, 6<<20)
			rand.NewChaCha8([32]byte{byte(i), 7}).Read(b)
			if err = os.WriteFile(filepath.Join(ws, "moving.bin"), b, 0o644); err == nil {
				var out []byte
				if out, err = artCmd(t, "push", "-m", ws, "-d", db, "-q").CombinedOutput(); err != nil {
					err = fmt.Errorf("%w: %s", err, out)
				}
			}
		}
		writerDone <- err
	}()
	defer func() {
		close(stop)
		if err := <-writerDone; err != nil {
			t.Errorf("the concurrent push failed: %v", err)
		}
	}()

	for i := range 3 {
		time.Sleep(200 * time.Millisecond)
		bk := filepath.Join(base, "backup"+strconv.Itoa(i)+".db")
		out := mustArt(t, "backup", "-d", db, bk)
		if !strings.HasPrefix(out, "backup: ") {
			t.Fatalf("backup printed %q", out)
		}
		if out := mustArt(t, "verify", "-d", bk); !strings.HasSuffix(out, "ok\n") {
			t.Fatalf("verify of backup %d:\n%s", i, out)
		}
		if got := mustArt(t, "cat", "-d", bk, "main:ws/big.bin"); got != string(big) {
			t.Fatalf("backup %d: big.bin reads back %d bytes", i, len(got))
		}
		if log := mustArt(t, "log", "-d", bk); strings.Count(log, "import") < 1 {
			t.Fatalf("backup %d has no history:\n%s", i, log)
		}
	}
	_, errs, code := art(t, "backup", "-d", db, filepath.Join(base, "backup0.db"))
	if code != exitFailure || !strings.Contains(errs, "never overwrites") {
		t.Fatalf("backup onto an existing store: exit %d, %q", code, errs)
	}
}

// binArt runs the built binary (no race detector: the big contents of
// these tests take minutes through an in-process -race run).
func binArt(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	r := exe(t, artCmd(t, args...))
	return r.stdout, r.stderr, r.code
}

func mustBin(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := binArt(t, args...)
	if code != 0 {
		t.Fatalf("art %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}
