package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// quickFiles is the size of the ingest tree with -quick.
const quickFiles = 2000

// pushStats is the part of `art push --json` the benchmarks read.
type pushStats struct {
	Files       int   `json:"files"`
	New         int   `json:"new"`
	Changed     int   `json:"changed"`
	Deleted     int   `json:"deleted"`
	Unchanged   int   `json:"unchanged"`
	BytesRead   int64 `json:"bytes_read"`
	BytesStored int64 `json:"bytes_stored"`
}

// push runs `art push` of dir into store and returns its report and wall
// time (process start and store open included, as a user sees it).
func (b *bench) push(dir, store string) (pushStats, time.Duration, error) {
	st, d, _, err := b.pushCPU(dir, store)
	return st, d, err
}

// pushCPU is push that also returns the CPU time art used.
func (b *bench) pushCPU(dir, store string) (pushStats, time.Duration, time.Duration, error) {
	out, d, cpu, err := b.commandCPU("", nil, b.art, "push", "-m", dir, "-d", store, "--json", "-q")
	if err != nil {
		return pushStats{}, d, cpu, err
	}
	var st pushStats
	if err := json.Unmarshal(out, &st); err != nil {
		return pushStats{}, d, cpu, fmt.Errorf("art push --json: %w", err)
	}
	return st, d, cpu, nil
}

// ingestTree copies the source tree once per run.
func (b *bench) ingestTree() (*tree, error) {
	if b.tree != nil {
		return b.tree, nil
	}
	limit := 0
	if b.cfg.quick {
		limit = quickFiles
	}
	start := time.Now()
	t, err := copyTree(b.cfg.src, filepath.Join(b.tmp, "src"), limit)
	if err != nil {
		return nil, err
	}
	b.progress("copied %s: %d files, %s in %s", b.cfg.src, len(t.files), fmtBytes(t.bytes), time.Since(start).Round(time.Millisecond))
	b.tree = t
	return t, nil
}

func (b *bench) treeLabel(t *tree) string {
	what := "copy of " + b.srcLabel()
	if b.cfg.quick {
		what = fmt.Sprintf("first %d files of %s", quickFiles, b.srcLabel())
	}
	return fmt.Sprintf("%s: %s files, %s", what, fmtInt(len(t.files)), fmtBytes(t.bytes))
}

// ingest: section 1. Each repetition runs cat, art push and git add+commit
// back to back, and the ratios are medians of the per-repetition ratios, so
// a change in the machine's load between repetitions cancels out.
func (b *bench) ingest() error {
	t, err := b.ingestTree()
	if err != nil {
		return err
	}
	// cat reads the same bytes through the page cache; this first run warms
	// the cache for it and for everything after.
	cat := "find . -type f -exec cat {} + > /dev/null"
	if _, err := b.sh(t.dir, cat); err != nil {
		return err
	}
	var catT, artT, cpus, gitT []time.Duration
	var last pushStats
	for i := range b.cfg.reps {
		d, err := b.sh(t.dir, cat)
		if err != nil {
			return err
		}
		catT = append(catT, d)

		store := filepath.Join(b.tmp, fmt.Sprintf("ingest-%d.db", i))
		st, d, cpu, err := b.pushCPU(t.dir, store)
		if err != nil {
			return err
		}
		if st.Files != len(t.files) || st.New != len(t.files) {
			return fmt.Errorf("art push saw %d files (%d new), the tree has %d", st.Files, st.New, len(t.files))
		}
		if b.store != "" {
			removeStore(b.store)
		}
		b.store, last = store, st
		artT, cpus = append(artT, d), append(cpus, cpu)
		b.progress("ingest %d/%d: cat %s, art push %s (CPU %s)", i+1, b.cfg.reps, fmtDur(catT[i]), fmtDur(d), fmtDur(cpu))

		if !b.git {
			continue
		}
		gitDir := filepath.Join(b.tmp, fmt.Sprintf("git-ingest-%d", i))
		if err := b.gitInit(gitDir, t.dir); err != nil {
			return err
		}
		if d, err = b.gitCommitAll(gitDir, t.dir, "ingest"); err != nil {
			return err
		}
		if b.gitDir != "" {
			os.RemoveAll(b.gitDir)
		}
		b.gitDir = gitDir
		gitT = append(gitT, d)
		b.progress("ingest %d/%d: git add+commit %s", i+1, b.cfg.reps, fmtDur(d))
	}
	size := storeBytes(b.store)
	objs, err := objectBytes(b.store)
	if err != nil {
		return err
	}
	if b.cfg.cpuprofile != "" {
		store := filepath.Join(b.tmp, "profile.db")
		defer removeStore(store)
		if err := b.profiledImport(t, store, "push"); err != nil {
			return err
		}
	}

	label := "1. Ingest: push into a fresh store (" + b.treeLabel(t) + ")"
	rate := func(ds []time.Duration) string {
		d := median(ds)
		return fmt.Sprintf("%s (%s)", fmtRate(t.bytes, d), fmtDur(d))
	}
	b.rep.add(row{label, rate(artT) + ", CPU " + fmtDur(median(cpus)), "`cat` of every file, page cache warm: " + rate(catT),
		"art/cat " + fmtRatio(ratio(catT, artT)) + " (throughput)", "-"})
	b.rep.note("Ingest: the store ends at %s (%s of tree bytes); its objects hold %s of chunks, %s of manifests, %s of trees; push --json: bytes_read %s, bytes_stored %s.",
		fmtBytes(size), fmtPct(size, t.bytes), fmtBytes(objs[1]), fmtBytes(objs[2]), fmtBytes(objs[3]),
		fmtBytes(last.BytesRead), fmtBytes(last.BytesStored))
	if !b.git {
		return nil
	}
	gitSize, err := duBytes(b.gitDir)
	if err != nil {
		return err
	}
	b.rep.add(row{"", "", "`git add -A && git commit` into a fresh repository: " + rate(gitT),
		"art/git " + fmtRatio(ratio(gitT, artT)) + " (throughput)", "-"})
	b.rep.note("Ingest: .git ends at %s (%s of tree bytes; loose zlib objects, not packed).", fmtBytes(gitSize), fmtPct(gitSize, t.bytes))
	return nil
}

// ratio is the median of a[i]/b[i]: the paired ratio of two measurements
// taken back to back in each repetition.
func ratio(a, b []time.Duration) float64 {
	rs := make([]time.Duration, len(a))
	for i := range a {
		rs[i] = time.Duration(float64(a[i]) / float64(b[i]) * 1e6)
	}
	return float64(median(rs)) / 1e6
}

// profiledImport pushes the tree into store in process, so that
// -cpuprofile sees the code behind art push.
func (b *bench) profiledImport(t *tree, store, what string) error {
	db, err := journal.Open(b.ctx, store, journal.Options{Create: true})
	if err != nil {
		return err
	}
	defer db.Close()
	var st workspace.ImportStats
	cpu := selfCPU()
	d, err := b.timed(what, len(t.files), func(ctx context.Context) (err error) {
		// As art push -m --json: the read-only check first (a no-op ends
		// there), then the import.
		opts := workspace.ImportOptions{Branch: journal.DefaultBranch, Dir: t.dir}
		var ok bool
		if st, ok, err = workspace.Unchanged(ctx, db, opts); err != nil || ok {
			return err
		}
		st, err = workspace.Import(ctx, db, opts)
		return err
	})
	if err != nil {
		return err
	}
	cpu = selfCPU() - cpu
	b.progress("in-process %s (profiled): %d files in %s, CPU %s", what, st.Files, fmtDur(d), fmtDur(cpu))
	b.rep.note("Profiled run (pprof label bench=%s): in-process workspace.Import took %s (%s of tree bytes), CPU %s.", what, fmtDur(d), fmtRate(t.bytes, d), fmtDur(cpu))
	return nil
}

// incremental: section 2.
func (b *bench) incremental() error {
	t, err := b.ingestTree()
	if err != nil {
		return err
	}
	reps := b.cfg.reps
	if b.store == "" {
		b.store = filepath.Join(b.tmp, "incremental.db")
		if _, _, err := b.push(t.dir, b.store); err != nil {
			return err
		}
	}
	if b.git && b.gitDir == "" {
		b.gitDir = filepath.Join(b.tmp, "git-incremental")
		if err := b.gitInit(b.gitDir, t.dir); err != nil {
			return err
		}
		if _, err := b.gitCommitAll(b.gitDir, t.dir, "ingest"); err != nil {
			return err
		}
	}

	noop, err := b.noopPush(t)
	if err != nil {
		return err
	}

	// Edit 1% of the files, push, commit; a fresh choice every round.
	n := max(1, len(t.files)/100)
	var artT, gitT []time.Duration
	var stored, objGrowth, storeGrowth, gitObjGrowth, gitGrowth, grew []int64
	for round := 1; round <= reps; round++ {
		var added int64
		for j, i := range pickFiles(len(t.files), n, b.cfg.seed, uint64(round)) {
			d, err := editFile(filepath.Join(t.dir, t.files[i]), j%2 == 0, fmt.Sprintf("r%d.%d", round, j))
			if err != nil {
				return err
			}
			added += d
		}
		grew = append(grew, added)
		before, err := objectBytes(b.store)
		if err != nil {
			return err
		}
		sizeBefore := storeBytes(b.store)
		st, d, err := b.push(t.dir, b.store)
		if err != nil {
			return err
		}
		if st.Changed != n {
			b.rep.note("Incremental round %d: push reported %d changed files, %d were edited.", round, st.Changed, n)
		}
		after, err := objectBytes(b.store)
		if err != nil {
			return err
		}
		artT = append(artT, d)
		stored = append(stored, st.BytesStored)
		objGrowth = append(objGrowth, sumKinds(after)-sumKinds(before))
		storeGrowth = append(storeGrowth, storeBytes(b.store)-sizeBefore)
		b.progress("edit round %d: %d files, art push %s, stored %s", round, n, fmtDur(d), fmtBytes(st.BytesStored))
		if !b.git {
			continue
		}
		gd, objs, all, err := b.gitRound(t, round)
		if err != nil {
			return err
		}
		gitT = append(gitT, gd)
		gitObjGrowth = append(gitObjGrowth, objs)
		gitGrowth = append(gitGrowth, all)
		b.progress("edit round %d: git add+commit %s, .git/objects +%s", round, fmtDur(gd), fmtBytes(objs))
	}
	at, st := median(artT), medianInt(stored)
	goal := "<= 0.5% of tree bytes: "
	if float64(st) <= 0.005*float64(t.bytes) {
		goal += "**met**"
	} else {
		goal += "**missed**"
	}
	label := fmt.Sprintf("2b. Incremental push after editing 1%% of the files (%s, seeded; half 8 bytes overwritten mid-file, half a line appended)", fmtInt(n))
	r := row{label, fmt.Sprintf("file content stored: %s = %s of tree bytes; all new objects incl. trees: %s = %s; %s",
		fmtBytes(st), fmtPct(st, t.bytes), fmtBytes(medianInt(objGrowth)), fmtPct(medianInt(objGrowth), t.bytes), fmtDur(at)),
		"-", "", goal}
	if b.git {
		gt, gg := median(gitT), medianInt(gitObjGrowth)
		r.peer = fmt.Sprintf("`git add -A && git commit`: new loose objects %s = %s; %s", fmtBytes(gg), fmtPct(gg, t.bytes), fmtDur(gt))
		r.ratio = fmt.Sprintf("art/git objects %s; time %s", fmtRatio(float64(medianInt(objGrowth))/float64(gg)), fmtRatio(ratio(artT, gitT)))
		b.rep.note("Incremental: .git as a whole grew by %s per round (median; objects, index, logs).", fmtBytes(medianInt(gitGrowth)))
	}
	b.rep.add(noop)
	b.rep.add(r)
	b.rep.note("Incremental: medians of %d rounds of %s edited files (the files grew by %s in total per round, median); the store file (objects, events, projection, indexes) grew by %s per round (median; SQLite grows in pages).",
		reps, fmtInt(n), fmtBytes(medianInt(grew)), fmtBytes(medianInt(storeGrowth)))
	return nil
}

// noopPush measures a push with nothing changed (row 2a), against git
// status.
func (b *bench) noopPush(t *tree) (row, error) {
	// A push with nothing changed: the stat walk and cache lookups alone.
	var noopT, statusT []time.Duration
	for range b.cfg.reps {
		st, d, err := b.push(t.dir, b.store)
		if err != nil {
			return row{}, err
		}
		if st.New+st.Changed+st.Deleted != 0 {
			return row{}, fmt.Errorf("no-op push changed files: %+v", st)
		}
		noopT = append(noopT, d)
		if b.git {
			_, d, err := b.gitCmd(b.gitDir, t.dir, "status", "--porcelain")
			if err != nil {
				return row{}, err
			}
			statusT = append(statusT, d)
		}
	}
	b.progress("no-op push: %s", fmtDur(median(noopT)))
	if b.cfg.cpuprofile != "" {
		if err := b.profiledImport(t, b.store, "noop-push"); err != nil {
			return row{}, err
		}
	}
	noop := row{"2a. No-op push: nothing changed", fmtDur(median(noopT)), "-", "", "-"}
	if b.git {
		noop.peer = "`git status --porcelain`: " + fmtDur(median(statusT))
		noop.ratio = "art/git " + fmtRatio(ratio(noopT, statusT)) + " (time)"
	}
	return noop, nil
}

// gitRound commits round's edits to the git peer and returns how long
// that took and how much .git/objects and .git grew.
func (b *bench) gitRound(t *tree, round int) (time.Duration, int64, int64, error) {
	objsBefore, err := duBytes(filepath.Join(b.gitDir, "objects"))
	if err != nil {
		return 0, 0, 0, err
	}
	allBefore, err := duBytes(b.gitDir)
	if err != nil {
		return 0, 0, 0, err
	}
	gd, err := b.gitCommitAll(b.gitDir, t.dir, fmt.Sprintf("round %d", round))
	if err != nil {
		return 0, 0, 0, err
	}
	objsAfter, err := duBytes(filepath.Join(b.gitDir, "objects"))
	if err != nil {
		return 0, 0, 0, err
	}
	allAfter, err := duBytes(b.gitDir)
	if err != nil {
		return 0, 0, 0, err
	}
	return gd, objsAfter - objsBefore, allAfter - allBefore, nil
}

func sumKinds(m map[int]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func medianInt(xs []int64) int64 {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x)
	}
	return int64(median(ds))
}
