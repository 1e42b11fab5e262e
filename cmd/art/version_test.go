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

// art doctor as a user who cannot open /dev/fuse says so, says what it
// disables and how to fix it, and still exits 0: direct mode works.
func TestDoctorWithoutFUSE(t *testing.T) {
	testutil.Require(t, "bwrap")
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the binary as another user")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // the test's own temp root
	bin := filepath.Join(dir, "art")
	b, err := os.ReadFile(artBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) { // nobody must reach the binary
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by others", d)
		}
	}
	cmd := exec.Command(bin, "doctor")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("art doctor as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"FUSE              missing", "direct mode (no -d) still works", "fix: make /dev/fuse usable", "user namespaces   ok"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("art doctor as nobody lacks %q:\n%s", want, out)
		}
	}
}
