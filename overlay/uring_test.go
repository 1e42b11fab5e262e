package overlay_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/overlay"
)

// As root on a kernel with FUSE over io_uring, a mount answers its
// requests over the rings (and says so); with ART_FUSE_URING=0 through
// /dev/fuse alone. The same work gives the same tree either way.
func TestMountServesOverURing(t *testing.T) {
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("io_uring serving is for root's direct mounts")
	}
	testutil.Require(t, "fuse-uring")
	work := "mkdir -p d/e && echo one > d/e/f && cat d/e/f && mv d/e/f d/g && rm -r d/e && ls -R"
	want := "one\n.:\nd\n\n./d:\ng\n"
	for _, tc := range []struct {
		env   string
		rings bool
	}{{"", true}, {"0", false}} {
		t.Run("ART_FUSE_URING="+tc.env, func(t *testing.T) {
			t.Setenv("ART_FUSE_URING", tc.env)
			_, mnt, fsys := mount(t)
			cmd := exec.Command("sh", "-ec", work)
			cmd.Dir = mnt // a child process: the daemon's own never touches its mount
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != want {
				t.Fatalf("%s: %v\n%q, want %q", work, err, out, want)
			}
			served := overlay.RingsServed(fsys)
			listed := slices.Contains(fsys.FastPaths(), "requests over io_uring (a queue per CPU)")
			if tc.rings && (served < 10 || !listed) {
				t.Errorf("over io_uring: %d requests over the rings, listed in FastPaths %v", served, listed)
			}
			if !tc.rings && (served != -1 || listed) {
				t.Errorf("ART_FUSE_URING=0: rings served %d, listed %v", served, listed)
			}
		})
	}
}

// The POSIX cases again with the classic transport, which every mount
// not made by root uses (as root the rings serve TestPosix).
func TestPosixClassicTransport(t *testing.T) {
	t.Setenv("ART_FUSE_URING", "0")
	runPosix(t)
}
