package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"golang.org/x/sys/unix"
)

// kernelAtLeast reports whether the running kernel's release is at least
// major.minor.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(unix.ByteSliceToString(u.Release[:]), ".", 3)
	if len(parts) < 2 {
		t.Fatalf("kernel release %q", u.Release)
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return ma > major || ma == major && mi >= minor
}

// TestProbeCtime: the probe tells a coarse filesystem (ramfs keeps the
// clock's tick) from a fine one (tmpfs has multigrain timestamps since
// Linux 6.13), leaves no file behind, and a device with no directory to
// probe in is taken as coarse and asked again next time.
func TestProbeCtime(t *testing.T) {
	testutil.RequireMount(t)
	base := t.TempDir()
	mount := func(fstype string) (string, uint64) {
		dir := filepath.Join(base, fstype)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("art-test", dir, fstype, unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
			t.Fatalf("mount %s: %v", fstype, err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			t.Fatal(err)
		}
		return dir, st.Dev
	}
	ram, ramDev := mount("ramfs")
	tmp, tmpDev := mount("tmpfs")

	if fine, ok := probeCtime(ram, ramDev); !ok || fine {
		t.Errorf("ramfs: probe = fine %v, ok %v; want coarse", fine, ok)
	}
	if fine, ok := probeCtime(tmp, tmpDev); !ok {
		t.Errorf("tmpfs: no probe made")
	} else if kernelAtLeast(t, 6, 13) && !fine {
		t.Errorf("tmpfs on Linux 6.13 or later: probe says coarse")
	}
	for _, d := range []string{ram, tmp} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("probe left %d entries in %s", len(left), d)
		}
	}
	// A probe directory on another device is not used: with one on the
	// device, the probe runs.
	if fineCtime(tmpDev, ram) {
		t.Errorf("tmpfs with only a ramfs directory to probe in: fine")
	}
	if want, _ := probeCtime(tmp, tmpDev); fineCtime(tmpDev, ram, tmp) != want {
		t.Errorf("tmpfs probed in its own directory: not %v", want)
	}
	if fineCtime(ramDev, ram) {
		t.Errorf("ramfs: fine")
	}
}
