package main

import (
	"testing"
	"time"
)

func TestEpochDiff(t *testing.T) {
	d, err := epochDiff("1795798374.999999", "1795798376.000001")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Second + 2*time.Microsecond; d != want {
		t.Errorf("epochDiff = %v, want %v", d, want)
	}
	for _, bad := range []string{"1795798374", "1795798374.12", "x.123456", "1795798374,123456"} {
		if _, err := epochDiff(bad, "1795798376.000001"); err == nil {
			t.Errorf("epochDiff(%q) accepted", bad)
		}
	}
}

func TestPairedRatio(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range v {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	// Per-repetition ratios 2, 3, 10: the median is 3, not the ratio of
	// the medians (40/10).
	a, n := ms(20, 30, 100), ms(10, 10, 10)
	if got := pairedRatio(a, n, false); got != 3 {
		t.Errorf("time ratio = %v, want 3", got)
	}
	if got := pairedRatio(a, n, true); got != 1.0/3 {
		t.Errorf("rate ratio = %v, want 1/3", got)
	}
	if got := pairedRatio(nil, n, false); got != 0 {
		t.Errorf("no samples: %v, want 0", got)
	}
}
