package overlay_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
)

// Real programs run inside the mount, then the store is remounted and the
// programs' own consistency checks run again.

// needTool skips t unless name is installed.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// sh runs a program in dir with a private HOME and returns its output;
// a failure fails the test with the output.
//
// The test process is the file system's daemon, and a Go process must not
// touch its own mount between fork and exec: os/exec forks with vfork
// holding its P (no syscall state), so a GC stop-the-world waits for it
// while the child waits for the daemon (a chdir into the mount, or an exec
// of a binary in it). So the child is /bin/sh started outside the mount,
// and the shell, a process of its own, goes into dir and execs the program.
func sh(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `cd "$1" && shift && exec "$@"`, "sh", dir, name}, args...)...)
	cmd.Dir = "/"
	home := filepath.Join(buildDir(t), "home")
	os.MkdirAll(home, 0o700)
	cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		"GIT_AUTHOR_NAME=art", "GIT_AUTHOR_EMAIL=art@example.com",
		"GIT_COMMITTER_NAME=art", "GIT_COMMITTER_EMAIL=art@example.com",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("%s %.40q took %v", filepath.Base(name), strings.Join(args, " "), d.Round(time.Millisecond))
	}
	return out.String()
}

func TestProgramGit(t *testing.T) {
	git := needTool(t, "git")
	s := newStore(t)

	// A source repository outside the mount, with some history.
	src := t.TempDir()
	sh(t, src, nil, git, "init", "-q", "-b", "main")
	for i := 0; i < 5; i++ {
		writeFile(t, filepath.Join(src, fmt.Sprintf("f%d.txt", i)), strings.Repeat(fmt.Sprintf("line %d\n", i), 100*(i+1)))
		os.MkdirAll(filepath.Join(src, "sub", fmt.Sprint(i)), 0o755)
		writeFile(t, filepath.Join(src, "sub", fmt.Sprint(i), "x"), fmt.Sprint(i))
		sh(t, src, nil, git, "add", "-A")
		sh(t, src, nil, git, "commit", "-q", "-m", fmt.Sprintf("commit %d", i))
	}
	srcHead := strings.TrimSpace(sh(t, src, nil, git, "rev-parse", "HEAD"))

	// A new repository made in the mount.
	repo := filepath.Join(s.mnt, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	sh(t, repo, nil, git, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "README"), "hello\n")
	if err := os.MkdirAll(filepath.Join(repo, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "a/b/c/deep.txt"), strings.Repeat("deep\n", 5000))
	if err := os.Symlink("a/b/c/deep.txt", filepath.Join(repo, "link")); err != nil {
		t.Fatal(err)
	}
	sh(t, repo, nil, git, "add", "-A")
	sh(t, repo, nil, git, "commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(repo, "README"), "hello again\n")
	sh(t, repo, nil, git, "commit", "-q", "-am", "second")
	sh(t, repo, nil, git, "gc", "-q")
	if got := sh(t, repo, nil, git, "status", "--porcelain"); got != "" {
		t.Errorf("git status after commit: %q, want clean", got)
	}
	sh(t, repo, nil, git, "fsck", "--strict", "--no-progress")
	repoHead := strings.TrimSpace(sh(t, repo, nil, git, "rev-parse", "HEAD"))

	// A clone into the mount.
	sh(t, s.mnt, nil, git, "clone", "-q", "--no-hardlinks", src, "clone")
	clone := filepath.Join(s.mnt, "clone")
	if got := strings.TrimSpace(sh(t, clone, nil, git, "rev-parse", "HEAD")); got != srcHead {
		t.Errorf("clone HEAD %s, source %s", got, srcHead)
	}
	sh(t, clone, nil, git, "fsck", "--strict", "--no-progress")
	if got := sh(t, clone, nil, git, "status", "--porcelain"); got != "" {
		t.Errorf("git status in the clone: %q, want clean", got)
	}
	// The work tree equals the source's (git checks out with the same
	// modes and content; mtimes are checkout times, so compare those off).
	if d := testutil.DiffTrees(treeNoTimes(t, src), treeNoTimes(t, clone)); d != "" {
		t.Errorf("clone work tree (second) differs from the source (first):\n%s", d)
	}

	s.remount()
	sh(t, repo, nil, git, "fsck", "--strict", "--no-progress")
	sh(t, clone, nil, git, "fsck", "--strict", "--no-progress")
	for _, r := range []struct{ dir, head string }{{repo, repoHead}, {clone, srcHead}} {
		if got := strings.TrimSpace(sh(t, r.dir, nil, git, "rev-parse", "HEAD")); got != r.head {
			t.Errorf("%s: HEAD after remount %s, want %s", r.dir, got, r.head)
		}
		if got := sh(t, r.dir, nil, git, "status", "--porcelain"); got != "" {
			t.Errorf("%s: git status after remount: %q, want clean", r.dir, got)
		}
	}
	s.unmount()
	s.verify()
}

func TestProgramSQLite(t *testing.T) {
	sqlite := needTool(t, "sqlite3")
	s := newStore(t)
	db := filepath.Join(s.mnt, "data", "app.db")
	if err := os.Mkdir(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `PRAGMA journal_mode=WAL;
CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, b BLOB);
CREATE INDEX t_v ON t (v);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
INSERT INTO t (v, b) SELECT 'value ' || i, randomblob(i % 500) FROM n;
COMMIT;
BEGIN;
UPDATE t SET v = v || ' updated' WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
COMMIT;
PRAGMA integrity_check;
SELECT count(*), sum(length(b)) FROM t;
`
	out := sh(t, filepath.Dir(db), nil, sqlite, db, script)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "wal" || lines[1] != "ok" {
		t.Fatalf("sqlite3 output %q, want wal, ok, counts", out)
	}
	counts := lines[2]

	// A second process writes while the WAL holds uncheckpointed frames.
	sh(t, filepath.Dir(db), nil, sqlite, db, "PRAGMA wal_autocheckpoint=0; INSERT INTO t (v) VALUES ('late');")
	out = sh(t, filepath.Dir(db), nil, sqlite, db, "PRAGMA integrity_check; SELECT count(*) FROM t WHERE v = 'late';")
	if got := strings.TrimSpace(out); got != "ok\n1" {
		t.Fatalf("after a second writer: %q", got)
	}

	s.remount()
	out = sh(t, filepath.Dir(db), nil, sqlite, db, "PRAGMA integrity_check; SELECT count(*), sum(length(b)) FROM t WHERE v != 'late'; SELECT count(*) FROM t WHERE v = 'late';")
	if got, want := strings.TrimSpace(out), "ok\n"+counts+"\n1"; got != want {
		t.Errorf("after remount sqlite3 says %q, want %q", got, want)
	}
	s.unmount()
	s.verify()
}

func TestProgramTar(t *testing.T) {
	tar := needTool(t, "tar")
	const goSrc = "/usr/local/go/src"
	if _, err := os.Stat(filepath.Join(goSrc, "net")); err != nil {
		t.Skipf("no Go source tree to archive: %v", err)
	}
	s := newStore(t)
	work := t.TempDir()
	ball := filepath.Join(work, "net.tar")
	sh(t, goSrc, nil, tar, "--format=posix", "-cf", ball, "net")
	plain := filepath.Join(work, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	sh(t, plain, nil, tar, "-xf", ball)
	sh(t, s.mnt, nil, tar, "-xf", ball)
	want := testutil.DescribeTree(t, plain, testutil.TreeOptions{DirMTimes: true})
	if len(want) < 100 {
		t.Fatalf("the archive holds only %d entries", len(want))
	}
	if d := testutil.DiffTrees(want, testutil.DescribeTree(t, s.mnt, testutil.TreeOptions{DirMTimes: true})); d != "" {
		t.Fatalf("tar x on a plain directory (first) and on art (second) differ:\n%s", d)
	}

	s.remount()
	if d := testutil.DiffTrees(want, testutil.DescribeTree(t, s.mnt, testutil.TreeOptions{DirMTimes: true})); d != "" {
		t.Fatalf("after remount, plain (first) and art (second) differ:\n%s", d)
	}
	sh(t, s.mnt, nil, "rm", "-rf", "net")
	if des, err := os.ReadDir(s.mnt); err != nil || len(des) != 0 {
		t.Fatalf("after rm -rf the mount holds %v (%v)", des, err)
	}
	s.remount()
	if des, err := os.ReadDir(s.mnt); err != nil || len(des) != 0 {
		t.Fatalf("after rm -rf and remount the mount holds %v (%v)", des, err)
	}
	s.unmount()
	s.verify()
}

func TestProgramGoBuild(t *testing.T) {
	goTool := needTool(t, "go")
	s := newStore(t)
	mod := filepath.Join(s.mnt, "hello")
	if err := os.MkdirAll(filepath.Join(mod, "greet"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mod, "go.mod"), "module example.com/hello\n\ngo 1.22\n")
	writeFile(t, filepath.Join(mod, "greet", "greet.go"), "package greet\n\n// Hello greets.\nfunc Hello() string { return \"hello from art\" }\n")
	writeFile(t, filepath.Join(mod, "main.go"), "package main\n\nimport \"example.com/hello/greet\"\n\nfunc main() { println(greet.Hello()) }\n")
	// A cache outside the mount shared by the process's tests (removed
	// after them): a cold one costs a compile of the runtime (seconds),
	// which is not what is tested.
	env := []string{"GOCACHE=" + filepath.Join(buildDir(t), "gocache"), "GOFLAGS=-mod=mod",
		"GOPROXY=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOPATH=" + t.TempDir(), "GOWORK=off"}
	sh(t, mod, env, goTool, "vet", "./...")
	sh(t, mod, env, goTool, "build", "-o", "hello", ".")
	bin := filepath.Join(mod, "hello")
	if got := sh(t, mod, nil, bin); got != "hello from art\n" {
		t.Fatalf("the built program says %q", got)
	}
	before, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}

	s.remount()
	after, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("the binary changed across remount (%d bytes, then %d)", len(before), len(after))
	}
	if got := sh(t, mod, nil, bin); got != "hello from art\n" {
		t.Fatalf("after remount the built program says %q", got)
	}
	// A rebuild finds everything up to date and leaves the same binary.
	sh(t, mod, env, goTool, "build", "-o", "hello", ".")
	if again, _ := os.ReadFile(bin); !bytes.Equal(again, before) {
		t.Error("a rebuild after remount made a different binary")
	}
	s.unmount()
	s.verify()
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeNoTimes is DescribeTree without the .git directory and with file
// and symlink mtimes left out.
func treeNoTimes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range testutil.DescribeTree(t, dir, testutil.TreeOptions{}) {
		if k == ".git" || strings.HasPrefix(k, ".git/") {
			continue
		}
		if i := strings.Index(v, " mtime="); i >= 0 {
			j := strings.IndexByte(v[i+1:], ' ')
			if j < 0 {
				v = v[:i]
			} else {
				v = v[:i] + v[i+1+j:]
			}
		}
		out[k] = v
	}
	return out
}

// buildDir is the test process's directory for what its tests share
// (testutil.BuildDir: removed after the tests).
func buildDir(t *testing.T) string {
	t.Helper()
	d, err := testutil.BuildDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
