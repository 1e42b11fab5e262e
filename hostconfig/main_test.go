package hostconfig

import (
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// TestMain runs the tests with a private TMPDIR that must be empty after them.
func TestMain(m *testing.M) { testutil.Main(m) }
