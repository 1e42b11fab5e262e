package overlay_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/overlay"
	"golang.org/x/sys/unix"
)

// Private copies kept across a kernel forget (kept.go). The mount is
// used from child processes only (cat, sh), as a sandbox would.

// seeded is n bytes of content that differs with seed.
func seeded(n int, seed byte) []byte {
	b := pattern(n)
	for i := range b {
		b[i] ^= seed + byte(i>>12)
	}
	return b
}

// writeChild writes data to p from a child process (cat > p).
func writeChild(t *testing.T, p string, data []byte) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `cat > "$1"`, "sh", p)
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v: %s", p, err, out)
	}
}

// readChild reads p in a child process (cat p).
func readChild(p string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("cat", p)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cat %s: %w: %s", p, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func mustReadChild(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := readChild(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes, not the %d written (equal length: %v)", p, len(got), len(want), len(got) == len(want))
	}
}

// overwriteChild writes s at offset 0 of p without truncating it, from a
// child process: an open for writing.
func overwriteChild(t *testing.T, p, s string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `printf %s "$2" 1<>"$1"`, "sh", p, s)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("overwrite %s: %v: %s", p, err, out)
	}
}

// forgetUntil makes the kernel forget what it can (drop_caches) until
// cond holds: FORGET requests reach the daemon asynchronously.
func forgetUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("drop_caches needs root")
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		unix.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Fatal(err)
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after drop_caches: %s never held", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// uppers lists the files in the current mount's upper directory.
func (s *store) uppers() []string {
	s.t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.dir, fmt.Sprintf("upper%d", s.mounts)))
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestKeptCopyReused: a file's private copy outlives the kernel's forget
// of the file, a new open reads it instead of copying the file out of the
// store again, the content is byte for byte what was written, and
// nothing of it is left after unmount.
func TestKeptCopyReused(t *testing.T) {
	s := newStore(t)
	p := filepath.Join(s.mnt, "f")
	want := seeded(3<<20+123, 1)
	writeChild(t, p, want)
	mustReadChild(t, p, want)
	forgetUntil(t, "one copy kept", func() bool { return s.fs.Stats().Kept == 1 })
	if st := s.fs.Stats(); st.KeptBytes < int64(len(want)) {
		t.Fatalf("kept %d bytes, want at least the file's %d", st.KeptBytes, len(want))
	}
	before := s.fs.Stats()
	mustReadChild(t, p, want)
	after := s.fs.Stats()
	if after.Reuses != before.Reuses+1 || after.Copies != before.Copies || after.Kept != 0 {
		t.Fatalf("read after forget: reuses %d -> %d, copies %d -> %d, kept %d; want the kept copy reused",
			before.Reuses, after.Reuses, before.Copies, after.Copies, after.Kept)
	}
	// Read again after another forget: a read-only open leaves it clean.
	forgetUntil(t, "the copy kept again", func() bool { return s.fs.Stats().Kept == 1 })
	mustReadChild(t, p, want)
	if got := s.fs.Stats().Reuses; got != after.Reuses+1 {
		t.Fatalf("reuses after a second forget = %d, want %d", got, after.Reuses+1)
	}
	forgetUntil(t, "the copy kept again", func() bool { return s.fs.Stats().Kept == 1 })
	if len(s.uppers()) != 1 {
		t.Fatalf("upper directory holds %v, want the one kept copy", s.uppers())
	}
	n := s.mounts
	s.unmount()
	left, err := os.ReadDir(filepath.Join(s.dir, fmt.Sprintf("upper%d", n)))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("after unmount the upper directory holds %d files", len(left))
	}
	s.mount()
	mustReadChild(t, p, want)
}

// TestKeptCopyNotShared: two files with the same content, written
// independently, and a hard link of one. After a forget one copy is kept;
// the file that takes it over and is written must not change the other,
// nor a kept copy; a copy written by passthrough is never kept.
func TestKeptCopyNotShared(t *testing.T) {
	t.Cleanup(overlay.CopyOnRead()) // b's reads copy it out, for a copy to keep; restored after the unmount
	s := newStore(t)
	a, b, b2 := filepath.Join(s.mnt, "a"), filepath.Join(s.mnt, "b"), filepath.Join(s.mnt, "b2")
	orig := seeded(1<<20, 2)
	writeChild(t, a, orig)
	writeChild(t, b, orig)
	if err := exec.Command("ln", b, b2).Run(); err != nil {
		t.Fatal(err)
	}
	forgetUntil(t, "one copy kept, the other removed", func() bool {
		return s.fs.Stats().Kept == 1 && len(s.uppers()) == 1
	})
	overwriteChild(t, a, "XYZ")
	mod := append([]byte("XYZ"), orig[3:]...)
	if got := s.fs.Stats().Reuses; got != 1 {
		t.Fatalf("reuses after writing a = %d, want 1 (the kept copy)", got)
	}
	mustReadChild(t, a, mod)
	mustReadChild(t, b, orig) // copied out afresh: nothing kept now
	mustReadChild(t, b2, orig)
	// a's copy, written by passthrough where the kernel allows it, is
	// removed; b's is kept.
	forgetUntil(t, "b's copy kept", func() bool { k := s.fs.Stats().Kept; return k >= 1 && len(s.uppers()) == k })
	mustReadChild(t, a, mod)
	mustReadChild(t, b, orig)
	// Written through its second name, read through the first.
	overwriteChild(t, b2, "UVW")
	mod2 := append([]byte("UVW"), orig[3:]...)
	mustReadChild(t, b, mod2)
	forgetUntil(t, "nothing open", func() bool { return len(s.uppers()) == s.fs.Stats().Kept })
	mustReadChild(t, a, mod)
	mustReadChild(t, b2, mod2)
	s.remount()
	mustReadChild(t, a, mod)
	mustReadChild(t, b, mod2)
}

// TestKeptCopyBound: the kept copies' disk usage stays within
// KeepCopies, least recently kept out first; negative keeps none.
func TestKeptCopyBound(t *testing.T) {
	s := newStoreWith(t, overlay.Options{Branch: "main", KeepCopies: 3 << 20})
	var files [][]byte
	for i := range 5 {
		data := seeded(1<<20, byte(10+i))
		files = append(files, data)
		writeChild(t, filepath.Join(s.mnt, fmt.Sprint(i)), data)
	}
	forgetUntil(t, "three copies kept", func() bool { return s.fs.Stats().Kept == 3 && len(s.uppers()) == 3 })
	if st := s.fs.Stats(); st.KeptBytes > 3<<20 {
		t.Fatalf("kept %d bytes, bound %d", st.KeptBytes, 3<<20)
	}
	for i, data := range files {
		mustReadChild(t, filepath.Join(s.mnt, fmt.Sprint(i)), data)
	}
	if got := s.fs.Stats().Reuses; got != 3 {
		t.Fatalf("reuses = %d, want 3 (the last files kept)", got)
	}

	s.unmount()
	s.opts.KeepCopies = -1
	s.mount()
	for i, data := range files {
		mustReadChild(t, filepath.Join(s.mnt, fmt.Sprint(i)), data)
	}
	forgetUntil(t, "no private copy left", func() bool { return len(s.uppers()) == 0 })
	if st := s.fs.Stats(); st.Kept != 0 || st.KeptBytes != 0 {
		t.Fatalf("KeepCopies -1 kept %d copies (%d bytes)", st.Kept, st.KeptBytes)
	}
}

// TestKeptCopyDamagedChunk: a file whose chunk is damaged in the store
// fails to read (EIO), before and after a forget, and leaves nothing
// kept to be served later.
func TestKeptCopyDamagedChunk(t *testing.T) {
	s := newStore(t)
	p := filepath.Join(s.mnt, "f")
	want := seeded(2<<20, 3)
	writeChild(t, p, want)
	s.unmount()
	raw, err := sql.Open("sqlite3", "file:"+s.dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var id, data []byte
	if err := raw.QueryRow(`SELECT id, data FROM objects WHERE kind = ? ORDER BY size DESC LIMIT 1`, int(cas.KindChunk)).Scan(&id, &data); err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if _, err := raw.Exec(`UPDATE objects SET data = ? WHERE id = ?`, data, id); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	s.mount()
	for i := range 2 {
		got, err := readChild(p)
		if err == nil || !strings.Contains(err.Error(), "Input/output error") {
			t.Fatalf("read %d of a file with a damaged chunk: %d bytes, %v; want EIO", i, len(got), err)
		}
		forgetUntil(t, "no private copy", func() bool { return len(s.uppers()) == 0 })
		if st := s.fs.Stats(); st.Kept != 0 || st.Reuses != 0 {
			t.Fatalf("damaged file: kept %d, reused %d", st.Kept, st.Reuses)
		}
	}
}

// TestKeptCopyNotForDeletedFiles: the private copy of a deleted file goes
// when the file is forgotten - kept, it would only cost a writeback of all
// of it (a download deleted after use) - while a file with a name keeps
// its copy.
func TestKeptCopyNotForDeletedFiles(t *testing.T) {
	s := newStore(t)
	gone, stays := filepath.Join(s.mnt, "gone"), filepath.Join(s.mnt, "stays")
	writeChild(t, gone, seeded(3<<20+5, 7))
	writeChild(t, stays, seeded(3<<20+9, 8))
	mustReadChild(t, stays, seeded(3<<20+9, 8))
	mustReadChild(t, gone, seeded(3<<20+5, 7))
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	forgetUntil(t, "only the named file's copy left", func() bool {
		return s.fs.Stats().Kept == 1 && len(s.uppers()) == 1
	})
}
