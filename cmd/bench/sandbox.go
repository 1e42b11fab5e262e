package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// sandbox: the cost of starting a command in art's sandbox, in one run:
// bare bwrap (the floor: namespaces and mounts, nothing else), a cold
// art run in direct mode and with a store (open, capture, mount, run,
// journal, snapshot, unmount), and warm art exec --jsonl (the overlay
// stays mounted; each request is a bwrap of its own, with its op and
// snapshots), with and without snapshots.

var sandboxMarkers = markers{"<!-- bench:sandbox:begin -->", "<!-- bench:sandbox:end -->",
	"## Sandbox: start-up of art run and warm art exec against bare bwrap"}

type sbRow struct{ bench, median, ratio, note string }

func (b *bench) sandboxSection() error {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return fmt.Errorf("bwrap not found")
	}
	root := filepath.Join(b.tmp, "sandbox")
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte("x\n"), 0o644); err != nil {
			return err
		}
	}
	// Direct mode binds ws as the sandbox uid: every directory above it
	// must let that uid through.
	os.Chmod(b.tmp, 0o755)
	os.Chmod(root, 0o755)
	store := filepath.Join(root, "ws.db")
	reps := max(b.cfg.reps, 15)
	if b.cfg.quick {
		reps = 5
	}
	run := func(stdin []byte, name string, args ...string) (time.Duration, error) {
		cmd := exec.CommandContext(b.ctx, name, args...)
		cmd.Dir = root
		cmd.Stdin = bytes.NewReader(stdin)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, errb.String())
		}
		return time.Since(start), nil
	}
	// Warm the store (first capture) and the page cache.
	if _, err := run(nil, b.art, "run", "-m", ws, "-d", store, "-i=false", "-q", "--", "true"); err != nil {
		return err
	}
	bare, err := repeat(reps, func(int) (time.Duration, error) {
		return run(nil, "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true")
	})
	if err != nil {
		return err
	}
	direct, err := repeat(reps, func(int) (time.Duration, error) {
		return run(nil, b.art, "run", "-m", ws, "-i=false", "-q", "--", "true")
	})
	if err != nil {
		return err
	}
	cold, err := repeat(reps, func(int) (time.Duration, error) {
		return run(nil, b.art, "run", "-m", ws, "-d", store, "-i=false", "-q", "--", "true")
	})
	if err != nil {
		return err
	}
	// Warm exec: (time for 1+N requests - time for 1) / N, so the mount's
	// set-up and tear-down drop out.
	const n = 100
	warm := func(req string) (time.Duration, error) {
		one := []byte(req + "\n")
		many := bytes.Repeat(one, n+1)
		t1, err := repeat(3, func(int) (time.Duration, error) {
			return run(one, b.art, "exec", "-d", store, "-m", ws, "--jsonl")
		})
		if err != nil {
			return 0, err
		}
		tn, err := repeat(3, func(int) (time.Duration, error) {
			return run(many, b.art, "exec", "-d", store, "-m", ws, "--jsonl")
		})
		if err != nil {
			return 0, err
		}
		return max(tn-t1, 0) / n, nil
	}
	warmSnap, err := warm(`{"command":["true"]}`)
	if err != nil {
		return err
	}
	warmNoSnap, err := warm(`{"command":["true"],"snapshot":false}`)
	if err != nil {
		return err
	}
	ratio := func(d time.Duration) string { return fmt.Sprintf("%.1fx", float64(d)/float64(bare)) }
	b.rep.sb = []sbRow{
		{"bare `bwrap ... true`", ms(bare), "1.0x", "namespaces, /proc, /dev; no seccomp, no cgroup"},
		{"`art run -- true`, direct mode", ms(direct), ratio(direct), "+ unprivileged uid, seccomp, cgroup, tmpfs mounts, hiding"},
		{"`art run -d -- true`, cold", ms(cold), ratio(cold), "+ open store, capture 20 files, mount, journal, snapshot, unmount"},
		{fmt.Sprintf("`art exec --jsonl`, warm, per request (of %d)", n), ms(warmSnap), ratio(warmSnap), "an op, snapshots before and after, a bwrap"},
		{"`art exec --jsonl`, warm, `\"snapshot\": false`", ms(warmNoSnap), ratio(warmNoSnap), "an op and a bwrap"},
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// sandboxMarkdown renders the sandbox section.
func (b *bench) sandboxMarkdown(took time.Duration) string {
	var s strings.Builder
	b.generated(&s, took)
	fmt.Fprintf(&s, "Machine: %s. Medians; every variant runs `true`. Warm exec is (time of 101 requests - time of 1) / 100 on one `art exec --jsonl`, so the mount's set-up drops out.\n\n", b.machine())
	s.WriteString("| Benchmark | median | vs bare bwrap | what it adds |\n|---|---|---|---|\n")
	for _, r := range b.rep.sb {
		fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", cell(r.bench), r.median, r.ratio, r.note)
	}
	return s.String()
}
