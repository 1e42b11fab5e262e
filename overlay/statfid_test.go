package overlay_test

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"golang.org/x/sys/unix"
)

// synthBase is overlay's: where the inode numbers of nodes without a host
// one begin.
const synthBase = 1 << 52

// gitStat is what git's index compares of a file (core.checkStat=default).
type gitStat struct {
	ino, uid, gid    uint64
	ctime, mtime, sz int64
}

func statOf(t *testing.T, p string) gitStat {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return gitStat{ino: st.Ino, uid: uint64(st.Uid), gid: uint64(st.Gid),
		ctime: st.Ctim.Nano(), mtime: st.Mtim.Nano(), sz: st.Size}
}

// newGitLower makes a git repository on the host whose index git has
// refreshed there (files old enough that neither git nor the import
// takes them as racy), then captures it and mounts it with it as lower.
func newGitLower(t *testing.T, git string) *lowerSetup {
	testutil.RequireFUSE(t)
	base := t.TempDir()
	s := &lowerSetup{t: t, dbPath: filepath.Join(base, "s.db"), ws: filepath.Join(base, "ws"), mnt: filepath.Join(base, "mnt")}
	for i := 0; i < 4; i++ {
		if err := os.MkdirAll(filepath.Join(s.ws, fmt.Sprintf("d%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		writeFile(t, filepath.Join(s.ws, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d.txt", i)), strings.Repeat(fmt.Sprintf("line %d\n", i), i+1))
	}
	writeFile(t, filepath.Join(s.ws, "top.txt"), "top\n")
	if err := os.Symlink("top.txt", filepath.Join(s.ws, "link")); err != nil {
		t.Fatal(err)
	}
	sh(t, s.ws, nil, git, "init", "-q", "-b", "main")
	filepath.Walk(s.ws, func(p string, _ os.FileInfo, _ error) error {
		if !strings.Contains(p, "/.git") {
			unix.Lutimes(p, []unix.Timeval{unix.NsecToTimeval(testTime.UnixNano()), unix.NsecToTimeval(testTime.UnixNano())})
		}
		return nil
	})
	sh(t, s.ws, nil, git, "add", "-A")
	sh(t, s.ws, nil, git, "commit", "-q", "-m", "first")
	if got := sh(t, s.ws, nil, git, "status", "--porcelain"); got != "" {
		t.Fatalf("host git status: %q", got)
	}
	os.Mkdir(s.mnt, 0o755)
	s.mount(true)
	t.Cleanup(func() { s.unmount() })
	return s
}

// TestStatFidelityGit: a repository captured from the host presents git
// the stat data its host index recorded, so git status in the mount
// re-reads nothing and leaves the index as the host wrote it; a file
// changed in the mount stops matching, and no two files share a number.
func TestStatFidelityGit(t *testing.T) {
	git := needTool(t, "git")
	s := newGitLower(t, git)
	repo := filepath.Join(s.mnt, "ws")
	hostDebug := sh(t, s.ws, nil, git, "ls-files", "--debug")
	hostIndex, err := os.ReadFile(filepath.Join(s.ws, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	tracked := strings.Fields(sh(t, s.ws, nil, git, "ls-files"))
	if len(tracked) != 22 {
		t.Fatalf("host tracks %d files: %v", len(tracked), tracked)
	}
	same := func(when string) {
		t.Helper()
		for _, p := range tracked {
			if h, m := statOf(t, filepath.Join(s.ws, p)), statOf(t, filepath.Join(repo, p)); h != m {
				t.Errorf("%s: %s: host %+v, mount %+v", when, p, h, m)
			}
		}
	}
	same("mounted")
	// The workspace's records come from one scan (statfid.go
	// recordTree), not a query per directory: that and the mount root's.
	if q := s.fsys.Stats().RecordQueries; q != 2 {
		t.Errorf("%d import records queries for 5 directories, want 2", q)
	}
	before := s.fsys.Stats()
	if got := sh(t, repo, nil, git, "status", "--porcelain"); got != "" {
		t.Fatalf("git status in the mount: %q, want clean", got)
	}
	// git re-reads a file whose stat differs from its index entry: none
	// was opened, and the index it would have rewritten is the host's.
	// (Its own files under .git are racy, read from the store.)
	if st := s.fsys.Stats(); st.LowerOpens != before.LowerOpens {
		t.Errorf("git status read files: before %+v, after %+v", before, st)
	}
	if b, err := os.ReadFile(filepath.Join(repo, ".git/index")); err != nil || !bytes.Equal(b, hostIndex) {
		t.Errorf("git status rewrote the index (%v)", err)
	}
	// (--debug prints the index's entries: the host's st_dev included.)
	if got := sh(t, repo, nil, git, "ls-files", "--debug"); got != hostDebug {
		t.Errorf("git ls-files --debug in the mount:\n%s\nhost:\n%s", got, hostDebug)
	}

	// A changed file reports its own ctime (git must look at it), a new
	// one a number from the synthetic range.
	changed := filepath.Join(repo, "d1/f1.txt")
	if err := os.WriteFile(changed, []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "new.txt"), "new\n")
	if h, m := statOf(t, filepath.Join(s.ws, "d1/f1.txt")), statOf(t, changed); h.ctime == m.ctime || h.mtime == m.mtime {
		t.Errorf("changed file: host %+v, mount %+v", h, m)
	}
	if m := statOf(t, filepath.Join(repo, "new.txt")); m.ino < synthBase {
		t.Errorf("new file's inode number %d is in the host range", m.ino)
	}
	if got := sh(t, repo, nil, git, "status", "--porcelain"); got != " M d1/f1.txt\n?? new.txt\n" {
		t.Errorf("git status after a change: %q", got)
	}
	uniqueInos(t, repo)

	// Another mount of the branch: unchanged files still match the host.
	s.remount()
	for _, p := range tracked {
		h, m := statOf(t, filepath.Join(s.ws, p)), statOf(t, filepath.Join(repo, p))
		if (p == "d1/f1.txt") != (h != m) {
			t.Errorf("after remount: %s: host %+v, mount %+v", p, h, m)
		}
	}
	uniqueInos(t, repo)
}

// uniqueInos fails t if two paths below dir that are not hard links of
// one file report one inode number.
func uniqueInos(t *testing.T, dir string) {
	t.Helper()
	seen := map[uint64]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Error(err)
			return nil
		}
		if q, ok := seen[st.Ino]; ok && st.Nlink == 1 {
			t.Errorf("%s and %s both report inode number %d", q, p, st.Ino)
		}
		seen[st.Ino] = p
		return nil
	})
}

// TestStatFidelityHostile: import records whose host inode numbers are
// 0, the root's, in the synthetic range, out of int64's range, or one
// number for several files never make two files report one number or a
// file report the root's; the files read as they are.
func TestStatFidelityHostile(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 8; i++ {
		files[fmt.Sprintf("f%d", i)] = fmt.Sprintf("content %d\n", i)
	}
	files["neg/g"] = "g\n" // a row the driver cannot even read: its directory has no records
	s := newLower(t, files)
	s.unmount()
	raw, err := sql.Open("sqlite3", "file:"+s.dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	var f0 int64
	if err := raw.QueryRow(`SELECT host_ino FROM import_cache WHERE path = ?`, []byte("/ws/f0")).Scan(&f0); err != nil {
		t.Fatal(err)
	}
	for p, ino := range map[string]int64{"f1": 0, "f2": 1, "f3": synthBase + 5, "neg/g": -1, "f5": f0, "f6": f0, "f7": 1 << 62} {
		if _, err := raw.Exec(`UPDATE import_cache SET host_ino = ? WHERE path = ?`, ino, []byte("/ws/"+p)); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	s.mount(false)
	mnt := filepath.Join(s.mnt, "ws")
	for p, c := range files {
		if got := s.read(p); got != c {
			t.Errorf("%s = %q, want %q", p, got, c)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(mnt, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Ino == 1 || st.Ino == 0 {
			t.Errorf("%s reports inode number %d", p, st.Ino)
		}
	}
	uniqueInos(t, s.mnt)
	// f0, f5 and f6 name one host number: exactly one of them reports it.
	n := 0
	for _, p := range []string{"f0", "f5", "f6"} {
		if uint64(f0) == statOf(t, filepath.Join(mnt, p)).ino {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d files report host inode number %d, want 1", n, f0)
	}
	if st := statOf(t, filepath.Join(mnt, "neg/g")); st.ino < synthBase {
		t.Errorf("neg/g reports %d", st.ino)
	}
	ents, err := os.ReadDir(mnt)
	if err != nil || len(ents) != len(files) { // f0-f7 and neg
		t.Fatalf("listing: %v %v", ents, err)
	}
	// READDIR's d_ino is what stat reports.
	var buf [8192]byte
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	nb, err := unix.Getdents(fd, buf[:])
	if err != nil {
		t.Fatal(err)
	}
	// linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
	for off := 0; off < nb; {
		ino := binary.LittleEndian.Uint64(buf[off:])
		reclen := int(binary.LittleEndian.Uint16(buf[off+16:]))
		name := unix.ByteSliceToString(buf[off+19 : off+reclen])
		if name != "." && name != ".." {
			if st := statOf(t, filepath.Join(mnt, name)); st.ino != ino {
				t.Errorf("%s: d_ino %d, st_ino %d", name, ino, st.ino)
			}
		}
		off += reclen
	}
}
