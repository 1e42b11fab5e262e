// Package procs separates two numbers Go keeps as one, GOMAXPROCS: how
// many goroutines may run Go code at once (the runtime's Ps), and how
// many workers art starts for CPU-bound work (hashing, compression,
// parallel walks).
//
// A FUSE mount's reader goroutines sit in read(2) on /dev/fuse, and a
// goroutine blocked in a system call keeps its P until the runtime's
// monitor (sysmon) takes it back. With GOMAXPROCS at the machine's two
// cores, go-fuse's two or three idle readers held every P, so at nearly
// every request sysmon found no idle P, took one back from a blocked
// reader and woke a spinning thread to look for work that was not there
// (which went back to sleep), and, having just taken a P, kept polling
// every 20 us instead of backing off to 10 ms: in a tar x of 12,800
// files, 52,767 such takes and 258,572 of sysmon's sleeps, a context
// switch each (docs/benchmarks.md, "The FUSE round trip"). With a few
// more Ps than readers, a P stays idle, sysmon leaves blocked readers
// alone and backs off. The extra Ps are for goroutines blocked in system
// calls, not for more work: Workers stays what GOMAXPROCS was.
package procs

import (
	"os"
	"runtime"
	"sync"
)

// maxSpare bounds the Ps added over all reservations of a process (many
// mounts in one process share what they add): each P adds to Go's
// per-P state and the garbage collector's dedicated workers are a
// quarter of GOMAXPROCS.
const maxSpare = 32

var (
	mu     sync.Mutex
	wanted int // sum of the live reservations
	added  int // Ps added to GOMAXPROCS now: min(wanted, maxSpare)
)

// Workers is how many goroutines to run for CPU-bound work: GOMAXPROCS
// without the Ps Reserve added for goroutines blocked in system calls.
func Workers() int {
	mu.Lock()
	defer mu.Unlock()
	return max(1, runtime.GOMAXPROCS(0)-added)
}

// Reserve raises GOMAXPROCS by n Ps (within maxSpare over all live
// reservations) for goroutines that spend their time blocked in system
// calls, until the returned release is called (once is enough; later
// calls do nothing).
func Reserve(n int) (release func()) {
	if n <= 0 {
		return func() {}
	}
	mu.Lock()
	wanted += n
	apply()
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			wanted -= n
			apply()
			mu.Unlock()
		})
	}
}

// apply sets GOMAXPROCS to the workers' count plus the Ps now wanted.
// Called with mu held.
func apply() {
	want := min(wanted, maxSpare)
	if want == added {
		return
	}
	base := max(1, runtime.GOMAXPROCS(0)-added)
	added = want
	if want == 0 && os.Getenv("GOMAXPROCS") == "" {
		// Setting GOMAXPROCS turned off the runtime's own updates of it
		// (to the CPUs and cgroup quota the process is given): back to
		// them once no reservation is left, unless the user fixed it.
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(base + want)
}
