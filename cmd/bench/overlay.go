package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The overlay section (5) runs the same workloads in three places, back to
// back in every repetition: a directory on the ext4 disk that holds the
// stores, art's mount (a branch captured from a host directory on that
// disk), and go-fuse's loopback example over a directory on that disk -
// the floor for a FUSE filesystem written with the same library.

// Where each workload runs.
const (
	onExt4     = "ext4"
	onArt      = "art"
	onLoopback = "loopback"
	onForensic = "art --journal-writes"
)

// ovTargets are the places every row measures, in the order they run.
var ovTargets = []string{onExt4, onArt, onLoopback}

// ovSizes are the overlay section's workload sizes.
type ovSizes struct {
	seq      int64 // the sequential file, written and read in 1 MiB blocks
	big      int64 // the big new file written, fsynced and closed (row 1f)
	small    int64 // bytes written in 4 KiB write calls
	creates  int   // empty files created, then stat'ed
	gitFiles int   // files in the git status repository; 0 skips it
	cFiles   int   // modules of the C project; 0 skips the build
}

func (b *bench) ovSizes() ovSizes {
	if b.cfg.quick {
		return ovSizes{seq: 32 << 20, big: 64 << 20, small: 8 << 20, creates: 1000}
	}
	return ovSizes{seq: 256 << 20, big: 1 << 30, small: 64 << 20, creates: 5000, gitFiles: 10000, cFiles: 200}
}

// ovRun is one run of the overlay section.
type ovRun struct {
	b    *bench
	sz   ovSizes
	root string            // b.tmp/overlay
	dirs map[string]string // target -> its working directory
	art  *daemon
	fore *daemon // art mount --journal-writes
	loop *daemon
	rep  int // the current repetition, for file names

	tarFiles int   // files in the tarball of row 4
	tarBytes int64 // their bytes
	forensic ovRow // row 7, measured with row 2 and shown last
}

// ovRow is one line of the overlay table.
type ovRow struct {
	bench, art, ext4, loopback, artExt4, artLoop, goal string
}

// samples are one row's timings by target, one per repetition.
type samples map[string][]time.Duration

// overlay: section 5.
func (b *bench) overlay() (err error) {
	o := &ovRun{b: b, sz: b.ovSizes(), root: filepath.Join(b.tmp, "overlay")}
	for _, tool := range []string{"tar", "rm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found in PATH", tool)
		}
	}
	if o.sz.cFiles > 0 {
		for _, tool := range []string{"make", "cc"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("%s not found in PATH (needed for the build row; -quick skips it)", tool)
			}
		}
	}
	defer func() {
		// Stop the servers whatever happened; a server that did not exit
		// cleanly fails the run (art's unmount journals and snapshots).
		for _, d := range []*daemon{o.art, o.fore, o.loop} {
			if d == nil {
				continue
			}
			if serr := d.stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()
	if err := o.setup(); err != nil {
		return err
	}
	steps := []func() error{o.sequential, o.smallWrites, o.createStat, o.untar}
	if o.sz.gitFiles > 0 {
		steps = append(steps, o.gitStatus)
	}
	if o.sz.cFiles > 0 {
		steps = append(steps, o.build)
	}
	for _, f := range steps {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
	}
	b.rep.ov = append(b.rep.ov, o.forensic)
	if n := interrupted.Load(); n > 0 {
		b.rep.ovNote("%d of the harness's own file requests (create, close, lstat) failed with EINTR (a close is not retried; the others were): a Go preemption signal interrupted a FUSE request, and art answered EINTR. After an interrupted create the file can exist already, and art then fails the retried open (O_CREAT without O_EXCL) with EEXIST.", n)
	}
	// Unmount here rather than in the defer, to time it and to see the
	// store's final size.
	start := time.Now()
	art := o.art
	o.art = nil // stopped here, not again in the defer
	if err := art.stop(); err != nil {
		return err
	}
	b.rep.ovNote("art's unmount after the run (journal the open files, snapshot, commit) took %s; the store ended at %s (file contents are stored compressed and kept in the history after rm).",
		fmtDur(time.Since(start)), fmtBytes(storeBytes(filepath.Join(o.root, "art.db"))))
	return nil
}

// setup makes the directories, the lower file and trees, and starts the
// three FUSE servers.
func (o *ovRun) setup() error {
	b := o.b
	host := filepath.Join(o.root, "host", "ws") // captured into art at /ws
	lbOrig := filepath.Join(o.root, "loopback-orig")
	o.dirs = map[string]string{
		onExt4:     filepath.Join(o.root, "ext4"),
		onArt:      filepath.Join(o.root, "art-mnt", "ws"),
		onLoopback: filepath.Join(o.root, "loopback-mnt"),
		onForensic: filepath.Join(o.root, "forensic-mnt"),
	}
	for _, d := range []string{host, lbOrig, o.dirs[onExt4], filepath.Dir(o.dirs[onArt]), o.dirs[onLoopback], o.dirs[onForensic]} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	loopback := filepath.Join(o.root, "loopback")
	b.progress("building go-fuse's loopback example")
	cmd := exec.CommandContext(b.ctx, "go", "build", "-o", loopback, "github.com/hanwen/go-fuse/v2/example/loopback")
	cmd.Dir = b.module
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build loopback: %w\n%s", err, out)
	}
	version, _, err := b.command(b.module, nil, "go", "list", "-m", "-f", "{{.Version}}", "github.com/hanwen/go-fuse/v2")
	if err != nil {
		return err
	}
	b.rep.ovNote("loopback is go-fuse %s's example/loopback as shipped (`loopback -directmountstrict MNT DIR`: 1 s entry and attr timeouts, FUSE passthrough for every open file when run as root).",
		strings.TrimSpace(string(version)))

	// The unmodified lower file: in the captured host directory for art
	// (and read there directly for ext4), and a copy under loopback.
	// An hour old, as a workspace file usually is: art trusts its stat
	// cache, and with it the host file, only for files whose mtime is
	// outside the last seconds before the capture (git's racy-clean rule).
	lower := randBytes(o.sz.seq, b.cfg.seed, 1<<32)
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{filepath.Join(host, "lower.bin"), filepath.Join(lbOrig, "lower.bin")} {
		if err := os.WriteFile(p, lower, 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, old, old); err != nil {
			return err
		}
	}
	if o.sz.gitFiles > 0 {
		if err := o.gitRepos(host, filepath.Join(lbOrig, "repo")); err != nil {
			return err
		}
	}
	if o.sz.cFiles > 0 {
		if err := writeCProject(filepath.Join(o.root, "cproject"), o.sz.cFiles); err != nil {
			return err
		}
	}
	if err := o.tarball(); err != nil {
		return err
	}
	syscall.Sync()

	start := time.Now()
	o.art, err = b.startDaemon("art mount", filepath.Dir(o.dirs[onArt]), "serving ", 10*time.Minute,
		b.art, "mount", "-d", filepath.Join(o.root, "art.db"), "-m", host, filepath.Dir(o.dirs[onArt]))
	if err != nil {
		return err
	}
	capture := time.Since(start)
	b.progress("art mount: captured the host directory and mounted in %s", fmtDur(capture))
	_, fast, _ := strings.Cut(o.art.readyLine(), "fast paths: ")
	b.rep.ovNote("art mount -m captured the host directory (%s) and mounted in %s; its fast paths: %s. The stores, the mounts' upper copies (in $TMPDIR), the ext4 directory and loopback's directory are all on %s.",
		o.hostLabel(), fmtDur(capture), fast, diskLabel(o.root))
	o.fore, err = b.startDaemon("art mount --journal-writes", o.dirs[onForensic], "serving ", time.Minute,
		b.art, "mount", "-d", filepath.Join(o.root, "forensic.db"), "--journal-writes", o.dirs[onForensic])
	if err != nil {
		return err
	}
	o.loop, err = b.startDaemon("loopback", o.dirs[onLoopback], "", time.Minute,
		loopback, "-q", "-directmountstrict", o.dirs[onLoopback], lbOrig)
	return err
}

func (o *ovRun) hostLabel() string {
	s := "a " + fmtSize(o.sz.seq) + " file"
	if o.sz.gitFiles > 0 {
		s += fmt.Sprintf(" and a git repository of %s files", fmtInt(o.sz.gitFiles))
	}
	return s
}

// quickTarFiles is the size of row 4's tarball with -quick.
const quickTarFiles = 500

// tarball packs the ingest tree (a copy of $GOROOT/src) once; with -quick
// only its first quickTarFiles files, whose directories tar x then makes
// implicitly.
func (o *ovRun) tarball() error {
	t, err := o.b.ingestTree()
	if err != nil {
		return err
	}
	tar := filepath.Join(o.root, "src.tar")
	if !o.b.cfg.quick {
		o.tarFiles, o.tarBytes = len(t.files), t.bytes
		_, _, err = o.b.command(t.dir, nil, "tar", "-cf", tar, ".")
		return err
	}
	o.tarFiles = min(quickTarFiles, len(t.files))
	for _, n := range t.sizes[:o.tarFiles] {
		o.tarBytes += n
	}
	list := filepath.Join(o.root, "src.list")
	if err := os.WriteFile(list, []byte(strings.Join(t.files[:o.tarFiles], "\n")+"\n"), 0o644); err != nil {
		return err
	}
	_, _, err = o.b.command(t.dir, nil, "tar", "-cf", tar, "-T", list)
	return err
}

// each runs f on every target in turn, reps times, and returns the times.
// Between two measurements dirty pages are written back (untimed), so one
// target's writeback does not land in the next one's time.
func (o *ovRun) each(targets []string, f func(target, dir string) (time.Duration, error)) (samples, error) {
	s := samples{}
	for rep := range o.b.cfg.reps {
		o.rep = rep
		for _, t := range targets {
			if err := o.b.ctx.Err(); err != nil {
				return nil, err
			}
			d, err := f(t, o.dirs[t])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t, err)
			}
			s[t] = append(s[t], d)
			syscall.Sync()
		}
	}
	return s, nil
}

// A unit formats what a row measured.
type unit struct {
	rate       func(d time.Duration) string // the value shown
	throughput bool                         // higher is better
}

func mbps(n int64) unit {
	return unit{func(d time.Duration) string { return fmtRate(n, d) }, true}
}

func perSec(n int, what string) unit {
	return unit{func(d time.Duration) string { return fmtInt(int(float64(n)/d.Seconds())) + " " + what + "/s" }, true}
}

var elapsed = unit{fmtDur, false}

// A goal bounds art's ratio to ext4: at most limit for times, at least
// limit for throughputs. limit 0 is no goal.
type goal struct {
	limit float64
	text  string
}

// ratios returns art's paired ratios to ext4 and loopback in the row's
// direction: art time / peer time, or art rate / peer rate.
func (u unit) ratio(s samples, peer string) float64 {
	if u.throughput {
		return ratio(s[peer], s[onArt])
	}
	return ratio(s[onArt], s[peer])
}

func (u unit) kind() string {
	if u.throughput {
		return "rate"
	}
	return "time"
}

// add turns one row's samples into a table line.
func (o *ovRun) add(label string, s samples, u unit, g goal) {
	r := ovRow{bench: label,
		art: u.rate(median(s[onArt])), ext4: u.rate(median(s[onExt4])), loopback: u.rate(median(s[onLoopback])),
	}
	re, rl := u.ratio(s, onExt4), u.ratio(s, onLoopback)
	r.artExt4 = fmt.Sprintf("%s %s", u.kind(), fmtRatio(re))
	r.artLoop = fmt.Sprintf("%s %s", u.kind(), fmtRatio(rl))
	r.goal = "-"
	if g.limit > 0 {
		met := re <= g.limit
		if u.throughput {
			met = re >= g.limit
		}
		r.goal = g.text + ": " + metText(met)
	}
	o.b.progress("%s: art %s, ext4 %s, loopback %s; art/ext4 %s, art/loopback %s", label, r.art, r.ext4, r.loopback, r.artExt4, r.artLoop)
	o.b.rep.ov = append(o.b.rep.ov, r)
}

func metText(met bool) string {
	if met {
		return "**met**"
	}
	return "**missed**"
}

// sequential: row 1, a file written and read in 1 MiB blocks, and an
// unmodified lower file read.
func (o *ovRun) sequential() error {
	n := o.sz.seq
	var data []byte
	var artCPU []time.Duration
	write, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		if t == ovTargets[0] {
			// Fresh bytes every repetition: art's store deduplicates.
			data = randBytes(n, o.b.cfg.seed, uint64(o.rep))
		}
		cpu := o.art.cpu()
		d, err := writeFile(filepath.Join(dir, o.name("seq")), data, 1<<20)
		if t == onArt {
			artCPU = append(artCPU, o.art.cpu()-cpu)
		}
		return d, err
	})
	if err != nil {
		return err
	}
	// The reads reuse the files of the last repetition.
	var cold, warm samples
	cold, err = o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		if err := dropCaches(); err != nil {
			return 0, err
		}
		return readFile(filepath.Join(dir, fmt.Sprintf("seq-%d", o.b.cfg.reps-1)), n)
	})
	if err != nil {
		return err
	}
	warm, err = o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		p := filepath.Join(dir, fmt.Sprintf("seq-%d", o.b.cfg.reps-1))
		if _, err := readFile(p, n); err != nil { // warm the cache
			return 0, err
		}
		return readFile(p, n)
	})
	if err != nil {
		return err
	}
	lowerCold, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		if err := dropCaches(); err != nil {
			return 0, err
		}
		return readFile(o.lowerPath(t), n)
	})
	if err != nil {
		return err
	}
	lowerWarm, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		if _, err := readFile(o.lowerPath(t), n); err != nil {
			return 0, err
		}
		return readFile(o.lowerPath(t), n)
	})
	if err != nil {
		return err
	}
	// Row 1f: a download or a linker's output, durable as after cp + sync.
	var bigData []byte
	big, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		if t == ovTargets[0] {
			bigData = randBytes(o.sz.big, o.b.cfg.seed, 1<<33+uint64(o.rep))
		}
		p := filepath.Join(dir, fmt.Sprintf("big-%d", o.rep))
		d, err := writeFileSync(p, bigData, 1<<20)
		if err != nil {
			return 0, err
		}
		return d, os.Remove(p)
	})
	bigData = nil
	if err != nil {
		return err
	}
	// The daemon's peak memory after the big file: content streams through
	// it at close (issue 16: under 256 MiB for a 4 GiB file).
	bigHWM := o.art.hwm()
	for _, t := range ovTargets {
		for rep := range o.b.cfg.reps {
			if err := os.Remove(filepath.Join(o.dirs[t], fmt.Sprintf("seq-%d", rep))); err != nil {
				return err
			}
		}
	}
	size := fmtSize(n)
	o.add("1a. Sequential write of a new "+size+" file in 1 MiB writes, then close", write, mbps(n), goal{})
	o.add("1b. Sequential read of that file, cold (after drop_caches)", cold, mbps(n), goal{})
	o.add("1c. Sequential read of that file, warm (page cache)", warm, mbps(n), goal{})
	o.add("1d. Sequential read of an unmodified "+size+" lower file, cold (art: FUSE passthrough to the host file)", lowerCold, mbps(n),
		goal{0.95, ">= 0.95 of ext4"})
	o.add("1e. The same lower file, warm", lowerWarm, mbps(n), goal{0.95, ">= 0.95 of ext4"})
	o.add("1f. Sequential write of a new incompressible "+fmtSize(o.sz.big)+" file in 1 MiB writes, then fsync and close (cp + sync)", big, mbps(o.sz.big), goal{0.4, ">= 0.4 of ext4 (issue 16)"})
	o.b.rep.ovNote("Row 1: the written files hold pseudo-random bytes, fresh in every repetition (art's store would deduplicate repeated content); the times of 1a include close, at which art chunks, hashes, compresses and journals the file (its daemon used %s of CPU per file, median). 1d reads the captured host file: ext4 reads the same host file directly, loopback a copy under its directory. After 1f, art's daemon had peaked at %s resident.", fmtDur(median(artCPU)), fmtBytes(bigHWM))
	return nil
}

// lowerPath is the unmodified lower file as each target sees it.
func (o *ovRun) lowerPath(t string) string {
	if t == onExt4 {
		return filepath.Join(o.root, "host", "ws", "lower.bin")
	}
	return filepath.Join(o.dirs[t], "lower.bin")
}

// name is a file name unique to the current repetition.
func (o *ovRun) name(what string) string { return fmt.Sprintf("%s-%d", what, o.rep) }

// smallWrites: rows 2 and 7, a file written in 4 KiB write calls, on each
// target and on a second art mount in forensic mode.
func (o *ovRun) smallWrites() error {
	n := o.sz.small
	var data []byte
	targets := append(append([]string{}, ovTargets...), onForensic)
	var artCPU, foreCPU []time.Duration
	s, err := o.each(targets, func(t, dir string) (time.Duration, error) {
		if t == targets[0] {
			data = randBytes(n, o.b.cfg.seed, 1<<16+uint64(o.rep))
		}
		var d *daemon
		switch t {
		case onArt:
			d = o.art
		case onForensic:
			d = o.fore
		}
		var cpu time.Duration
		if d != nil {
			cpu = d.cpu()
		}
		p := filepath.Join(dir, o.name("small"))
		took, err := writeFile(p, data, 4096)
		if err != nil {
			return 0, err
		}
		if d != nil {
			cpu = d.cpu() - cpu
			if t == onArt {
				artCPU = append(artCPU, cpu)
			} else {
				foreCPU = append(foreCPU, cpu)
			}
		}
		return took, os.Remove(p)
	})
	if err != nil {
		return err
	}
	label := fmt.Sprintf("2. %s written in 4 KiB write calls to a new file, then close", fmtSize(n))
	o.add(label, s, mbps(n), goal{})
	u := mbps(n)
	fore := ovRow{
		bench: "7. Row 2 on a mount with --journal-writes (forensic mode: every write request journaled)",
		art:   u.rate(median(s[onForensic])) + fmt.Sprintf(" (without the flag %s; with/without: rate %s)", u.rate(median(s[onArt])), fmtRatio(ratio(s[onArt], s[onForensic]))),
		ext4:  u.rate(median(s[onExt4])), loopback: u.rate(median(s[onLoopback])),
		artExt4: "rate " + fmtRatio(ratio(s[onExt4], s[onForensic])), artLoop: "rate " + fmtRatio(ratio(s[onLoopback], s[onForensic])), goal: "-",
	}
	o.b.progress("%s: %s", fore.bench, fore.art)
	o.forensic = fore
	writes := n / 4096
	o.b.rep.ovNote("Rows 2 and 7: %s write requests; art's daemon used %s of CPU for the file (%s per request) without the flag, %s (%s per request) with it, medians.",
		fmtInt(int(writes)), fmtDur(median(artCPU)), fmtDur(median(artCPU)/time.Duration(writes)),
		fmtDur(median(foreCPU)), fmtDur(median(foreCPU)/time.Duration(writes)))
	return nil
}

// createStat: row 3, create+close of empty files, then stat of each, warm
// and cold.
func (o *ovRun) createStat() error {
	n := o.sz.creates
	var artCPU []time.Duration
	dirOf := func(dir string) string { return filepath.Join(dir, o.name("creates")) }
	create, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		d := dirOf(dir)
		if err := os.Mkdir(d, 0o755); err != nil {
			return 0, err
		}
		cpu := o.art.cpu()
		took, err := createFiles(d, n)
		if t == onArt {
			artCPU = append(artCPU, o.art.cpu()-cpu)
		}
		return took, err
	})
	if err != nil {
		return err
	}
	warm, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		return statFiles(dirOf(dir), n)
	})
	if err != nil {
		return err
	}
	cold, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		if err := dropCaches(); err != nil {
			return 0, err
		}
		return statFiles(dirOf(dir), n)
	})
	if err != nil {
		return err
	}
	for _, t := range ovTargets {
		for rep := range o.b.cfg.reps {
			if err := os.RemoveAll(filepath.Join(o.dirs[t], fmt.Sprintf("creates-%d", rep))); err != nil {
				return err
			}
		}
	}
	o.add(fmt.Sprintf("3a. Create+close of %s empty files in a new directory", fmtInt(n)), create, perSec(n, "files"), goal{})
	o.add("3b. stat of each of them, warm (right after creating)", warm, perSec(n, "stats"), goal{})
	o.add("3c. stat of each of them, cold (after drop_caches)", cold, perSec(n, "stats"), goal{})
	o.b.rep.ovNote("Row 3: art's daemon used %s of CPU per created file (median). The stat rows repeat on the directories of the last repetition.",
		fmtDur(median(artCPU)/time.Duration(n)))
	return nil
}

// untar: row 4, tar x of the ingest tree and rm -rf of the result.
func (o *ovRun) untar() error {
	tarball := filepath.Join(o.root, "src.tar")
	var xCPU, rmCPU []time.Duration
	cpuOf := func(t string, f func() (time.Duration, error), into *[]time.Duration) (time.Duration, error) {
		cpu := o.art.cpu()
		d, err := f()
		if t == onArt {
			*into = append(*into, o.art.cpu()-cpu)
		}
		return d, err
	}
	var x, rm samples
	x, rm = samples{}, samples{}
	for rep := range o.b.cfg.reps {
		o.rep = rep
		// Extract on every target, then remove on every target, so that
		// each rm finds the tree as the extraction left it.
		for _, step := range []string{"x", "rm"} {
			for _, tg := range ovTargets {
				if err := o.b.ctx.Err(); err != nil {
					return err
				}
				dest := filepath.Join(o.dirs[tg], o.name("untar"))
				var d time.Duration
				var err error
				if step == "x" {
					if err := os.Mkdir(dest, 0o755); err != nil {
						return err
					}
					d, err = cpuOf(tg, func() (time.Duration, error) {
						// --no-same-owner: extract as an unprivileged user
						// would (root's tar would chown every file).
						_, d, err := o.b.command(dest, nil, "tar", "--no-same-owner", "-xf", tarball)
						return d, err
					}, &xCPU)
					x[tg] = append(x[tg], d)
				} else {
					d, err = cpuOf(tg, func() (time.Duration, error) { return o.b.sh(o.dirs[tg], "rm -rf "+o.name("untar")) }, &rmCPU)
					rm[tg] = append(rm[tg], d)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", tg, err)
				}
				syscall.Sync()
			}
		}
	}
	if o.b.cfg.perf != "" {
		if err := o.perfUntar(tarball); err != nil {
			return err
		}
	}
	files := o.tarFiles
	o.add(fmt.Sprintf("4a. `tar x` of %s (%s files, %s)", o.b.srcLabel()+o.quickSuffix(), fmtInt(files), fmtBytes(o.tarBytes)), x, elapsed, goal{2, "<= 2x ext4"})
	o.add("4b. `rm -rf` of the extracted tree", rm, elapsed, goal{1.5, "<= 1.5x ext4"})
	o.b.rep.ovNote("Row 4: art's daemon used %s of CPU for the extraction (%s per file) and %s for the rm -rf (%s per file), medians.",
		fmtDur(median(xCPU)), fmtDur(median(xCPU)/time.Duration(files)), fmtDur(median(rmCPU)), fmtDur(median(rmCPU)/time.Duration(files)))
	return nil
}

func (o *ovRun) quickSuffix() string {
	if o.b.cfg.quick {
		return fmt.Sprintf(", first %s files", fmtInt(quickTarFiles))
	}
	return ""
}

// perfUntar records art's daemon with perf during one more, untimed,
// extraction (-perf FILE).
func (o *ovRun) perfUntar(tarball string) error {
	b := o.b
	dest := filepath.Join(o.dirs[onArt], "untar-perf")
	if err := os.Mkdir(dest, 0o755); err != nil {
		return err
	}
	perf := exec.Command("perf", "record", "-g", "-F", "999", "-p", fmt.Sprint(o.art.pid()), "-o", b.cfg.perf)
	var out bytes.Buffer
	perf.Stdout, perf.Stderr = &out, &out
	if err := perf.Start(); err != nil {
		return fmt.Errorf("perf record: %w", err)
	}
	time.Sleep(time.Second) // let perf attach
	_, d, err := b.command(dest, nil, "tar", "--no-same-owner", "-xf", tarball)
	perf.Process.Signal(syscall.SIGINT)
	// perf writes its file on SIGINT and then dies of the signal.
	var exit *exec.ExitError
	if werr := perf.Wait(); werr != nil && err == nil &&
		!(errors.As(werr, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
		err = fmt.Errorf("perf record: %w\n%s", werr, tail(out.Bytes()))
	}
	if err != nil {
		return err
	}
	b.progress("recorded art's daemon during an untar of %s into %s; read it with: perf report -i %s --no-children --sort symbol",
		fmtDur(d), b.cfg.perf, b.cfg.perf)
	_, err = b.sh(o.dirs[onArt], "rm -rf untar-perf")
	return err
}

// gitRepos makes a git repository of the first gitFiles files of
// $GOROOT/src and copies it (with .git) into the host directory art
// captures, onto ext4, and under loopback's directory.
func (o *ovRun) gitRepos(host, lbRepo string) error {
	b := o.b
	tmpl := filepath.Join(o.root, "repo-template")
	t, err := copyTree(filepath.Join(b.goroot, "src"), tmpl, o.sz.gitFiles)
	if err != nil {
		return err
	}
	gitDir := filepath.Join(tmpl, ".git")
	if err := b.gitInit(gitDir, tmpl); err != nil {
		return err
	}
	if _, err := b.gitCommitAll(gitDir, tmpl, "repo"); err != nil {
		return err
	}
	for _, dst := range []string{filepath.Join(host, "repo"), filepath.Join(o.dirs[onExt4], "repo"), lbRepo} {
		if _, err := copyTree(tmpl, dst, 0); err != nil {
			return err
		}
	}
	b.progress("git repository of %d files made and copied", len(t.files))
	return os.RemoveAll(tmpl)
}

// gitStatus: row 5, git status --porcelain in a 10k-file repository, the
// second of two runs (the first refreshes the index: the copies have new
// inodes and ctimes).
func (o *ovRun) gitStatus() error {
	var dirty []string
	var artCPU []time.Duration
	s, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		repo := filepath.Join(dir, "repo")
		if _, _, err := o.b.command(repo, gitEnv, "git", "status", "--porcelain"); err != nil {
			return 0, err
		}
		cpu := o.art.cpu()
		out, d, err := o.b.command(repo, gitEnv, "git", "status", "--porcelain")
		if t == onArt {
			artCPU = append(artCPU, o.art.cpu()-cpu)
		}
		if len(bytes.TrimSpace(out)) > 0 {
			dirty = append(dirty, fmt.Sprintf("%s: %d lines", t, bytes.Count(out, []byte("\n"))))
		}
		return d, err
	})
	if err != nil {
		return err
	}
	o.add(fmt.Sprintf("5. `git status --porcelain` in a %s-file repository, warm (second of two runs; art: captured with -m)", fmtInt(o.sz.gitFiles)),
		s, elapsed, goal{1, "<= 1.0x ext4"})
	o.b.rep.ovNote("Row 5: art's daemon used %s of CPU per git status (median).", fmtDur(median(artCPU)))
	if len(dirty) > 0 {
		o.b.rep.ovNote("Row 5: git status was not clean (%s): a stat that changes between runs makes git re-read files.", strings.Join(dirty, ", "))
	}
	return nil
}

// build: row 6, make -j2 of a generated C project, sources and outputs on
// the target. The sources are copied in untimed before each build.
func (o *ovRun) build() error {
	tmpl := filepath.Join(o.root, "cproject")
	s, err := o.each(ovTargets, func(t, dir string) (time.Duration, error) {
		dst := filepath.Join(dir, o.name("cproject"))
		if _, err := copyTree(tmpl, dst, 0); err != nil {
			return 0, err
		}
		syscall.Sync()
		_, d, err := o.b.command(dst, nil, "make", "-s", "-j2")
		if err != nil {
			return 0, err
		}
		return d, os.RemoveAll(dst)
	})
	if err != nil {
		return err
	}
	o.add(fmt.Sprintf("6. `make -j2` of a generated C project (%d modules + main, gcc -O2 -g -MMD, sources and outputs on the target)", o.sz.cFiles),
		s, elapsed, goal{})
	return nil
}

// randBytes returns n pseudo-random bytes from a ChaCha8 stream seeded
// with seed and stream.
func randBytes(n int64, seed, stream uint64) []byte {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
		key[8+i] = byte(stream >> (8 * i))
	}
	buf := make([]byte, n)
	rand.NewChaCha8(key).Read(buf)
	return buf
}

// writeFile creates path and writes data in block-sized write calls, then
// closes it; it returns the time from create to close.
func writeFile(path string, data []byte, block int) (time.Duration, error) {
	start := time.Now()
	fd, err := openCreate(path)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), path)
	for off := 0; off < len(data); off += block {
		if _, err := f.Write(data[off:min(off+block, len(data))]); err != nil {
			f.Close()
			return 0, err
		}
	}
	err = closeErr(f.Close())
	return time.Since(start), err
}

// writeFileSync is writeFile with an fsync before the close: the time until
// the content is durable.
func writeFileSync(path string, data []byte, block int) (time.Duration, error) {
	start := time.Now()
	fd, err := openCreate(path)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), path)
	for off := 0; off < len(data); off += block {
		if _, err := f.Write(data[off:min(off+block, len(data))]); err != nil {
			f.Close()
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("fsync %s: %w", path, err)
	}
	err = closeErr(f.Close())
	return time.Since(start), err
}

// closeErr passes on the error of a close, except EINTR: the descriptor is
// gone either way, and art journals a file that is still dirty at release
// as well as at flush.
func closeErr(err error) error {
	if errors.Is(err, syscall.EINTR) {
		interrupted.Add(1)
		return nil
	}
	return err
}

// readFile reads path in 1 MiB read calls and checks it had n bytes.
// (Not io.Copy to io.Discard: that would read in 8 KiB calls.)
func readFile(path string, n int64) (time.Duration, error) {
	buf := make([]byte, 1<<20)
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var got int64
	for {
		k, err := f.Read(buf)
		got += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	if got != n {
		return 0, fmt.Errorf("read %s: %d bytes, want %d", path, got, n)
	}
	return d, nil
}

// createFiles creates and closes n empty files in dir.
func createFiles(dir string, n int) (time.Duration, error) {
	start := time.Now()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%05d", i))
		fd, err := openCreate(p)
		if err != nil {
			return 0, err
		}
		if err := closeErr(syscall.Close(fd)); err != nil {
			return 0, &os.PathError{Op: "close", Path: p, Err: err}
		}
	}
	return time.Since(start), nil
}

// statFiles lstats the n files createFiles made.
func statFiles(dir string, n int) (time.Duration, error) {
	var st syscall.Stat_t
	start := time.Now()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%05d", i))
		for {
			err := syscall.Lstat(p, &st)
			if errors.Is(err, syscall.EINTR) {
				interrupted.Add(1)
				continue
			}
			if err != nil {
				return 0, &os.PathError{Op: "lstat", Path: p, Err: err}
			}
			break
		}
	}
	return time.Since(start), nil
}

// interrupted counts requests that failed with EINTR and were retried.
// The Go runtime's preemption signal can reach a thread blocked in a FUSE
// request; the kernel then sends FUSE_INTERRUPT, which art honours (the
// C tools of the other rows never see a signal).
var interrupted atomic.Int64

// openCreate opens path for writing, creating or truncating it, and
// retries EINTR as package os does. art can fail an interrupted create
// with EINTR after the file was made; the retry then fails with EEXIST
// although O_EXCL is not set, so it opens the existing file instead.
func openCreate(path string) (int, error) {
	flags := syscall.O_CREAT | syscall.O_WRONLY | syscall.O_TRUNC | syscall.O_CLOEXEC
	retried := false
	for {
		fd, err := syscall.Open(path, flags, 0o644)
		switch {
		case errors.Is(err, syscall.EINTR):
			interrupted.Add(1)
			retried = true
			continue
		case errors.Is(err, syscall.EEXIST) && retried && flags&syscall.O_CREAT != 0:
			flags &^= syscall.O_CREAT
			continue
		case err != nil:
			return -1, &os.PathError{Op: "create", Path: path, Err: err}
		}
		return fd, nil
	}
}

// fmtSize writes a power-of-two size: 256 MiB.
func fmtSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmtBytes(n)
}

// diskLabel describes the filesystem that holds path: type, device and,
// for ext4, whether it has a journal (jbd2 lists journaled devices).
func diskLabel(path string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "the same filesystem"
	}
	var best, fstype, source string
	for _, line := range strings.Split(string(b), "\n") {
		mp := mountPoint(line)
		if mp == "" || !(path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) || len(mp) < len(best) {
			continue
		}
		_, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(post); ok && len(f) >= 2 {
			best, fstype, source = mp, f[0], f[1]
		}
	}
	if best == "" {
		return "the same filesystem"
	}
	s := fmt.Sprintf("%s (%s on %s)", best, fstype, source)
	if fstype == "ext4" {
		if _, err := os.Stat(filepath.Join("/proc/fs/jbd2", filepath.Base(source)+"-8")); err != nil {
			s = fmt.Sprintf("%s (%s without a journal, on %s)", best, fstype, source)
		}
	}
	return s
}
