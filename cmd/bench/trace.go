package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/artrt/art/seccomp"
	"github.com/artrt/art/tracer"
)

// trace: section 6. The cost of art's tracer on syscall-heavy workloads,
// all run in bwrap the way art runs commands, in one run: the sandbox with
// only the deny-list (untraced), with the tracer and the default traced
// set, with the tracer tracing every call, and strace -f of the untraced
// sandbox (the unfiltered-ptrace reference).
//
// The tracer runs in the harness process (the library, as art run uses
// it), so the numbers isolate tracing from the rest of art run.

var traceMarkers = markers{"<!-- bench:trace:begin -->", "<!-- bench:trace:end -->",
	"## Tracer: seccomp-filtered ptrace against untraced and strace -f"}

type trRow struct {
	bench, untraced, traced, all, strace, overhead, allOverhead, straceOverhead, records string
}

type traceVariant struct {
	name   string
	policy seccomp.Policy
	traced bool
	strace bool
}

var traceVariants = []traceVariant{
	{name: "untraced", policy: seccomp.Policy{}},
	{name: "traced", policy: seccomp.DefaultTrace(), traced: true},
	{name: "all", policy: seccomp.Policy{TraceAll: true}, traced: true},
	{name: "strace", policy: seccomp.Policy{}, strace: true},
}

func (b *bench) trace() error {
	for _, tool := range []string{"bwrap", "strace", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found", tool)
		}
	}
	root := filepath.Join(b.tmp, "trace")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	progs := map[string]string{}
	for _, v := range traceVariants {
		prog, err := v.policy.Program()
		if err != nil {
			return err
		}
		p := filepath.Join(root, v.name+".bpf")
		if err := os.WriteFile(p, prog, 0o600); err != nil {
			return err
		}
		progs[v.name] = p
	}

	// Workload 1: tar x of the ingest tree.
	tarball := filepath.Join(root, "src.tar")
	b.progress("packing %s", b.cfg.src)
	files := 0
	args := []string{"cf", tarball, "-C", filepath.Dir(b.cfg.src), filepath.Base(b.cfg.src)}
	if b.cfg.quick {
		list, n, err := quickList(b.cfg.src, 2000)
		if err != nil {
			return err
		}
		files = n
		args = []string{"cf", tarball, "-C", filepath.Dir(b.cfg.src), "-T", list}
	}
	if out, err := exec.CommandContext(b.ctx, "tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tar cf: %v %s", err, out)
	}
	if files == 0 {
		out, err := exec.CommandContext(b.ctx, "tar", "tf", tarball).Output()
		if err != nil {
			return err
		}
		files = strings.Count(string(out), "\n")
	}
	dest := filepath.Join(root, "x")
	untar := func() []string {
		return []string{"tar", "xf", tarball, "-C", dest}
	}
	if err := b.traceRow(fmt.Sprintf("tar x of %s (%d entries)", b.srcLabel(), files), progs, dest, untar); err != nil {
		return err
	}

	// Workload 2: an exec loop (the original art's unfiltered tracer: 9x).
	n := 1000
	if b.cfg.quick {
		n = 200
	}
	loop := func() []string {
		return []string{"/bin/sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done", n)}
	}
	if err := b.traceRow(fmt.Sprintf("exec loop: %d x /bin/true from sh", n), progs, dest, loop); err != nil {
		return err
	}
	if b.cfg.quick {
		return nil
	}

	// Workload 3: go build of a hello-world module with an empty build
	// cache (the runtime and fmt compiled too): forks, execs of compile
	// and link, many files written.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go not found: %w", err)
	}
	build := func() []string {
		return []string{"/bin/sh", "-c", `printf 'module hello\ngo 1.22\n' > go.mod &&
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n' > main.go &&
mkdir -p tmp && HOME=$PWD TMPDIR=$PWD/tmp GOCACHE=$PWD/cache GOPATH=$PWD/gopath GOTOOLCHAIN=local GOFLAGS= ` + goBin + ` build -o hello .`}
	}
	return b.traceRow("go build of hello world, empty build cache", progs, dest, build)
}

// traceRow times argv() under every variant, interleaved per repetition,
// with dest emptied (untimed) before each run.
func (b *bench) traceRow(name string, progs map[string]string, dest string, argv func() []string) error {
	times := map[string][]time.Duration{}
	var records int64
	for rep := 0; rep < b.cfg.reps; rep++ {
		for _, v := range traceVariants {
			if err := os.RemoveAll(dest); err != nil {
				return err
			}
			if err := os.MkdirAll(dest, 0o755); err != nil {
				return err
			}
			b.progress("%s: %s, repetition %d", name, v.name, rep+1)
			d, recs, err := b.traceOnce(v, progs[v.name], dest, argv())
			if err != nil {
				return fmt.Errorf("%s (%s): %w", name, v.name, err)
			}
			times[v.name] = append(times[v.name], d)
			if v.name == "traced" {
				records = recs
			}
		}
	}
	med := func(v string) time.Duration { return median(times[v]) }
	pct := func(v string) string {
		return fmt.Sprintf("%+.0f%%", 100*(float64(med(v))/float64(med("untraced"))-1))
	}
	b.rep.tr = append(b.rep.tr, trRow{
		bench: name, untraced: fmtDur(med("untraced")), traced: fmtDur(med("traced")), all: fmtDur(med("all")),
		strace: fmtDur(med("strace")), overhead: pct("traced"), allOverhead: pct("all"), straceOverhead: pct("strace"),
		records: fmt.Sprint(records),
	})
	return nil
}

// traceOnce runs argv in bwrap with the seccomp program at prog, traced
// or under strace per v, and returns the wall time and records seen.
func (b *bench) traceOnce(v traceVariant, prog, dest string, argv []string) (time.Duration, int64, error) {
	f, err := os.Open(prog)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	args := append([]string{"--ro-bind", "/", "/", "--bind", dest, dest, "--dev", "/dev", "--proc", "/proc",
		"--unshare-pid", "--die-with-parent", "--chdir", dest, "--seccomp", "3", "--"}, argv...)
	name := "bwrap"
	if v.strace {
		args = append([]string{"-f", "-qq", "-o", "/dev/null", "bwrap"}, args...)
		name = "strace"
	}
	cmd := exec.CommandContext(b.ctx, name, args...)
	cmd.ExtraFiles = []*os.File{f}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var records atomic.Int64
	start := time.Now()
	if !v.traced {
		err := cmd.Run()
		if err != nil {
			return 0, 0, fmt.Errorf("%v: %s", err, stderr.String())
		}
		return time.Since(start), 0, nil
	}
	tr, err := tracer.Start(cmd, tracer.Options{Sink: tracer.SinkFunc(func(rs []tracer.Record) { records.Add(int64(len(rs))) })})
	if err != nil {
		return 0, 0, err
	}
	ws, err := tr.Wait()
	took := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if ws.ExitStatus() != 0 {
		return 0, 0, fmt.Errorf("exit %s: %s", tracer.ExitString(ws), stderr.String())
	}
	return took, records.Load(), nil
}

// quickList writes the first n regular files under src (relative to its
// parent) to a list file for tar -T.
func quickList(src string, n int) (string, int, error) {
	var names []string
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || len(names) >= n {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(filepath.Dir(src), p)
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	list := filepath.Join(os.TempDir(), fmt.Sprintf("art-bench-list-%d", os.Getpid()))
	return list, len(names), os.WriteFile(list, []byte(strings.Join(names, "\n")+"\n"), 0o600)
}

// traceMarkdown renders the trace section.
func (b *bench) traceMarkdown(took time.Duration) string {
	var s strings.Builder
	b.generated(&s, took)
	fmt.Fprintf(&s, "Machine: %s. ", b.machine())
	fmt.Fprintf(&s, "Medians of %d repetitions, the four variants back to back in each. Every variant runs in bwrap with art's seccomp program; \"untraced\" has only the deny-list, \"traced\" is art's default set (execve/execveat, connect, opens with write intent) under art's tracer, \"all\" traces every call (--trace-syscalls all), \"strace\" is `strace -f -o /dev/null` of the untraced sandbox. Overheads are against untraced (goal: <= 3%% for the default set).\n\n", b.cfg.reps)
	s.WriteString("| Workload | untraced | traced (default) | overhead | traced (all) | overhead | strace -f | overhead | records (default) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range b.rep.tr {
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(r.bench), r.untraced, r.traced, r.overhead, r.all, r.allOverhead, r.strace, r.straceOverhead, r.records)
	}
	return s.String()
}
