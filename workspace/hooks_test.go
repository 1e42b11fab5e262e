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

// SetRacyWindow makes imports in t assume timestamps as fine as d, so that
// a test's files leave the racy window after d instead of 2 s. Not for
// parallel tests.
func SetRacyWindow(t testing.TB, d time.Duration) {
	old := racyWindow
	racyWindow = int64(d)
	t.Cleanup(func() { racyWindow = old })
}

// FineCtime is fineCtime, for tests outside the package.
var FineCtime = fineCtime

// SetCacheLimit makes imports and checks in t hold at most n import
// records (and a check's listings at most n entries) at once. Not for
// parallel tests.
func SetCacheLimit(t testing.TB, n int) {
	old := cacheLimit
	cacheLimit = n
	t.Cleanup(func() { cacheLimit = old })
}
