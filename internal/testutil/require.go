package testutil

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/internal/minioserver"
)

// Require skips t unless the named capability ("fuse", "fuse-uring",
// "bwrap", "ptrace", "mount", "git", "minio") is usable here. When ART_TEST_REQUIRE lists the capability (CI
// does), a missing one fails the test instead: privileged tests must not
// silently skip where they are expected to run.
func Require(t testing.TB, what string) {
	t.Helper()
	reason := probe(what)
	if reason == "" {
		return
	}
	for _, r := range strings.Split(os.Getenv("ART_TEST_REQUIRE"), ",") {
		if strings.TrimSpace(r) == what {
			t.Fatalf("%s is required (ART_TEST_REQUIRE) but unavailable: %s", what, reason)
		}
	}
	t.Skipf("%s unavailable: %s (set ART_TEST_REQUIRE=%s to make this fail)", what, reason, what)
}

// RequireFUSE skips unless FUSE mounts work.
func RequireFUSE(t testing.TB) { t.Helper(); Require(t, "fuse") }

// RequireMount skips unless this process can mount file systems (a small
// tmpfs for a full disk, say): root.
func RequireMount(t testing.TB) { t.Helper(); Require(t, "mount") }

func probe(what string) string {
	switch what {
	case "fuse":
		f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
		if err != nil {
			return "cannot open /dev/fuse: " + err.Error()
		}
		f.Close()
		if os.Geteuid() != 0 {
			if _, err := exec.LookPath("fusermount3"); err != nil {
				if _, err := exec.LookPath("fusermount"); err != nil {
					return "not root and no fusermount3"
				}
			}
		}
		return ""
	case "fuse-uring":
		// FUSE over io_uring: Linux 6.14 or later built with it (the fuse
		// module then has the enable_uring switch).
		if _, err := os.Stat("/sys/module/fuse/parameters/enable_uring"); err != nil {
			return "the kernel has no FUSE over io_uring"
		}
		return ""
	case "bwrap":
		if _, err := exec.LookPath("bwrap"); err != nil {
			return "bwrap not installed"
		}
		return ""
	case "ptrace":
		// Start a traced child as the tracer does (PTRACE_TRACEME from a
		// locked thread); Yama or a container's seccomp may forbid it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			return "cannot start a traced process: " + err.Error()
		}
		cmd.Process.Kill()
		cmd.Wait()
		return ""
	case "mount":
		if os.Geteuid() != 0 {
			return "not root: cannot mount a file system"
		}
		return ""
	case "git":
		// The reference for text merges and the tool whose index stat
		// fidelity keeps valid.
		if _, err := exec.LookPath("git"); err != nil {
			return "git not installed"
		}
		return ""
	case "minio":
		if _, err := minioserver.Binary(); err != nil {
			return err.Error()
		}
		return ""
	}
	return "unknown capability " + what
}
