package main

import (
	"slices"
	"strings"
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

// TestWLTableRow checks the W column: filled, with its ratio and verdict,
// where W ran, and empty (no verdict) where it did not.
func TestWLTableRow(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range v {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	sp := wlSpec{metric: "status2", label: "status", places: []wlPlace{wlNative, wlBwrap, wlLoop, wlArt, wlWarm}, goal: 3}
	m := map[wlPlace][]time.Duration{wlNative: ms(10, 10, 10), wlBwrap: ms(11, 11, 11), wlLoop: ms(40, 60, 50),
		wlArt: ms(200, 100, 300), wlWarm: ms(20, 25, 40)}
	r, ok := wlTableRow(sp, m, 0)
	if !ok {
		t.Fatal("no row")
	}
	want := wlRow{bench: "status", n: "10.0 ms", b: "11.0 ms", l: "50.0 ms", a: "200.0 ms", w: "25.0 ms",
		lratio: "5.00", ratio: "20.00", wratio: "2.50", goal: "<= 3x: **missed**; W: **met**"}
	if r != want {
		t.Errorf("row with W:\n got %+v\nwant %+v", r, want)
	}

	// No W samples (a first session): the W cells stay empty.
	delete(m, wlWarm)
	r, _ = wlTableRow(sp, m, 0)
	if r.w != "" || r.wratio != "" || r.goal != "<= 3x: **missed**" {
		t.Errorf("row without W: %+v", r)
	}

	// A row without L (L not among its places, or L did not run): the L
	// cells stay empty, the goal is A's alone.
	sp.places = []wlPlace{wlNative, wlBwrap, wlArt}
	r, _ = wlTableRow(sp, m, 0)
	if r.l != "" || r.lratio != "" || r.ratio != "20.00" {
		t.Errorf("row without L: %+v", r)
	}
	sp.places = []wlPlace{wlNative, wlBwrap, wlLoop, wlArt}
	delete(m, wlLoop)
	r, _ = wlTableRow(sp, m, 0)
	if r.l != "" || r.lratio != "" {
		t.Errorf("row whose L did not run: %+v", r)
	}

	// A rate row: L/N is L's throughput over N's.
	sp = wlSpec{metric: "write", label: "dd", places: []wlPlace{wlNative, wlBwrap, wlLoop, wlArt}, rate: true, goal: 0.5}
	m = map[wlPlace][]time.Duration{wlNative: ms(100), wlBwrap: ms(100), wlLoop: ms(125), wlArt: ms(400)}
	r, _ = wlTableRow(sp, m, 1<<20)
	if r.lratio != "0.80x rate" || r.ratio != "0.25x rate" || r.goal != ">= 0.5x rate: **missed**" {
		t.Errorf("rate row: %+v", r)
	}

	// startup: against bwrap, for A and W.
	sp = wlSpec{metric: "startup", label: "startup", places: []wlPlace{wlBwrap, wlArt, wlWarm}, vsB: true}
	m = map[wlPlace][]time.Duration{wlBwrap: ms(10), wlArt: ms(60), wlWarm: ms(15)}
	r, _ = wlTableRow(sp, m, 0)
	if r.ratio != "6.0x bwrap (+50.0 ms)" || r.wratio != "1.5x bwrap (+5.00 ms)" || r.goal != "<= bwrap + 10 ms: **missed**; W: **met**" {
		t.Errorf("startup row: %+v", r)
	}

	// The table has a cell for every column in every line.
	tab := wlTable([]wlRow{want, {bench: "a|b"}})
	lines := strings.Split(strings.TrimSuffix(tab, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines:\n%s", len(lines), tab)
	}
	for _, l := range lines {
		if n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); n != 11 {
			t.Errorf("%d separators in %q, want 11", n, l)
		}
	}
	if !strings.Contains(lines[0], "| L | A | W | L/N | A/N | W/N |") || !strings.Contains(lines[2], "| 50.0 ms | 200.0 ms | 25.0 ms | 5.00 | 20.00 | 2.50 |") {
		t.Errorf("columns out of place:\n%s", tab)
	}
}

// TestWLPlaces checks each repetition's order, N B L A W, and that L
// drops out where it cannot run or means nothing.
func TestWLPlaces(t *testing.T) {
	w := &wlRun{loopOK: true}
	for _, c := range []struct {
		loop, warm bool
		want       string
	}{{true, true, "NBLAW"}, {true, false, "NBLA"}, {false, true, "NBAW"}, {false, false, "NBA"}} {
		var got strings.Builder
		for _, p := range w.places(c.loop, c.warm) {
			got.WriteString(p.String())
		}
		if got.String() != c.want {
			t.Errorf("places(%v, %v) = %s, want %s", c.loop, c.warm, got.String(), c.want)
		}
	}
	w.loopOK = false
	if ps := w.places(true, true); slices.Contains(ps, wlLoop) {
		t.Errorf("L without loopOK: %v", ps)
	}
}

// TestArtEnv checks that art run gets no sudo variables, so it picks the
// agent by the workspace's owner whoever started the harness.
func TestArtEnv(t *testing.T) {
	t.Setenv("SUDO_UID", "1000")
	t.Setenv("SUDO_GID", "1000")
	t.Setenv("ART_BENCH_KEEP", "x")
	env := artEnv()
	for _, kv := range env {
		if strings.HasPrefix(kv, "SUDO_") {
			t.Errorf("artEnv kept %s", kv)
		}
	}
	if !slices.Contains(env, "ART_BENCH_KEEP=x") {
		t.Error("artEnv dropped an unrelated variable")
	}
}
