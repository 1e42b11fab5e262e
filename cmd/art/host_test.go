package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/migrations"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		out := mustArt(t, args...)
		if !strings.HasPrefix(out, "art ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("art %s: %q lacks the version or the Go version", args, out)
		}
		if want := "store schema " + strconv.Itoa(migrations.Latest()); !strings.Contains(out, want) {
			t.Errorf("art %s: %q lacks %q", args, out, want)
		}
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(mustArt(t, "version", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.StoreSchema != migrations.Latest() || v.Go != runtime.Version() || v.Version == "" {
		t.Errorf("art version --json = %+v", v)
	}
	if _, errs, code := art(t, "version", "extra"); code != exitUsage || !strings.Contains(errs, "no arguments") {
		t.Errorf("art version extra: exit %d, %q", code, errs)
	}
}

// The original art's documentation spells -m as --workspace on push and pull.
func TestWorkspaceAlias(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "--db", db, "--workspace", ws)
	out := filepath.Join(t.TempDir(), "ws")
	mustArt(t, "pull", "-q", "--db", db, "--workspace", out)
	if b, err := os.ReadFile(filepath.Join(out, "main.py")); err != nil || string(b) != "print('hello')\n" {
		t.Fatalf("pulled main.py = %q, %v", b, err)
	}
}

// nobodyArt returns a copy of the art binary that uid 65534 can run and a
// directory that user owns (skips unless root).
func nobodyArt(t *testing.T) (bin, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the binary as another user")
	}
	dir = t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // the test's own temp root
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(artBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "art")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by others", d)
		}
	}
	return bin, dir
}

func asNobody(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

// art doctor as a user who cannot open /dev/fuse says so, says what it
// disables and how to fix it, and still exits 0: direct mode works.
func TestDoctorWithoutFUSE(t *testing.T) {
	testutil.Require(t, "bwrap")
	bin, _ := nobodyArt(t)
	out, err := asNobody(exec.Command(bin, "doctor")).CombinedOutput()
	if err != nil {
		t.Fatalf("art doctor as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"FUSE              missing", "direct mode (no -d) still works", "fix: make /dev/fuse usable", "user namespaces   ok"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("art doctor as nobody lacks %q:\n%s", want, out)
		}
	}
}

// A user who cannot open /dev/fuse gets one line that says so and what
// to do, not fusermount's "exited with code 256".
func TestNoFUSEHint(t *testing.T) {
	testutil.Require(t, "bwrap")
	bin, dir := nobodyArt(t)
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err == nil {
		f.Close()
		var st syscall.Stat_t
		if syscall.Stat("/dev/fuse", &st) == nil && st.Mode&0o006 == 0o006 {
			t.Skip("/dev/fuse is open to everyone here")
		}
	}
	ws := filepath.Join(dir, "ws")
	run := func(args ...string) (string, int) {
		cmd := asNobody(exec.Command(bin, args...))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "XDG_RUNTIME_DIR=", "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"))
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	for _, p := range []string{ws, filepath.Join(ws, "a.txt")} {
		os.Chown(p, 65534, 65534)
	}
	if out, code := run("push", "-q", "-m", "ws", "-d", "ws.db"); code != 0 {
		t.Fatalf("push as nobody: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"mount", "-d", "ws.db", "mnt"}, {"run", "-d", "ws.db", "-m", "ws", "-i=false", "--", "true"}} {
		os.Mkdir(filepath.Join(dir, "mnt"), 0o755)
		os.Chown(filepath.Join(dir, "mnt"), 65534, 65534)
		out, code := run(args...)
		if code != exitFailure || !strings.Contains(out, "FUSE is not available to this user") || !strings.Contains(out, "direct mode") {
			t.Errorf("art %s as nobody: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// A user who may open /dev/fuse runs sessions with history as
// themselves: fusermount3 mounts, the sandbox runs as that user, and the
// run is journaled. (CI runs as root; this keeps the non-root path
// tested there.)
func TestNonRootRun(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.RequireFUSE(t)
	bin, dir := nobodyArt(t)
	// /dev/fuse open to the nobody group for this test only.
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/fuse", &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown("/dev/fuse", -1, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("/dev/fuse", os.FileMode(st.Mode&0o777|0o060)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Chown("/dev/fuse", -1, int(st.Gid))
		os.Chmod("/dev/fuse", os.FileMode(st.Mode&0o777))
	})
	ws := filepath.Join(dir, "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	for _, p := range []string{ws, filepath.Join(ws, "a.txt")} {
		os.Chown(p, 65534, 65534)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := asNobody(exec.Command(bin, args...))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "XDG_RUNTIME_DIR=", "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("art %s as nobody: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("run", "-d", "ws.db", "-m", "ws", "-i=false", "--", "sh", "-c", "id -u; cat a.txt; echo b > b.txt")
	if !strings.Contains(out, "65534\na\n") || !strings.Contains(out, "1 paths changed") {
		t.Fatalf("art run -d as nobody:\n%s", out)
	}
	if ls := run("ls", "-d", "ws.db", "-r", "main"); !strings.Contains(ls, "ws/b.txt") {
		t.Fatalf("the run's snapshot lacks b.txt:\n%s", ls)
	}
}

// As root, a direct-mode run on a workspace the sandbox's uid cannot
// write says so in one line, with what to do; a workspace under a 0700
// parent (/root/proj) still runs (sandbox stages the bind).
func TestDirectModeRootOwnedWorkspace(t *testing.T) {
	testutil.Require(t, "bwrap")
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	base := t.TempDir() // 0700, root's: what bwrap alone could not get through
	ws := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(ws, "f"), "hello\n")
	cmd := exec.Command(artBinary(t), "-m", ws, "-i=false", "--", "cat", "f")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello") {
		t.Fatalf("art -m %s -- cat f: %v\n%s", ws, err, out)
	}
	if !strings.Contains(string(out), "cannot write "+ws) || !strings.Contains(string(out), "-d FILE") {
		t.Errorf("no one-line warning about the unwritable workspace:\n%s", out)
	}
}
