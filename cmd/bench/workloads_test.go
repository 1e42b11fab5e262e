package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// TestGoplsBodies runs the gopls scripts in bash with go stubbed: each
// times the steps the harness reads, in order, each running the command
// it names, in the workspace's environment.
func TestGoplsBodies(t *testing.T) {
	first, next, warmup, floor, cold := goplsBodies()
	install := "install " + goplsPkg + "@" + goplsVer
	build := "-C " + goplsModDir + " build ./..."
	for _, c := range []struct {
		name, body string
		want       []string // "STEP: go ARGS", or "-: go ARGS" for an untimed one
	}{
		{"first", first, []string{"cold: " + install, "noop1: " + install, "noop2: " + install, "noop3: " + install,
			"bcold: " + build, "bnoop1: " + build, "bnoop2: " + build, "bnoop3: " + build}},
		{"next", next, []string{"next1: " + install, "next2: " + install, "next3: " + install,
			"bnext1: " + build, "bnext2: " + build, "bnext3: " + build}},
		{"warmup", warmup, []string{"-: " + install, "-: " + build}},
		{"floor", floor, []string{"-: " + install, "noop1: " + install, "noop2: " + install, "noop3: " + install,
			"-: " + build, "bnoop1: " + build, "bnoop2: " + build, "bnoop3: " + build}},
		{"cold", cold, []string{"cold: " + install, "bcold: " + build}},
	} {
		dir := t.TempDir()
		// go prints what it ran and where its caches are; t prints the
		// step after it (eval's output goes to /dev/null as in the
		// prelude, so go reports on stderr).
		stub := `set -e
go() { echo "go $* $GOCACHE $GOPROXY $GOFLAGS" >&2; }
t() { local n=$1; shift; echo "step $n" >&2; eval "$@" >/dev/null; }
`
		cmd := exec.Command("bash", "-c", stub+c.body)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		var got []string
		step := "-"
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if n, ok := strings.CutPrefix(l, "step "); ok {
				step = n
				continue
			}
			args, ok := strings.CutPrefix(l, "go ")
			if !ok {
				t.Fatalf("%s: unexpected output %q", c.name, l)
			}
			env := " " + dir + "/.gocache file://" + dir + "/.gomod/cache/download -mod=mod"
			if !strings.HasSuffix(args, env) {
				t.Errorf("%s: go %s: not the workspace's environment (want suffix %q)", c.name, args, env)
			}
			got = append(got, step+": "+strings.TrimSuffix(args, env))
			step = "-"
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s ran\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

// TestMakeWritable checks that a module copied out of the read-only
// module cache becomes writable by its owner, other bits kept.
func TestMakeWritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mod")
	sub := filepath.Join(dir, "internal")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "a.go")
	if err := os.WriteFile(file, []byte("package a\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.go", filepath.Join(sub, "link")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{sub, dir} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := makeWritable(dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o755, sub: 0o755, file: 0o644} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
}

// TestGoplsRows checks the gopls rows of the table: the cold and
// same-session rows of install and build have no W, the next-session
// rows have it; every row shows L and L/N (the cold rows from L's cold
// session).
func TestGoplsRows(t *testing.T) {
	s := time.Second
	w := &wlRun{samples: map[string]map[wlPlace][]time.Duration{}, facts: map[string]string{"goplsmod": "9 packages"}}
	for _, m := range []string{"cold", "noop", "next", "bcold", "bnoop", "bnext"} {
		for _, p := range []wlPlace{wlNative, wlBwrap, wlArt} {
			w.add(m, p, s)
		}
		w.add(m, wlLoop, s/2)
	}
	w.add("next", wlWarm, 2*s)
	w.add("bnext", wlWarm, 3*s)
	w.table()
	if len(w.rows) != 6 {
		t.Fatalf("%d rows, want 6: %+v", len(w.rows), w.rows)
	}
	for i, want := range []struct{ w, wratio, l, lratio string }{
		{"", "", "500.0 ms", "0.50"},
		{"", "", "500.0 ms", "0.50"},
		{"2.00 s", "2.00", "500.0 ms", "0.50"},
		{"", "", "500.0 ms", "0.50"},
		{"", "", "500.0 ms", "0.50"},
		{"3.00 s", "3.00", "500.0 ms", "0.50"},
	} {
		r := w.rows[i]
		if r.w != want.w || r.wratio != want.wratio || r.ratio != "1.00" || r.l != want.l || r.lratio != want.lratio {
			t.Errorf("row %d (%s): W %q %q, A/N %q, L %q %q; want W %q %q, A/N 1.00, L %q %q", i, r.bench, r.w, r.wratio, r.ratio, r.l, r.lratio, want.w, want.wratio, want.l, want.lratio)
		}
	}
	if !strings.Contains(w.rows[3].bench, "go build ./...") || !strings.Contains(w.rows[3].bench, "9 packages") {
		t.Errorf("build row: %q", w.rows[3].bench)
	}
}

// TestGoStateRebuilt checks the gopls floor's rebuild detector on a real
// workspace: touching the build cache's entries and the installed binary
// (what an up-to-date go install and build do) is no rebuild; a new
// entry (a compile) or a binary written anew (a link) is.
func TestGoStateRebuilt(t *testing.T) {
	ws := t.TempDir()
	entry := filepath.Join(ws, ".gocache", "ab", "ab12-a")
	bin := filepath.Join(ws, "bin", "gopls")
	for _, f := range []string{entry, filepath.Join(ws, ".gocache", "trim.txt"), bin} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func() goState {
		t.Helper()
		st, err := readGoState(ws)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	before := read()
	if len(before.cache) != 2 {
		t.Fatalf("cache files %v, want 2", before.cache)
	}
	// A no-op: entries and the binary touched, trim.txt rewritten in place.
	later := time.Now().Add(time.Hour)
	for _, f := range []string{entry, bin} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".gocache", "trim.txt"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if why := before.rebuilt(read()); why != "" {
		t.Errorf("a no-op reads as rebuilt: %s", why)
	}
	// A compile: a new entry.
	added := filepath.Join(ws, ".gocache", "cd", "cd34-d")
	if err := os.MkdirAll(filepath.Dir(added), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(added, []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	if why := before.rebuilt(read()); !strings.Contains(why, "1 new build-cache files, first cd/cd34-d") {
		t.Errorf("a new entry: %q", why)
	}
	if err := os.Remove(added); err != nil {
		t.Fatal(err)
	}
	// A link: the binary written again with another build ID.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if why := before.rebuilt(read()); why != "bin/gopls relinked" {
		t.Errorf("a relinked binary: %q", why)
	}
	// No binary at all: an error, not a floor.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if _, err := readGoState(ws); err == nil {
		t.Error("readGoState without bin/gopls: no error")
	}
}

// TestCopyWorkspaceExcept checks the copy L's cold session starts from: a
// workspace without the entries left out, the rest (and the top
// directory's mode) as they were.
func TestCopyWorkspaceExcept(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	for p, body := range map[string]string{"a.txt": "a", "mod/b.go": "package b", ".gocache/x": "x", "bin/gopls": "elf"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(src, 0o750); err != nil {
		t.Fatal(err)
	}
	w := &wlRun{b: &bench{ctx: context.Background()}, root: root}
	dst := filepath.Join(root, "copies", "dst")
	if err := w.copyWorkspace(src, dst, goplsBuilt...); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"a.txt": true, "mod/b.go": true, ".gocache": false, "bin": false} {
		if _, err := os.Stat(filepath.Join(dst, p)); (err == nil) != want {
			t.Errorf("%s in the copy: %v, want present %v", p, err, want)
		}
	}
	if st, err := os.Stat(dst); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o750 {
		t.Errorf("the copy's top directory has mode %v, want 0750", st.Mode().Perm())
	}
}
