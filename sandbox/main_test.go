package sandbox_test

import (
	"os"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/sandbox"
)

// TestMain runs the tests with a private TMPDIR that must be empty after
// them. The test binary is also a ready sandbox's stub (StartReady
// re-executes its own binary), as art's main is.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == sandbox.StubArg {
		sandbox.RunStub()
	}
	testutil.Main(m)
}
