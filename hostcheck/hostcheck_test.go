package hostcheck

import (
	"context"
	"os"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// On a host where the test suite's own privileged tests run (CI: root,
// bwrap, /dev/fuse), the probes must agree with them.
func TestRunAgreesWithTheHost(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.RequireFUSE(t)
	checks := Run(context.Background())
	byName := map[string]Check{}
	for _, c := range checks {
		if c.Status != OK && c.Status != Missing && c.Status != Limited {
			t.Errorf("%s: status %q", c.Name, c.Status)
		}
		if c.Status != OK && c.Disables == "" {
			t.Errorf("%s is %s but says nothing of what that disables", c.Name, c.Status)
		}
		byName[c.Name] = c
	}
	for _, name := range []string{"bwrap", "user namespaces", "FUSE", "FUSE passthrough", "FUSE over io_uring", "cgroups", "seccomp", "Landlock", "ptrace"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no %s check", name)
		}
	}
	for _, name := range []string{"bwrap", "user namespaces", "FUSE", "seccomp"} {
		if c := byName[name]; c.Status != OK {
			t.Errorf("%s: %s (%s), but the suite's own probe found it usable", name, c.Status, c.Detail)
		}
	}
	if !Healthy(checks) {
		t.Errorf("Healthy = false on a host that runs the sandbox: %+v", checks)
	}
	if os.Geteuid() == 0 {
		if _, ok := byName["fusermount3"]; ok {
			t.Errorf("root mounts without fusermount3, yet it was checked")
		}
	}
}

func TestHealthy(t *testing.T) {
	if !Healthy([]Check{{Name: "x", Status: Missing}, {Name: "y", Status: OK, Essential: true}}) {
		t.Error("a missing optional check made the host unhealthy")
	}
	if Healthy([]Check{{Name: "y", Status: Missing, Essential: true}}) {
		t.Error("a missing essential check left the host healthy")
	}
}

func TestKernelVersion(t *testing.T) {
	for rel, want := range map[string][2]int{"6.18.44-fc-v769": {6, 18}, "6.9": {6, 9}, "5.15.0-91-generic": {5, 15}, "x": {0, 0}, "6.1rc2": {6, 1}} {
		if ma, mi := kernelVersion(rel); ma != want[0] || mi != want[1] {
			t.Errorf("kernelVersion(%q) = %d.%d, want %d.%d", rel, ma, mi, want[0], want[1])
		}
	}
}
