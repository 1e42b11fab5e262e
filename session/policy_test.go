package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBindsFileNeverThroughSymlink: policy is read only from real
// directories and files of the host workspace, owned by the user or root
// and not writable by anyone else.
func TestBindsFileNeverThroughSymlink(t *testing.T) {
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, ws, elsewhere string)
		refuse  string // "" = read
	}{
		{"plain", func(t *testing.T, ws, _ string) { writePolicy(t, filepath.Join(ws, ".art/config"), 0o644) }, ""},
		{"missing", func(t *testing.T, ws, _ string) {}, ""},
		{"art-symlink", func(t *testing.T, ws, elsewhere string) {
			writePolicy(t, filepath.Join(elsewhere, "config"), 0o644)
			symlink(t, elsewhere, filepath.Join(ws, ".art"))
		}, "symbolic link"},
		{"config-symlink", func(t *testing.T, ws, elsewhere string) {
			writePolicy(t, filepath.Join(elsewhere, "config"), 0o644)
			mkdir(t, filepath.Join(ws, ".art"))
			symlink(t, filepath.Join(elsewhere, "config"), filepath.Join(ws, ".art/config"))
		}, "symbolic link"},
		{"file-symlink", func(t *testing.T, ws, elsewhere string) {
			writePolicy(t, filepath.Join(elsewhere, "config"), 0o644)
			mkdir(t, filepath.Join(ws, ".art/config"))
			symlink(t, filepath.Join(elsewhere, "config/binds.json"), filepath.Join(ws, ".art/config/binds.json"))
		}, "symbolic link"},
		{"world-writable", func(t *testing.T, ws, _ string) { writePolicy(t, filepath.Join(ws, ".art/config"), 0o666) }, "anyone may write"},
		{"foreign-owner", func(t *testing.T, ws, _ string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			writePolicy(t, filepath.Join(ws, ".art/config"), 0o644)
			if err := os.Chown(filepath.Join(ws, ".art/config/binds.json"), 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}, "not by you"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			ws, elsewhere := filepath.Join(base, "ws"), filepath.Join(base, "elsewhere")
			mkdir(t, ws)
			c.prepare(t, ws, elsewhere)
			binds, err := readBindsFile(ws)
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse == "" && len(binds) != 0:
				t.Fatalf("binds %v, want none", binds)
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("error %v, want one saying %q", err, c.refuse)
			}
		})
	}
}

func writePolicy(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	mkdir(t, dir)
	p := filepath.Join(dir, "binds.json")
	if err := os.WriteFile(p, []byte(`{"binds":[]}`), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// TestSudoUser: the one reader of $SUDO_UID/$SUDO_GID takes a user above
// root only, and the gid defaults to the uid.
func TestSudoUser(t *testing.T) {
	for _, c := range []struct {
		uid, gid     string
		wantU, wantG int
		ok           bool
	}{
		{"1000", "1001", 1000, 1001, true},
		{"1000", "", 1000, 1000, true},
		{"1000", "0", 1000, 1000, true},
		{"0", "0", 0, 0, false},
		{"", "", 0, 0, false},
		{"bob", "", 0, 0, false},
	} {
		t.Setenv("SUDO_UID", c.uid)
		t.Setenv("SUDO_GID", c.gid)
		u, g, ok := SudoUser()
		if u != c.wantU || g != c.wantG || ok != c.ok {
			t.Errorf("SUDO_UID=%q SUDO_GID=%q: %d, %d, %v; want %d, %d, %v", c.uid, c.gid, u, g, ok, c.wantU, c.wantG, c.ok)
		}
	}
}
