package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/artrt/art/journal"
)

// lifecycle: what art forget and art gc give back after a run of agent
// sessions. Each session is an `art run -d` (capture, FUSE overlay, the
// command in bwrap, snapshot at the end) whose command replaces the
// previous tree: rm -rf of it, tar x of the ingest tree, and a copy of
// 1 MiB of random bytes unique to the session. After the sessions,
// `art forget --all --keep-last 2` and `art gc --grace 0`; the store is
// then compared with a fresh store made by the last two sessions alone
// (the same commands, the same random files), which is what a store that
// forgot nothing else could at best be.

var lifecycleMarkers = markers{"<!-- bench:lifecycle:begin -->", "<!-- bench:lifecycle:end -->",
	"## Lifecycle: art forget and art gc after a run of sessions"}

type lcRow struct{ bench, time, store, note, goal string }

// lcSessions is how many sessions the lifecycle section runs (and keeps
// lcKeep of).
func (b *bench) lcSessions() int {
	if b.cfg.quick {
		return 5
	}
	return 20
}

const lcKeep = 2

// lcRandBytes is the size of each session's unique random file.
const lcRandBytes = 1 << 20

// lifecycleProbe says why the section cannot run here ("" if it can):
// art run with a store needs bwrap and FUSE.
func lifecycleProbe() string {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return "bwrap not found"
	}
	return fuseProbe()
}

// lifecycle measures a store over many sessions, then forget and gc, and
// compares it with a fresh store of the sessions kept.
func (b *bench) lifecycle() error {
	t, err := b.ingestTree()
	if err != nil {
		return err
	}
	lc := &lcRun{b: b, root: filepath.Join(b.tmp, "lifecycle")}
	lc.in = filepath.Join(lc.root, "in") // bound read-only into the sandbox at /tmp/in
	if err := lc.prepare(t); err != nil {
		return err
	}
	if err := lc.long(); err != nil {
		return err
	}
	if err := lc.fresh(); err != nil {
		return err
	}
	lc.report(t)
	return nil
}

// lcRun is one run of the lifecycle section: where it works and what it
// measured.
type lcRun struct {
	b        *bench
	root, in string
	n        int // sessions

	// The long-lived store: after the sessions, forget and gc.
	ws, db                           string
	took                             []time.Duration
	sizeSessions, sizeForget, sizeGC int64
	objsSessions, objsGC             map[int]int64
	forgetTook, gcTook               time.Duration
	fr                               journal.ForgetReport
	forgotSnaps, forgotEvents        int64
	gr                               journal.GCReport
	usageLong                        journal.Usage

	// The fresh store of the last lcKeep sessions alone.
	sizeFresh, sizeFreshGC int64
	objsFresh              map[int]int64
	usageFresh             journal.Usage
}

// prepare packs t into the input directory and writes each session's
// random file beside it.
func (lc *lcRun) prepare(t *tree) error {
	b := lc.b
	if err := os.MkdirAll(lc.in, 0o755); err != nil {
		return err
	}
	// The sandbox runs as an unprivileged uid: every directory above the
	// workspace and the bound input must let it through.
	for _, d := range []string{b.tmp, lc.root, lc.in} {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	b.progress("packing %s", t.dir)
	if _, _, err := b.command(t.dir, nil, "tar", "-cf", filepath.Join(lc.in, "src.tar"), "."); err != nil {
		return err
	}
	lc.n = b.lcSessions()
	rng := rand.New(rand.NewChaCha8([32]byte{byte(b.cfg.seed), 'l', 'c'}))
	for i := range lc.n {
		buf := make([]byte, lcRandBytes)
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(lc.in, fmt.Sprintf("rand-%02d.bin", i)), buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// session runs session i of the store db, over the host workspace ws.
func (lc *lcRun) session(ws, db string, i int) (time.Duration, error) {
	script := fmt.Sprintf("rm -rf tree && mkdir tree && tar --no-same-owner -xf /tmp/in/src.tar -C tree && cp /tmp/in/rand-%02d.bin tree/rand.bin", i)
	_, d, err := lc.b.command(filepath.Dir(ws), nil, lc.b.art, "run", "-m", ws, "-d", db, "-i=false", "-q",
		"--bind", lc.in+":/tmp/in:ro", "--", "sh", "-c", script)
	return d, err
}

// newWorkspace makes the directory name with an empty workspace in it,
// and returns the workspace and the path of its store.
func (lc *lcRun) newWorkspace(name string) (string, string, error) {
	dir := filepath.Join(lc.root, name)
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", "", err
	}
	for _, d := range []string{dir, ws} {
		if err := os.Chmod(d, 0o755); err != nil {
			return "", "", err
		}
	}
	return ws, filepath.Join(dir, "ws.db"), nil
}

// long runs every session on the long-lived store, then forget and gc,
// measuring the store after each.
func (lc *lcRun) long() error {
	b, n := lc.b, lc.n
	ws, db, err := lc.newWorkspace("long")
	if err != nil {
		return err
	}
	lc.ws, lc.db = ws, db
	for i := range n {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		d, err := lc.session(ws, db, i)
		if err != nil {
			return fmt.Errorf("session %d: %w", i+1, err)
		}
		lc.took = append(lc.took, d)
		b.progress("session %d/%d: %s, store %s", i+1, n, fmtDur(d), fmtBytes(storeBytes(db)))
	}
	if err := checkpoint(db); err != nil {
		return err
	}
	lc.sizeSessions = storeBytes(db)
	if lc.objsSessions, err = objectBytes(db); err != nil {
		return err
	}

	out, forgetTook, err := b.command(lc.root, nil, b.art, "forget", "-d", db, "--all", "--keep-last", fmt.Sprint(lcKeep), "--json")
	if err != nil {
		return err
	}
	lc.forgetTook = forgetTook
	if err := json.Unmarshal(out, &lc.fr); err != nil {
		return fmt.Errorf("art forget --json: %w", err)
	}
	for _, br := range lc.fr.Branches {
		lc.forgotSnaps += int64(len(br.Forget))
		lc.forgotEvents += br.Events
	}
	if err := checkpoint(db); err != nil {
		return err
	}
	lc.sizeForget = storeBytes(db)

	out, gcTook, err := b.command(lc.root, nil, b.art, "gc", "-d", db, "--grace", "0", "--json")
	if err != nil {
		return err
	}
	lc.gcTook = gcTook
	if err := json.Unmarshal(out, &lc.gr); err != nil {
		return fmt.Errorf("art gc --json: %w", err)
	}
	if err := checkpoint(db); err != nil {
		return err
	}
	lc.sizeGC = storeBytes(db)
	if lc.objsGC, err = objectBytes(db); err != nil {
		return err
	}
	// The kept states must still be whole.
	if _, _, err := b.command(lc.root, nil, b.art, "verify", "-d", db); err != nil {
		return fmt.Errorf("after forget and gc: %w", err)
	}
	return nil
}

// fresh runs the last lcKeep sessions alone on a fresh store and measures
// it before and after the same forget and gc.
func (lc *lcRun) fresh() error {
	b, n := lc.b, lc.n
	fws, fdb, err := lc.newWorkspace("fresh")
	if err != nil {
		return err
	}
	for i := n - lcKeep; i < n; i++ {
		if _, err := lc.session(fws, fdb, i); err != nil {
			return fmt.Errorf("fresh store, session %d: %w", i+1, err)
		}
	}
	if err := checkpoint(fdb); err != nil {
		return err
	}
	lc.sizeFresh = storeBytes(fdb)
	if lc.objsFresh, err = objectBytes(fdb); err != nil {
		return err
	}
	if lc.usageFresh, err = b.storeUsage(fdb); err != nil {
		return err
	}
	// The fresh store still holds all of its two sessions' events, where
	// the long store kept only those after its older kept snapshot: the
	// same forget and gc on the fresh store give the like-for-like size.
	if _, _, err := b.command(lc.root, nil, b.art, "forget", "-d", fdb, "--all", "--keep-last", fmt.Sprint(lcKeep), "--prune", "--grace", "0"); err != nil {
		return err
	}
	if err := checkpoint(fdb); err != nil {
		return err
	}
	lc.sizeFreshGC = storeBytes(fdb)
	if lc.usageLong, err = b.storeUsage(lc.db); err != nil {
		return err
	}
	return nil
}

// report fills the lifecycle table's rows and notes.
func (lc *lcRun) report(t *tree) {
	b, n, gr := lc.b, lc.n, lc.gr
	sizeGC, sizeFresh, sizeFreshGC := lc.sizeGC, lc.sizeFresh, lc.sizeFreshGC
	sum := func(m map[int]int64) int64 { return m[1] + m[2] + m[3] }
	gb := float64(gr.FileBefore) / 1e9
	ratio := float64(sizeGC) / float64(sizeFresh)
	// The requirement bounds what the lifecycle leaves behind: a store
	// smaller than the fresh one (less history kept) meets it.
	goal := "<= 1.10x the fresh store: **met**"
	if ratio > 1.10 {
		goal = "<= 1.10x the fresh store: **missed**"
	}
	src := b.srcLabel()
	if b.cfg.quick {
		src = fmt.Sprintf("the first %d files of %s", quickFiles, src)
	}
	what := fmt.Sprintf("`art run -d` over the overlay: rm -rf of the previous tree, `tar x` of %s (%s files, %s), cp of 1 MiB of random bytes unique to the session",
		src, fmtInt(len(t.files)), fmtBytes(t.bytes))
	b.rep.lc = []lcRow{
		{fmt.Sprintf("1. %d sessions, each %s, ending in a snapshot", n, what),
			fmt.Sprintf("%s per session (median), %s in all", fmtDur(median(lc.took)), fmtDur(sum64(lc.took))),
			fmtBytes(lc.sizeSessions), fmt.Sprintf("objects %s stored", fmtBytes(sum(lc.objsSessions))), "-"},
		{fmt.Sprintf("2. `art forget --all --keep-last %d`", lcKeep), fmtDur(lc.forgetTook), fmtBytes(lc.sizeForget),
			fmt.Sprintf("forgot %d snapshots, %s events (forget's own time: %.2f s, %s per event)", lc.forgotSnaps, fmtInt(int(lc.forgotEvents)), lc.fr.Seconds,
				fmtDur(time.Duration(lc.fr.Seconds*float64(time.Second)/float64(max(lc.forgotEvents, 1))))), "-"},
		{"3. `art gc --grace 0`", fmtDur(lc.gcTook), fmtBytes(sizeGC),
			fmt.Sprintf("%.2f s per GB of store file before (%s file, %s of objects), %.2f s per GB given back (%s); removed %s objects, %s stored; vacuum: %s",
				lc.gcTook.Seconds()/gb, fmtBytes(gr.FileBefore), fmtBytes(gr.BytesBefore),
				lc.gcTook.Seconds()/(float64(max(gr.FileBefore-gr.FileAfter, 1))/1e9), fmtBytes(gr.FileBefore-gr.FileAfter),
				fmtInt(int(gr.Removed)), fmtBytes(gr.RemovedBytes), gr.Vacuum), "-"},
		{fmt.Sprintf("4. The store after 3 against a fresh store of the last %d sessions alone (same commands, same random files)", lcKeep),
			"-", fmt.Sprintf("%s vs fresh %s: ratio %.3f", fmtBytes(sizeGC), fmtBytes(sizeFresh), ratio),
			fmt.Sprintf("objects %s vs %s; journal %s vs %s events", fmtBytes(sum(lc.objsGC)), fmtBytes(sum(lc.objsFresh)),
				fmtInt(int(lc.usageLong.Events.Rows)), fmtInt(int(lc.usageFresh.Events.Rows))), goal},
		{fmt.Sprintf("5. The same against the fresh store after the same `art forget --all --keep-last %d --prune --grace 0`", lcKeep),
			"-", fmt.Sprintf("%s vs %s: ratio %.3f", fmtBytes(sizeGC), fmtBytes(sizeFreshGC), float64(sizeGC)/float64(sizeFreshGC)),
			"like for like: both keep the same states and the same events", "-"},
	}
	b.rep.lcNotes = append(b.rep.lcNotes,
		"Store sizes are the store file plus its WAL after `PRAGMA wal_checkpoint(TRUNCATE)`, with no art process running.",
		fmt.Sprintf("Row 4: the fresh store keeps every event of its %d sessions (its first session's tar x and cp included), the long store after forget only the events after the older kept snapshot (`--keep-last N` keeps N states and the history between them); row 5 removes that difference.", lcKeep),
		fmt.Sprintf("Each session's command: `%s`, with the tarball and the random files bound read-only at /tmp/in (`--bind`); the workspace starts empty.", "rm -rf tree && mkdir tree && tar --no-same-owner -xf /tmp/in/src.tar -C tree && cp /tmp/in/rand-NN.bin tree/rand.bin"),
	)
}

// storeUsage is what art status says a store occupies.
func (b *bench) storeUsage(db string) (journal.Usage, error) {
	out, _, err := b.command(filepath.Dir(db), nil, b.art, "status", "-d", db, "--json")
	if err != nil {
		return journal.Usage{}, err
	}
	var st struct {
		Usage journal.Usage `json:"usage"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return journal.Usage{}, fmt.Errorf("art status --json: %w", err)
	}
	return st.Usage, nil
}

func sum64(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

// checkpoint moves a store's WAL into the file and truncates it, so that
// the size on disk is the store's own, not what the last writer left in
// its log. No art process may have the store open.
func checkpoint(path string) error {
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer db.Close()
	var busy, logFrames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if busy != 0 {
		return errors.New("checkpoint " + path + ": busy (another process has the store open)")
	}
	return nil
}

// lifecycleMarkdown renders the lifecycle section.
func (b *bench) lifecycleMarkdown(took time.Duration) string {
	var s strings.Builder
	b.generated(&s, took)
	if b.rev != "" {
		fmt.Fprintf(&s, "art built from %s. ", b.rev)
	}
	fmt.Fprintf(&s, "Machine: %s. One run; times are wall clock of the CLI (process start included).\n\n", b.machine())
	s.WriteString("| Step | Time | Store (file + WAL) | Details | Goal |\n|---|---|---|---|---|\n")
	for _, r := range b.rep.lc {
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s |\n", cell(r.bench), cell(r.time), cell(r.store), cell(r.note), cell(r.goal))
	}
	if len(b.rep.lcNotes) > 0 {
		s.WriteString("\n")
		for _, n := range b.rep.lcNotes {
			fmt.Fprintf(&s, "- %s\n", n)
		}
	}
	return s.String()
}
