package netproxy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering: netpolicy is a leaf and netproxy builds only on it, so
// neither can reach the journal or the sandbox (the caller wires them).
// Both may use the error classes (internal/errclass imports nothing).
func TestLayering(t *testing.T) {
	const errclass = "github.com/artrt/art/internal/errclass"
	for pkg, allowed := range map[string][]string{
		"github.com/artrt/art/netpolicy": {"github.com/artrt/art/netpolicy", errclass},
		"github.com/artrt/art/netproxy":  {"github.com/artrt/art/netproxy", "github.com/artrt/art/netpolicy", errclass},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if !strings.HasPrefix(dep, "github.com/artrt/art/") {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || dep == a
			}
			if !ok {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}
