package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// randBytes is n bytes from r.
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

// gc with --grace 0, and forget --all --prune, run again and again while
// an art run (another process: capture, FUSE overlay, journal writer)
// writes files on another branch. Some of what the run writes is content that is garbage at that
// moment (pushed on main, then forgotten), so a gc may be deleting the
// very chunks the writer finds already stored. After each round the store
// verifies, and every file a run closed reads back byte-identical, then
// and at the end.
func TestGCWhileRunWrites(t *testing.T) {
	ws, db := overlayWorkspace(t)
	bin := artBinary(t)
	base := filepath.Dir(ws)
	in := filepath.Join(base, "in") // bound read-only at /tmp/in
	gws := filepath.Join(base, "gws")
	for _, d := range []string{in, gws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rounds := 50
	if testing.Short() {
		rounds = 5
	}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	want := map[string][]byte{} // branch w's path -> content
	var gcs, overlapped int
	var removed int64 // objects removed by gcs that ran while a run was alive
	for round := 0; round < rounds; round++ {
		// Garbage: content pushed on main, then forgotten.
		garbage := randBytes(r, 150_000+r.Intn(100_000))
		writeFile(t, filepath.Join(gws, "g"), string(garbage))
		mustRun(t, "push", "-q", "-m", gws, "-d", db)
		writeFile(t, filepath.Join(gws, "g"), fmt.Sprintf("round %d\n", round))
		mustRun(t, "push", "-q", "-m", gws, "-d", db)
		mustRun(t, "forget", "-d", db, "-b", "main", "--keep-last", "1")

		// What this round's run copies in: new content (one chunk or
		// several), the garbage, and a file of an earlier round (live).
		dir := fmt.Sprintf("r%02d", round)
		files := map[string][]byte{"g": garbage}
		for i := 0; i < 3; i++ {
			files[fmt.Sprintf("f%d", i)] = randBytes(r, 1+r.Intn(200_000))
		}
		if round%5 == 0 { // now and then a file the overlay keeps on disk, not in memory
			files["big"] = randBytes(r, 3_000_000+r.Intn(1_000_000))
		}
		for _, b := range want {
			files["old"] = b
			break
		}
		if err := os.MkdirAll(filepath.Join(in, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(in, dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		script := fmt.Sprintf(`set -e; mkdir %[1]s; for f in /tmp/in/%[1]s/*; do cp "$f" %[1]s/; sleep 0.02; done
cat /tmp/in/%[1]s/g > %[1]s/g.copy; mv %[1]s/f0 %[1]s/f0.moved`, dir)
		run := exec.Command(bin, "run", "-m", ws, "-d", db, "--branch", "w", "-i=false", "-q", "--timeout", "60s",
			"--bind", in+":/tmp/in:ro", "--", "sh", "-c", script)
		run.Env = os.Environ()
		var runErr bytes.Buffer
		run.Stderr = &runErr
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- run.Wait() }()
		// The first gc, which removes the garbage, starts at a random
		// point of the run: some rounds it meets the copy of g.
		var runExit error
		running := true
		select {
		case runExit = <-done:
			running = false // one gc after it, then the next round
		case <-time.After(time.Duration(r.Intn(200)) * time.Millisecond):
		}
		for first := true; first || running; first = false {
			// Every other collection is a forget of every branch, the
			// one being written included, with --prune.
			args := []string{"gc", "-d", db, "--grace", "0", "--json"}
			if gcs%2 == 1 {
				args = []string{"forget", "-d", db, "--all", "--keep-last", "2", "--prune", "--grace", "0", "--json"}
			}
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				<-done
				t.Fatalf("round %d: art %s during the run: %v\n%s%s", round, args[0], err, out, stderr.String())
			}
			var rep struct {
				Removed int64 `json:"removed"`
				GC      *struct {
					Removed int64 `json:"removed"`
				} `json:"gc"`
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				<-done
				t.Fatalf("round %d: %s --json: %v\n%s", round, args[0], err, out)
			}
			if rep.GC != nil {
				rep.Removed = rep.GC.Removed
			}
			gcs++
			if !running {
				continue
			}
			select {
			case runExit = <-done:
				running = false
			default:
				overlapped++
				removed += rep.Removed
			}
		}
		if runExit != nil {
			t.Fatalf("round %d: art run: %v\n%s", round, runExit, runErr.String())
		}
		mustRun(t, "verify", "-d", db)
		for name, b := range files {
			want["ws/"+dir+"/"+name] = b
		}
		want["ws/"+dir+"/g.copy"] = garbage
		want["ws/"+dir+"/f0.moved"] = want["ws/"+dir+"/f0"]
		delete(want, "ws/"+dir+"/f0")
		for name := range files {
			p := "ws/" + dir + "/" + name
			if b, ok := want[p]; ok && mustRun(t, "cat", "-d", db, "w:"+p).stdout != string(b) {
				t.Fatalf("round %d: %s reads back different bytes", round, p)
			}
		}
	}
	if overlapped == 0 || removed == 0 {
		t.Fatalf("%d of %d gcs ran while a run was alive, removing %d objects: the test tested nothing", overlapped, gcs, removed)
	}
	// A last gc, then every file every run closed.
	mustRun(t, "gc", "-d", db, "--grace", "0")
	mustRun(t, "verify", "-d", db)
	for p, b := range want {
		if got := mustRun(t, "cat", "-d", db, "w:"+p).stdout; got != string(b) {
			t.Fatalf("at the end, %s reads back different bytes", p)
		}
	}
	t.Logf("%d rounds, %d gcs, %d of them while a run was alive (they removed %d objects); %d files checked", rounds, gcs, overlapped, removed, len(want))
}

// lifecycleStore pushes n versions of a workspace, each with its own
// 1 MB of incompressible content and 1000 small files rewritten (events
// enough for forget to take a while), and returns the store and, per
// version, the big file's content.
func lifecycleStore(t *testing.T, n int) (string, [][]byte) {
	t.Helper()
	ws, db := newWorkspace(t)
	r := rand.New(rand.NewSource(1))
	var versions [][]byte
	for i := 0; i < n; i++ {
		versions = append(versions, randBytes(r, 1_000_000))
		writeFile(t, filepath.Join(ws, "big"), string(versions[i]))
		for j := 0; j < 1000; j++ {
			writeFile(t, filepath.Join(ws, "small", fmt.Sprintf("s%03d", j)), fmt.Sprintf("version %d file %d\n", i, j))
		}
		mustRun(t, "push", "-q", "-m", ws, "-d", db, "--message", fmt.Sprintf("v%d", i))
	}
	return db, versions
}

// copyStore copies a closed store (file and WAL, if any) to dst.
func copyStore(t *testing.T, src, dst string) {
	t.Helper()
	for _, sfx := range []string{"", "-wal"} {
		in, err := os.Open(src + sfx)
		if os.IsNotExist(err) && sfx != "" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(dst + sfx)
		if err != nil {
			in.Close()
			t.Fatal(err)
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

type snapshotRow struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// keptByForget is what forget --dry-run says it would keep on main.
func keptByForget(t *testing.T, db string, keep int) []snapshotRow {
	t.Helper()
	var dry struct {
		Branches []struct {
			Keep []snapshotRow `json:"keep"`
		} `json:"branches"`
	}
	out := mustRun(t, "forget", "-d", db, "-b", "main", "--keep-last", fmt.Sprint(keep), "--dry-run", "--json").stdout
	if err := json.Unmarshal([]byte(out), &dry); err != nil || len(dry.Branches) != 1 || len(dry.Branches[0].Keep) != keep {
		t.Fatalf("forget --dry-run: %v\n%s", err, out)
	}
	return dry.Branches[0].Keep
}

// kill -9 of art forget and of art forget --prune at random moments:
// afterwards the store verifies, every snapshot the policy keeps
// materializes with its content, every other one either does too or says
// it was forgotten, and a second forget --prune and a gc complete.
func TestForgetKilled(t *testing.T) {
	bin := artBinary(t)
	const versions, keep = 12, 3
	template, contents := lifecycleStore(t, versions)
	kept := keptByForget(t, template, keep)
	// The snapshots of the versions, by message, to check any that
	// still resolve.
	version := map[string]int{}
	for i := 0; i < versions; i++ {
		version[fmt.Sprintf("v%d", i)] = i
	}
	var all []snapshotRow
	{
		var dry struct {
			Branches []struct {
				Keep []snapshotRow `json:"keep"`
			} `json:"branches"`
		}
		out := mustRun(t, "forget", "-d", template, "-b", "main", "--keep-last", "1000", "--dry-run", "--json").stdout
		if err := json.Unmarshal([]byte(out), &dry); err != nil || len(dry.Branches) != 1 {
			t.Fatalf("forget --dry-run: %v\n%s", err, out)
		}
		all = dry.Branches[0].Keep
	}
	check := func(trial int, db string) {
		t.Helper()
		mustRun(t, "verify", "-d", db)
		for _, s := range all {
			v, ok := version[s.Message]
			if !ok {
				continue // a capture's snapshot without a message, say
			}
			res := artRun(t, "cat", "-d", db, s.ID+":ws/big")
			out, stderr, code := res.stdout, res.stderr, res.code
			isKept := false
			for _, k := range kept {
				isKept = isKept || k.ID == s.ID
			}
			switch {
			case code == 0 && out != string(contents[v]):
				t.Fatalf("trial %d: snapshot %s (%s) reads back different bytes", trial, s.ID[:12], s.Message)
			case code != 0 && (isKept || !strings.Contains(stderr, "forgotten")):
				t.Fatalf("trial %d: snapshot %s (%s, kept %v): exit %d %s", trial, s.ID[:12], s.Message, isKept, code, stderr)
			}
		}
	}
	// How long an uninterrupted run takes bounds the random kill moment.
	timeOf := func(args ...string) time.Duration {
		db := filepath.Join(t.TempDir(), "probe.db")
		copyStore(t, template, db)
		start := time.Now()
		if out, err := exec.Command(bin, append(args[:1:1], append([]string{"-d", db}, args[1:]...)...)...).CombinedOutput(); err != nil {
			t.Fatalf("art %v: %v\n%s", args, err, out)
		}
		return time.Since(start)
	}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	trials := 6
	if testing.Short() {
		trials = 2
	}
	killedBefore, committed := 0, 0
	for _, prune := range []bool{false, true} {
		args := []string{"forget", "-b", "main", "--keep-last", fmt.Sprint(keep)}
		if prune {
			args = append(args, "--prune", "--grace", "0")
		}
		window := timeOf(args...)
		for trial := 0; trial < trials; trial++ {
			db := filepath.Join(t.TempDir(), "ws.db")
			copyStore(t, template, db)
			cmd := exec.Command(bin, append(args[:1:1], append([]string{"-d", db}, args[1:]...)...)...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(r.Int63n(int64(window))))
			cmd.Process.Signal(syscall.SIGKILL)
			if err := cmd.Wait(); err != nil {
				killedBefore++
				if strings.Contains(mustRun(t, "log", "-d", db).stdout, "forget") {
					committed++ // killed after forget's transaction (in gc, with --prune)
				}
			}
			check(trial, db)
			mustRun(t, append(args[:1:1], append([]string{"-d", db}, args[1:]...)...)...)
			mustRun(t, "forget", "-d", db, "-b", "main", "--keep-last", fmt.Sprint(keep), "--prune", "--grace", "0")
			if out := mustRun(t, "gc", "-d", db, "--grace", "0").stdout; !strings.Contains(out, "removed 0 objects") {
				t.Fatalf("trial %d: a gc after forget --prune still found garbage:\n%s", trial, out)
			}
			check(trial, db)
			got := keptByForget(t, db, keep)
			for i := range kept {
				if got[i].ID != kept[i].ID {
					t.Fatalf("trial %d: after the second forget main keeps %v, want %v", trial, got, kept)
				}
			}
		}
		t.Logf("prune=%v: uninterrupted run %s", prune, window)
	}
	if killedBefore == 0 {
		t.Fatal("no forget was killed before it finished")
	}
	t.Logf("%d of %d runs killed before they finished, %d of them after forget had committed", killedBefore, 2*trials, committed)
}
