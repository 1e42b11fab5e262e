// Command bench measures art's store on this machine next to native tools
// doing the same job in the same run, and prints the results as one markdown
// table (make bench):
//
//	go run ./cmd/bench [-quick] [-out docs/benchmarks.md] [-run SECTIONS] [-cpuprofile FILE] [-perf FILE]
//
// Sections (-run takes a comma-separated subset):
//
//	ingest       art push of a copy of $GOROOT/src into a fresh store, next to
//	             cat of the same tree (page cache warm) and git add+commit
//	incremental  a no-op push and pushes after editing 1% of the files,
//	             next to git status and git add+commit of the same edits
//	snapshot     TakeSnapshot after changing one file, at 1k, 10k and 100k files
//	diff         journal.Diff and DB.Checkout with 1..1000 of 10k files
//	             changed, next to git diff and git reset
//	merge        art merge of two branches of 10k files that changed
//	             disjoint halves, next to git merge-tree and git merge
//	remote       art push to another store file, first and after editing 1%
//	             of the files, next to restic backup and borg create into
//	             local repositories and git push to a bare repository
//	overlay      art mount (FUSE) against ext4 on the same disk and go-fuse's
//	             loopback example: sequential and 4 KiB I/O, passthrough
//	             reads of lower files, create and stat rates, tar x, rm -rf,
//	             git status, make -j2, and the cost of --journal-writes.
//	             Needs root and /dev/fuse; when not selected with -run it
//	             is skipped, with the reason, where it cannot run
//	trace        art's tracer on tar x of the ingest tree and an exec loop,
//	             in bwrap: untraced, default traced set, trace all, and
//	             strace -f. Needs bwrap, strace and ptrace
//	sandbox      start-up of art run and warm art exec against bare bwrap
//	lifecycle    20 art run sessions (rm -rf, tar x of the ingest tree, 1 MiB
//	             of unique random bytes; a snapshot each), then art forget
//	             --all --keep-last 2 and art gc --grace 0, timed, and the
//	             store's size against a fresh store of the last 2 sessions.
//	             Needs root, /dev/fuse and bwrap; skipped like overlay
//	workloads    real developer workloads natively, under bare bwrap, under
//	             bwrap in a go-fuse loopback mount (the FUSE floor,
//	             cmd/bench/loopfloor) and in art run on a store holding the
//	             workspace: go install gopls and go build ./... of its
//	             module (cold and no-op), npm ci of 500+
//	             packages, find, du and rm -rf of node_modules, git status,
//	             grep and commit in a 15k-file repository (owned by the
//	             user who runs it, and owned by root), tar x + rm -rf, a
//	             2 GiB dd and its cold read, art run start-up. Its data (Go modules, npm
//	             packages, a git repository) is fetched once into -data
//	             (default ~/.cache/art-bench). Needs bwrap, /dev/fuse, git,
//	             npm; root to drop caches; skipped like overlay
//
// The machine bench was written for is a shared 2-core VM, so absolute times
// drift from run to run; the ratios against peers measured in the same run
// are the numbers to compare across runs. Every timing is the median of
// several repetitions unless the table says otherwise.
//
// -quick shrinks every size and skips git (and the overlay section's git
// and build rows), for a smoke run under a minute per section.
// -out replaces only the parts of the file between the markers
// <!-- bench:store:begin --> and <!-- bench:store:end --> (the store
// sections) and <!-- bench:overlay:begin --> and <!-- bench:overlay:end -->,
// each only when one of its sections ran, so hand-written text around them
// survives.
//
// -cpuprofile writes a CPU profile of the harness process. The ingest section
// then also runs one in-process push (workspace.Import, the code behind art
// push) and the incremental section one no-op push, so that they appear in
// it; the library sections run in process anyway. Every timed phase carries
// the pprof labels bench=PHASE and n=SIZE (go tool pprof -tags lists them):
//
//	go run ./cmd/bench -run ingest -cpuprofile /tmp/push.prof
//	go tool pprof -top -cum -tagfocus bench=push /tmp/push.prof
//
// -perf FILE records art's mount daemon with perf record -g during one
// extra, untimed tar x in the overlay section:
//
//	go run ./cmd/bench -run overlay -perf /tmp/untar.perf
//	perf report -i /tmp/untar.perf --no-children --sort symbol
//
// Everything happens in a temporary directory under /tmp that is removed at
// the end (-keep leaves it for inspection). Progress goes to stderr; stdout
// carries only the table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// sections in the order they run and appear in the table.
var sections = []string{"ingest", "incremental", "snapshot", "diff", "merge", "remote", "overlay", "trace", "sandbox", "lifecycle", "workloads"}

// storeSections are the sections of the store table; the rest have their
// own tables.
var storeSections = []string{"ingest", "incremental", "snapshot", "diff", "merge", "remote"}

type config struct {
	quick      bool
	out        string
	src        string
	reps       int
	seed       uint64
	run        map[string]bool
	cpuprofile string
	perf       string
	keep       bool
	data       string   // the workloads section's data cache
	workloads  string   // the workloads section's rows to run, comma-separated; "" all
	goplsReps  int      // repetitions of its gopls rows; 0: reps
	runSet     bool     // -run was given: a section that cannot run is an error
	args       []string // as given, for the report
}

// bench is one run of the harness.
type bench struct {
	cfg    config
	ctx    context.Context
	log    io.Writer // progress
	module string    // module root, where go build runs
	goroot string
	tmp    string
	art    string // the art binary built for this run
	rev    string // the commit it was built from, for the report
	git    bool   // run the git peers
	rep    report

	load string // load average when the measurements began

	tree *tree // the ingest tree, shared by ingest and incremental
	// Left by ingest for incremental (which makes them itself when run
	// alone): a store and a git repository holding tree.
	store, gitDir string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, ctx: ctx, log: stderr, git: !cfg.quick}
	if b.git {
		if _, err := exec.LookPath("git"); err != nil {
			return errors.New("git not found in PATH (needed for the git peers; -quick skips them)")
		}
	}
	if b.module, err = moduleRoot(ctx); err != nil {
		return err
	}
	if b.goroot, err = goEnv(ctx, "GOROOT"); err != nil {
		return err
	}
	if b.cfg.src == "" {
		b.cfg.src = filepath.Join(b.goroot, "src")
	}
	if b.tmp, err = os.MkdirTemp("", "art-bench-"); err != nil {
		return err
	}
	if cfg.keep {
		defer fmt.Fprintf(stderr, "bench: kept %s\n", b.tmp)
	} else {
		defer os.RemoveAll(b.tmp)
	}
	if cfg.cpuprofile != "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if err := b.buildArt(); err != nil {
		return err
	}
	if err := b.probeSections(); err != nil {
		return err
	}
	b.load = loadAvg()
	start := time.Now()
	took, err := b.runSections()
	if err != nil {
		return err
	}
	b.progress("done in %s", time.Since(start).Round(time.Second))
	return b.writeTables(stdout, took)
}

// probeSections drops the sections this machine cannot run (no FUSE, no
// bwrap...) with a note, or fails when -run named them.
func (b *bench) probeSections() error {
	for _, p := range []struct {
		name  string
		probe func() string
	}{{"overlay", fuseProbe}, {"lifecycle", lifecycleProbe}, {"workloads", workloadsProbe}} {
		if !b.cfg.run[p.name] {
			continue
		}
		if why := p.probe(); why != "" {
			if b.cfg.runSet {
				return fmt.Errorf("%s: %s", p.name, why)
			}
			b.progress("skipping the %s section: %s", p.name, why)
			delete(b.cfg.run, p.name)
		}
	}
	return nil
}

// sectionTimes is how long the sections of each table took.
type sectionTimes struct {
	store, overlay, trace, sandbox, lifecycle, workloads time.Duration
}

// runSections runs the chosen sections in order.
func (b *bench) runSections() (sectionTimes, error) {
	var took sectionTimes
	for _, s := range sections {
		if !b.cfg.run[s] {
			continue
		}
		if err := b.ctx.Err(); err != nil {
			return took, err
		}
		b.progress("== %s", s)
		began := time.Now()
		if err := b.runSection(s); err != nil {
			return took, fmt.Errorf("%s: %w", s, err)
		}
		if slices.Contains(storeSections, s) {
			took.store += time.Since(began)
		} else if s == "trace" {
			took.trace += time.Since(began)
		} else if s == "sandbox" {
			took.sandbox += time.Since(began)
		} else if s == "lifecycle" {
			took.lifecycle += time.Since(began)
		} else if s == "workloads" {
			took.workloads += time.Since(began)
		} else {
			took.overlay += time.Since(began)
		}
	}
	return took, nil
}

// runSection runs section s.
func (b *bench) runSection(s string) error {
	switch s {
	case "ingest":
		return b.ingest()
	case "incremental":
		return b.incremental()
	case "snapshot":
		return b.snapshotLatency()
	case "diff":
		return b.diffCheckout()
	case "merge":
		return b.mergeSection() // merge.go
	case "remote":
		return b.remoteSection()
	case "overlay":
		return b.overlay()
	case "trace":
		return b.trace()
	case "sandbox":
		return b.sandboxSection()
	case "lifecycle":
		return b.lifecycle()
	case "workloads":
		return b.workloads()
	}
	return nil
}

// writeTables prints the table of each part whose sections ran, and writes
// it into -out between its markers.
func (b *bench) writeTables(stdout io.Writer, took sectionTimes) error {
	cfg := b.cfg
	// Each table goes between its own markers, and only if one of its
	// sections ran: -run overlay leaves the store table alone.
	type part struct {
		m  markers
		md string
	}
	var parts []part
	if slices.ContainsFunc(storeSections, func(s string) bool { return cfg.run[s] }) {
		parts = append(parts, part{storeMarkers, b.markdown(took.store)})
	}
	if cfg.run["overlay"] {
		parts = append(parts, part{overlayMarkers, b.overlayMarkdown(took.overlay)})
	}
	if cfg.run["trace"] {
		parts = append(parts, part{traceMarkers, b.traceMarkdown(took.trace)})
	}
	if cfg.run["sandbox"] {
		parts = append(parts, part{sandboxMarkers, b.sandboxMarkdown(took.sandbox)})
	}
	if cfg.run["lifecycle"] {
		parts = append(parts, part{lifecycleMarkers, b.lifecycleMarkdown(took.lifecycle)})
	}
	if cfg.run["workloads"] {
		parts = append(parts, part{workloadsMarkers, b.workloadsMarkdown(took.workloads)})
	}
	for i, p := range parts {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprint(stdout, p.md)
		if cfg.out != "" {
			if err := writeSection(cfg.out, p.m, p.md); err != nil {
				return err
			}
		}
	}
	if cfg.out != "" && len(parts) > 0 {
		b.progress("wrote %s", cfg.out)
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{args: args}
	fs.BoolVar(&cfg.quick, "quick", false, "small sizes and no git peers: a smoke run under a minute")
	fs.StringVar(&cfg.out, "out", "", "write the tables into this markdown `FILE` between the bench:store and bench:overlay markers")
	fs.StringVar(&cfg.src, "src", "", "`DIR` to copy as the ingest tree (default $GOROOT/src)")
	fs.IntVar(&cfg.reps, "reps", 3, "repetitions of each art push / git measurement (library timings use max(reps, 5))")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed for choosing which files to edit")
	runList := fs.String("run", strings.Join(sections, ","), "comma-separated `SECTIONS` to run")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile to `FILE` (see the package doc)")
	fs.StringVar(&cfg.perf, "perf", "", "record art's mount daemon with perf during an extra tar x into `FILE` (overlay section)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory")
	fs.StringVar(&cfg.workloads, "workloads", "", "comma-separated `NAMES` of the workloads section's workloads to run: startup, git (git-user and git-root), untar, dd, npm, gopls (default all)")
	fs.IntVar(&cfg.goplsReps, "gopls-reps", 0, "repetitions of the workloads section's gopls rows (a cold build is about a minute per place on an idle machine); default -reps")
	fs.StringVar(&cfg.data, "data", "", "the workloads section's data cache `DIR` (default ~/.cache/art-bench): Go modules, npm packages, a git repository, kept between runs")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	fs.Visit(func(f *flag.Flag) { cfg.runSet = cfg.runSet || f.Name == "run" })
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.reps < 1 {
		return cfg, fmt.Errorf("-reps %d: want at least 1", cfg.reps)
	}
	cfg.run = map[string]bool{}
	for _, s := range strings.Split(*runList, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(sections, s) {
			return cfg, fmt.Errorf("-run: unknown section %q (have %s)", s, strings.Join(sections, ", "))
		}
		cfg.run[s] = true
	}
	return cfg, nil
}

func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleRoot is the directory of the go.mod that go run found.
func moduleRoot(ctx context.Context) (string, error) {
	mod, err := goEnv(ctx, "GOMOD")
	if err != nil {
		return "", err
	}
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the art module: run bench from the repository (go run ./cmd/bench)")
	}
	return filepath.Dir(mod), nil
}

func (b *bench) buildArt() error {
	b.art = filepath.Join(b.tmp, "art")
	b.progress("building %s", b.art)
	// What make build makes: the thin front as art, the full art (with
	// make build's tags) beside it as art-core, so that the figures are
	// those of the art users run. A tree without the front builds the
	// full art as art.
	full := b.art
	if _, err := os.Stat(filepath.Join(b.module, "cmd", "art-front")); err == nil {
		full = filepath.Join(b.tmp, "art-core")
		cmd := exec.CommandContext(b.ctx, "go", "build", "-o", b.art, "./cmd/art-front")
		cmd.Dir = b.module
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/art-front: %w\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(b.ctx, "go", "build", "-tags", "urfave_cli_no_docs", "-o", full, "./cmd/art")
	cmd.Dir = b.module
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/art: %w\n%s", err, out)
	}
	// And beside it, as make build puts it: the stub a warm daemon runs in
	// the next run's sandbox started ahead.
	cmd = exec.CommandContext(b.ctx, "go", "build", "-o", filepath.Join(b.tmp, "art-sandbox-stub"), "./cmd/art-sandbox-stub")
	cmd.Dir = b.module
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/art-sandbox-stub: %w\n%s", err, out)
	}
	b.rev = b.revision()
	return nil
}

// srcLabel names the ingest tree for the report.
func (b *bench) srcLabel() string {
	if b.cfg.src == filepath.Join(b.goroot, "src") {
		return "$GOROOT/src"
	}
	return b.cfg.src
}

// libReps is how many times the cheap in-process measurements repeat.
func (b *bench) libReps() int { return max(b.cfg.reps, 5) }

func (b *bench) progress(format string, a ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", a...)
}
