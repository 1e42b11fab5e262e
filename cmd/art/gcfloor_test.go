package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The raised setting holds until the first collection, then the
// process's own (GOGC) is back; GOGC=off stays off.
func TestRaiseFirstGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	restored := raiseFirstGC()
	if p := debug.SetGCPercent(firstGCPercent); p != firstGCPercent {
		t.Fatalf("before a collection: GOGC %d, want %d", p, firstGCPercent)
	}
	select {
	case <-restored:
		t.Fatal("restored before any collection")
	default:
	}
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		runtime.GC()
		select {
		case <-restored:
			done = true
		case <-deadline:
			t.Fatal("GOGC not restored after collections")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("after the first collection: GOGC %d, want 100", p)
	}

	debug.SetGCPercent(-1)
	<-raiseFirstGC()
	if p := debug.SetGCPercent(100); p != -1 {
		t.Errorf("GOGC=off became %d", p)
	}
}
