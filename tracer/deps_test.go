package tracer

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLeaf: tracer and seccomp import no art package but seccomp (the
// syscall tables and the filter the tracer works with) and termtext (a
// record's text form escapes the traced program's strings), and the error
// classes (internal/errclass, which imports nothing).
func TestLeaf(t *testing.T) {
	for pkg, allowed := range map[string][]string{
		"github.com/artrt/art/tracer":  {"github.com/artrt/art/tracer", "github.com/artrt/art/seccomp", "github.com/artrt/art/internal/termtext", "github.com/artrt/art/internal/errclass"},
		"github.com/artrt/art/seccomp": {"github.com/artrt/art/seccomp", "github.com/artrt/art/internal/errclass"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/artrt/art") && !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}
