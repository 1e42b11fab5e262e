package overlay

import (
	"testing"
	"time"
)

// PassthroughAll makes every open that may be served by passthrough be,
// whatever the file's size, until the returned function restores the
// threshold; tests use it to run their suites over the passthrough path.
func PassthroughAll() (restore func()) {
	old := ptMinCopy
	ptMinCopy = 0
	return func() { ptMinCopy = old }
}

// Fail makes f fail as if its store had failed with err (failed.go).
func Fail(f *FS, err error) { f.fail(err) }

// CopyOnRead makes every read of a file held only in the store copy the
// file out first, as before reads were served from the store (readStore),
// until the returned function restores the bound; tests of private copies
// use it.
func CopyOnRead() (restore func()) {
	old := storeReadMax
	storeReadMax = 0
	return func() { storeReadMax = old }
}

// HasConnCtl reports whether f holds its connection's control files
// (opened by Mount).
func HasConnCtl(f *FS) bool { return f.ctl != nil }

// RingThreads is how many threads serve f's requests over io_uring (0:
// served through /dev/fuse alone).
func RingThreads(f *FS) int {
	if f.rings == nil || f.rings.Refused() {
		return 0
	}
	return len(f.rings.Tids())
}

// OnHandleRelease calls fn at the end of every daemon-served file's
// Release, inside go-fuse's release (before it drops a backing reference),
// until the returned function is called.
func OnHandleRelease(fn func(ino int64)) (restore func()) {
	hooks.handleReleased.Store(&fn)
	return func() { hooks.handleReleased.Store(nil) }
}

// OnReleaseDone calls fn after go-fuse has finished each file's release,
// until the returned function is called.
func OnReleaseDone(fn func(ino int64)) (restore func()) {
	hooks.releaseDone.Store(&fn)
	return func() { hooks.releaseDone.Store(nil) }
}

// NoLowerBacking makes host files give go-fuse no backing file, as on a
// host filesystem the kernel does not stack on, until the returned
// function is called (after the unmount: daemon goroutines read it).
func NoLowerBacking() (restore func()) {
	hooks.noLowerBacking.Store(true)
	return func() { hooks.noLowerBacking.Store(false) }
}

// WritebackFails makes the next n sync_file_range calls on streams'
// private copies fail with EIO, until the returned function is called.
func WritebackFails(n int32) (restore func()) {
	hooks.writebackFails.Store(n)
	return func() { hooks.writebackFails.Store(0) }
}

// WritebackFailsLeft is how many of WritebackFails' failures are left.
func WritebackFailsLeft() int32 { return hooks.writebackFails.Load() }

// RingsServed is how many requests f's io_uring rings have answered, -1
// when f is served through /dev/fuse alone (uring.go).
func RingsServed(f *FS) int64 {
	if f.rings == nil || f.rings.Refused() {
		return -1
	}
	return f.rings.Served.Load()
}

// PrimeWait waits for f's priming walk (prime.go) to end and reports what
// it listed: entries and directories (zero without one).
func PrimeWait(f *FS) (entries, dirs int) {
	if f.prime == nil {
		return 0, 0
	}
	p := f.prime
	<-p.walked
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listed, p.dirs
}

// RefreshWait waits until f's priming walk waits for the agent with
// nothing left to refresh (prime.go), or fails t after a minute.
func RefreshWait(t testing.TB, f *FS) {
	t.Helper()
	last := int64(-1)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		now := f.others.Load()
		if f.refresh.idle.Load() && now == last {
			return
		}
		last = now
	}
	t.Fatal("the priming walk's refresh did not settle in a minute")
}

// Refreshed reports the refresh rounds f's priming walk has made since it
// ended, and the stats they made (prime.go).
func Refreshed(f *FS) (rounds, stated int) {
	if f.prime == nil {
		return 0, 0
	}
	f.prime.mu.Lock()
	defer f.prime.mu.Unlock()
	return f.prime.rounds, f.prime.stated
}
