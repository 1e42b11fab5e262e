package mergeop

import (
	"testing"

	"github.com/artrt/art/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
