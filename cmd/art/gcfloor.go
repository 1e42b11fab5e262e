package main

import (
	"runtime"
	"runtime/debug"
)

// firstGCPercent is the collector's setting until its first collection.
// Go first collects when the heap reaches 4 MB times GOGC/100; a
// session's mount alone holds about 4 MB of go-fuse's request buffers
// (1 MiB each, one per reader), so at GOGC=100 every art run collected
// within its first milliseconds, and a process's first collection faults
// in the runtime's span sets and mark bits: about 150-250 of the ~1,500
// page faults of `art run -- true` (perf stat). At 400 the first
// collection waits for a 16 MB heap, which a short run never reaches;
// after it the setting the process started with (GOGC, default 100)
// applies again, so a long session's heap is what it was, once at most
// 12 MB of garbage more.
const firstGCPercent = 400

func init() { raiseFirstGC() }

// raiseFirstGC applies firstGCPercent until the first collection. It
// leaves a GOGC of off or above firstGCPercent alone. The channel is
// closed once the original setting is back (for the tests).
func raiseFirstGC() <-chan struct{} {
	restored := make(chan struct{})
	orig := debug.SetGCPercent(firstGCPercent)
	if orig < 0 || orig >= firstGCPercent {
		debug.SetGCPercent(orig)
		close(restored)
		return restored
	}
	// A finalizer runs after the collection that found its object
	// unreachable: the first one, as nothing references it. (Not a tiny
	// object: the runtime batches those, and their finalizers can wait.)
	sentinel := new([32]byte)
	runtime.SetFinalizer(sentinel, func(*[32]byte) {
		// Someone else's setting since (art push's) stays.
		if now := debug.SetGCPercent(orig); now != firstGCPercent {
			debug.SetGCPercent(now)
		}
		close(restored)
	})
	return restored
}
