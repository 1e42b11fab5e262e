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

func (b *bench) lifecycle() error {
	t, err := b.ingestTree()
	if err != nil {
		return err
	}
	root := filepath.Join(b.tmp, "lifecycle")
	in := filepath.Join(root, "in") // bound read-only into the sandbox at /tmp/in
	if err := os.MkdirAll(in, 0o755); err != nil {
		return err
	}
	// The sandbox runs as an unprivileged uid: every directory above the
	// workspace and the bound input must let it through.
	for _, d := range []string{b.tmp, root, in} {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	b.progress("packing %s", t.dir)
	if _, _, err := b.command(t.dir, nil, "tar", "-cf", filepath.Join(in, "src.tar"), "."); err != nil {
		return err
	}
	n := b.lcSessions()
	rng := rand.New(rand.NewChaCha8([32]byte{byte(b.cfg.seed), 'l', 'c'}))
	for i := range n {
		buf := make([]byte, lcRandBytes)
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("rand-%02d.bin", i)), buf, 0o644); err != nil {
			return err
		}
	}

	// session i of the store db, over the host workspace ws.
	session := func(ws, db string, i int) (time.Duration, error) {
		script := fmt.Sprintf("rm -rf tree && mkdir tree && tar --no-same-owner -xf /tmp/in/src.tar -C tree && cp /tmp/in/rand-%02d.bin tree/rand.bin", i)
		_, d, err := b.command(filepath.Dir(ws), nil, b.art, "run", "-m", ws, "-d", db, "-i=false", "-q",
			"--bind", in+":/tmp/in:ro", "--", "sh", "-c", script)
		return d, err
	}
	newWorkspace := func(name string) (string, string, error) {
		dir := filepath.Join(root, name)
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

	// The long-lived store.
	ws, db, err := newWorkspace("long")
	if err != nil {
		return err
	}
	var took []time.Duration
	for i := range n {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		d, err := session(ws, db, i)
		if err != nil {
			return fmt.Errorf("session %d: %w", i+1, err)
		}
		took = append(took, d)
		b.progress("session %d/%d: %s, store %s", i+1, n, fmtDur(d), fmtBytes(storeBytes(db)))
	}
	if err := checkpoint(db); err != nil {
		return err
	}
	sizeSessions := storeBytes(db)
	objsSessions, err := objectBytes(db)
	if err != nil {
		return err
	}

	out, forgetTook, err := b.command(root, nil, b.art, "forget", "-d", db, "--all", "--keep-last", fmt.Sprint(lcKeep), "--json")
	if err != nil {
		return err
	}
	var fr journal.ForgetReport
	if err := json.Unmarshal(out, &fr); err != nil {
		return fmt.Errorf("art forget --json: %w", err)
	}
	var forgotSnaps, forgotEvents int64
	for _, br := range fr.Branches {
		forgotSnaps += int64(len(br.Forget))
		forgotEvents += br.Events
	}
	if err := checkpoint(db); err != nil {
		return err
	}
	sizeForget := storeBytes(db)

	out, gcTook, err := b.command(root, nil, b.art, "gc", "-d", db, "--grace", "0", "--json")
	if err != nil {
		return err
	}
	var gr journal.GCReport
	if err := json.Unmarshal(out, &gr); err != nil {
		return fmt.Errorf("art gc --json: %w", err)
	}
	if err := checkpoint(db); err != nil {
		return err
	}
	sizeGC := storeBytes(db)
	objsGC, err := objectBytes(db)
	if err != nil {
		return err
	}
	// The kept states must still be whole.
	if _, _, err := b.command(root, nil, b.art, "verify", "-d", db); err != nil {
		return fmt.Errorf("after forget and gc: %w", err)
	}

	// The fresh store: the last lcKeep sessions alone.
	fws, fdb, err := newWorkspace("fresh")
	if err != nil {
		return err
	}
	for i := n - lcKeep; i < n; i++ {
		if _, err := session(fws, fdb, i); err != nil {
			return fmt.Errorf("fresh store, session %d: %w", i+1, err)
		}
	}
	if err := checkpoint(fdb); err != nil {
		return err
	}
	sizeFresh := storeBytes(fdb)
	objsFresh, err := objectBytes(fdb)
	if err != nil {
		return err
	}
	usageFresh, err := b.storeUsage(fdb)
	if err != nil {
		return err
	}
	// The fresh store still holds all of its two sessions' events, where
	// the long store kept only those after its older kept snapshot: the
	// same forget and gc on the fresh store give the like-for-like size.
	if _, _, err := b.command(root, nil, b.art, "forget", "-d", fdb, "--all", "--keep-last", fmt.Sprint(lcKeep), "--prune", "--grace", "0"); err != nil {
		return err
	}
	if err := checkpoint(fdb); err != nil {
		return err
	}
	sizeFreshGC := storeBytes(fdb)
	usageLong, err := b.storeUsage(db)
	if err != nil {
		return err
	}

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
			fmt.Sprintf("%s per session (median), %s in all", fmtDur(median(took)), fmtDur(sum64(took))),
			fmtBytes(sizeSessions), fmt.Sprintf("objects %s stored", fmtBytes(sum(objsSessions))), "-"},
		{fmt.Sprintf("2. `art forget --all --keep-last %d`", lcKeep), fmtDur(forgetTook), fmtBytes(sizeForget),
			fmt.Sprintf("forgot %d snapshots, %s events (forget's own time: %.2f s, %s per event)", forgotSnaps, fmtInt(int(forgotEvents)), fr.Seconds,
				fmtDur(time.Duration(fr.Seconds*float64(time.Second)/float64(max(forgotEvents, 1))))), "-"},
		{"3. `art gc --grace 0`", fmtDur(gcTook), fmtBytes(sizeGC),
			fmt.Sprintf("%.2f s per GB of store file before (%s file, %s of objects), %.2f s per GB given back (%s); removed %s objects, %s stored; vacuum: %s",
				gcTook.Seconds()/gb, fmtBytes(gr.FileBefore), fmtBytes(gr.BytesBefore),
				gcTook.Seconds()/(float64(max(gr.FileBefore-gr.FileAfter, 1))/1e9), fmtBytes(gr.FileBefore-gr.FileAfter),
				fmtInt(int(gr.Removed)), fmtBytes(gr.RemovedBytes), gr.Vacuum), "-"},
		{fmt.Sprintf("4. The store after 3 against a fresh store of the last %d sessions alone (same commands, same random files)", lcKeep),
			"-", fmt.Sprintf("%s vs fresh %s: ratio %.3f", fmtBytes(sizeGC), fmtBytes(sizeFresh), ratio),
			fmt.Sprintf("objects %s vs %s; journal %s vs %s events", fmtBytes(sum(objsGC)), fmtBytes(sum(objsFresh)),
				fmtInt(int(usageLong.Events.Rows)), fmtInt(int(usageFresh.Events.Rows))), goal},
		{fmt.Sprintf("5. The same against the fresh store after the same `art forget --all --keep-last %d --prune --grace 0`", lcKeep),
			"-", fmt.Sprintf("%s vs %s: ratio %.3f", fmtBytes(sizeGC), fmtBytes(sizeFreshGC), float64(sizeGC)/float64(sizeFreshGC)),
			"like for like: both keep the same states and the same events", "-"},
	}
	b.rep.lcNotes = append(b.rep.lcNotes,
		"Store sizes are the store file plus its WAL after `PRAGMA wal_checkpoint(TRUNCATE)`, with no art process running.",
		fmt.Sprintf("Row 4: the fresh store keeps every event of its %d sessions (its first session's tar x and cp included), the long store after forget only the events after the older kept snapshot (`--keep-last N` keeps N states and the history between them); row 5 removes that difference.", lcKeep),
		fmt.Sprintf("Each session's command: `%s`, with the tarball and the random files bound read-only at /tmp/in (`--bind`); the workspace starts empty.", "rm -rf tree && mkdir tree && tar --no-same-owner -xf /tmp/in/src.tar -C tree && cp /tmp/in/rand-NN.bin tree/rand.bin"),
	)
	return nil
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
