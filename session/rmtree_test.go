package session

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRemoveTreeLeavesMounts(t *testing.T) {
	base := t.TempDir()
	dir, other := filepath.Join(base, "session"), filepath.Join(base, "other")
	writeFile(t, filepath.Join(dir, "net", "sock"), "x")
	writeFile(t, filepath.Join(dir, "lock"), "")
	writeFile(t, filepath.Join(other, "precious"), "keep me")
	if err := os.Mkdir(filepath.Join(dir, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	// A bind mount of the same filesystem: same st_dev, another mount.
	if err := unix.Mount(other, filepath.Join(dir, "home"), "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v (needs root)", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(dir, "home"), unix.MNT_DETACH) })
	if err := removeTree(dir); err == nil {
		t.Error("removeTree reported no error with a mount point inside")
	}
	if b, err := os.ReadFile(filepath.Join(other, "precious")); err != nil || string(b) != "keep me" {
		t.Fatalf("removeTree deleted through a mount: %q %v", b, err)
	}
	for _, gone := range []string{"net", "lock", "link"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", gone, err)
		}
	}
	if err := unix.Unmount(filepath.Join(dir, "home"), 0); err != nil {
		t.Fatal(err)
	}
	if err := removeTree(dir); err != nil {
		t.Fatalf("removeTree once unmounted: %v", err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s not removed: %v", dir, err)
	}
	if err := removeTree(dir); err != nil {
		t.Errorf("removeTree of a missing dir: %v", err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
