package procs

import (
	"runtime"
	"testing"
)

func TestReserveRaisesPsNotWorkers(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	workers := Workers()
	if workers != base {
		t.Fatalf("Workers() = %d with no reservation, GOMAXPROCS %d", workers, base)
	}
	r1 := Reserve(3)
	if got := runtime.GOMAXPROCS(0); got != base+3 {
		t.Fatalf("after Reserve(3): GOMAXPROCS %d, want %d", got, base+3)
	}
	if got := Workers(); got != base {
		t.Fatalf("after Reserve(3): Workers() = %d, want %d", got, base)
	}
	r2 := Reserve(2)
	if got := runtime.GOMAXPROCS(0); got != base+5 {
		t.Fatalf("two reservations: GOMAXPROCS %d, want %d", got, base+5)
	}
	r1()
	r1() // a second release gives nothing back twice
	if got := runtime.GOMAXPROCS(0); got != base+2 {
		t.Fatalf("after releasing 3 of 5: GOMAXPROCS %d, want %d", got, base+2)
	}
	r2()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("all released: GOMAXPROCS %d, want %d", got, base)
	}
	if got := Workers(); got != base {
		t.Fatalf("all released: Workers() = %d, want %d", got, base)
	}
}

func TestReserveIsBounded(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	r := Reserve(maxSpare + 40)
	defer r()
	if got := runtime.GOMAXPROCS(0); got != base+maxSpare {
		t.Fatalf("Reserve beyond the bound: GOMAXPROCS %d, want %d", got, base+maxSpare)
	}
	if got := Workers(); got != base {
		t.Fatalf("Workers() = %d, want %d", got, base)
	}
	r()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("released: GOMAXPROCS %d, want %d", got, base)
	}
}
