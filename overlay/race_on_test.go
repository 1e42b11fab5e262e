//go:build race

package overlay_test

// raceEnabled: the race detector slows every FUSE round trip several
// times over; long randomized tests scale down under it (make test runs
// them again without -race at full size).
const raceEnabled = true
