package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/sandbox"
)

// As root, the sandbox's uid may not be able to walk to the workspace
// (/root/proj, a 0700 parent): art stages bind sources in a mount
// namespace of its own, so the run works, and nothing of it shows on the
// host.
func TestWorkspaceAndBindUnderPrivateParent(t *testing.T) {
	requireRoot(t)
	c := direct(t)
	base := filepath.Dir(c.Workspace)
	if err := os.Chmod(base, 0o700); err != nil { // what bwrap alone cannot get through
		t.Fatal(err)
	}
	src := filepath.Join(base, "data")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "x"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Workspace, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Binds = []sandbox.Bind{{Host: src, Guest: "/tmp/data", ReadOnly: true}}
	out := sh(t, c, "cat f /tmp/data/x && echo new > g")
	if out != "hello\nbound\n" {
		t.Errorf("inside: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(c.Workspace, "g")); err != nil || string(b) != "new\n" {
		t.Errorf("the command's write reached the workspace as %q, %v", b, err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), sandbox.StageRoot) {
		t.Errorf("a staged bind shows in the host's mount table")
	}
	if ents, err := os.ReadDir(sandbox.StageRoot); err != nil || len(ents) != 0 {
		t.Errorf("%s on the host: %v entries, %v", sandbox.StageRoot, len(ents), err)
	}
}
