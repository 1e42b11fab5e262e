package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"golang.org/x/sys/unix"
)

// smallFS mounts a tmpfs of size bytes on a fresh directory for the test
// (unmounted at its end) and returns the directory.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	testutil.RequireMount(t)
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mount a %s tmpfs: %v", size, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestRunDiskFull is issue 28's case 4, run as written: the store on a
// small file system, the sandbox fills it. A commit failure is never
// silent (docs/architecture.md, "Commit failure"): once the overlay cannot
// journal, later changes fail (the shell's `&& echo` does not run), reads
// still work, every file whose close succeeded is in the store byte for
// byte, the summary names what was not kept, the run is recorded failed
// (not left for the next run as a killed one), and the read verbs work
// while the disk is full.
func TestRunDiskFull(t *testing.T) {
	ws, _ := overlayWorkspace(t)
	db := filepath.Join(smallFS(t, "24m"), "s.db")
	// cp checks its close: "closed NAME SUM" means the sandbox was told
	// the file is written.
	script := `
put() { head -c "$2" /dev/urandom > /tmp/src && cp /tmp/src "$1" && echo "closed $1 $(sha256sum < /tmp/src | cut -d' ' -f1)"; }
put small.txt 100
put mid.bin 300000
put big1.bin 9437184
put more.bin 20971520 || echo "more.bin failed"
echo after > keep1.txt && echo ok1
echo after > keep2.txt && echo ok2
echo after > keep3.txt && echo ok3
mkdir newdir && echo okmkdir
mv small.txt moved.txt && echo okmv
rm mid.bin && echo okrm
cat small.txt big1.bin > /dev/null && echo readok
ls small.txt mid.bin big1.bin > /dev/null && echo lsok
`
	script = strings.ReplaceAll(strings.TrimSpace(script), "\n", "; ") // one line in art log
	r := artRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", script)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range []string{"ok1", "ok2", "ok3", "okmkdir", "okmv", "okrm", "closed more.bin"} {
		if regexp.MustCompile(`(?m)^` + bad + `\b`).MatchString(r.stdout) {
			t.Errorf("%q printed: a change after the failure succeeded\nstdout: %s\nstderr: %s", bad, r.stdout, r.stderr)
		}
	}
	for _, good := range []string{"more.bin failed", "readok", "lsok"} {
		if !strings.Contains(r.stdout, good+"\n") {
			t.Errorf("%q not printed\nstdout: %s\nstderr: %s", good, r.stdout, r.stderr)
		}
	}
	closed := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^closed (\S+) ([0-9a-f]{64})$`).FindAllStringSubmatch(r.stdout, -1) {
		closed[m[1]] = m[2]
	}
	for _, name := range []string{"small.txt", "mid.bin", "big1.bin"} {
		if closed[name] == "" {
			t.Fatalf("%s was not closed successfully before the disk filled\nstdout: %s\nstderr: %s", name, r.stdout, r.stderr)
		}
	}
	// The summary: why, what was not kept, what was refused, and that the
	// run is recorded failed.
	for _, re := range []string{
		`(?m)^art: the store could not keep everything the sandbox wrote: .*no space left on device$`,
		`(?m)^art: not kept \(\d+ paths?\): .*ws/more\.bin`,
		// (more.bin's last writes may be refused too, as may its close.)
		`(?m)^art: refused after the failure \(\d+ changes\): (ws/more\.bin, )?ws/keep1\.txt, ws/keep2\.txt, ws/keep3\.txt, ws/newdir, ws/small\.txt, ws/mid\.bin$`,
		`(?m)^art: exit 0 in [0-9.]+m?s; the run is recorded as failed; snapshot [0-9a-f]{12} on branch main holds what the store kept$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "left for the next run") {
		t.Errorf("the session was left behind:\n%s", r.stderr)
	}

	// The read verbs on the full disk.
	unfill := fill(t, filepath.Dir(db))
	for _, args := range [][]string{{"status"}, {"log"}, {"verify"}, {"ls", "main:ws"}, {"cat", "main:ws/small.txt"}, {"diff", "main~1", "main"}} {
		args = append(args, "-d", db)
		if r := artRun(t, args...); r.code != 0 {
			t.Errorf("art %s on a full disk: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	log := mustRun(t, "log", "-d", db).stdout
	if !regexp.MustCompile(`(?m)^op \d+ .* run +sh -c .*\[failed: no space left on device; \d+ paths? not kept, \d+ changes refused\]$`).MatchString(log) {
		t.Errorf("art log does not show the run as failed:\n%s", log)
	}
	// Every file the sandbox closed successfully, byte for byte.
	for name, sum := range closed {
		data := mustRun(t, "cat", "-d", db, "main:ws/"+name).stdout
		if got := sha256.Sum256([]byte(data)); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s in the store (%d bytes) differs from what the sandbox closed", name, len(data))
		}
	}
	unfill()

	// The session is over: the next one finds nothing to clean up.
	r = artRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "true")
	if r.code != 0 || strings.Contains(r.stderr, "killed session") {
		t.Fatalf("the run after: exit %d\nstderr: %s", r.code, r.stderr)
	}
}
