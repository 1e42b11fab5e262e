package workspace

import (
	"testing"
	"time"
)

// SetClock makes imports in t see the time as f says (the racy window is
// measured against it), until t ends. Not for parallel tests.
func SetClock(t testing.TB, f func() time.Time) {
	old := now
	now = f
	t.Cleanup(func() { now = old })
}
