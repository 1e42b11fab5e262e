package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
)

// forgetStore pushes n versions of a workspace, each with its own 300 KB
// of incompressible content, and returns the store and the contents.
func forgetStore(t *testing.T, n int) (string, []string) {
	t.Helper()
	ws, db := newWorkspace(t)
	var versions []string
	for i := 0; i < n; i++ {
		b := make([]byte, 300_000)
		rand.New(rand.NewSource(int64(i))).Read(b)
		versions = append(versions, string(b))
		writeFile(t, filepath.Join(ws, "big"), versions[i])
		writeFile(t, filepath.Join(ws, "note"), fmt.Sprintf("version %d\n", i))
		mustArt(t, "push", "-m", ws, "-d", db) // a push ends with a snapshot
	}
	return db, versions
}

type forgetJSON struct {
	DryRun   bool `json:"dry_run"`
	Branches []struct {
		Branch string            `json:"branch"`
		Keep   []json.RawMessage `json:"keep"`
		Forget []json.RawMessage `json:"forget"`
		Events int64             `json:"events_forgotten"`
		Op     int64             `json:"op"`
	} `json:"branches"`
	GC *struct {
		Removed      int64 `json:"removed"`
		RemovedBytes int64 `json:"removed_bytes"`
	} `json:"gc"`
}

func TestForgetCommand(t *testing.T) {
	db, versions := forgetStore(t, 5)
	var dry forgetJSON
	if err := json.Unmarshal([]byte(mustArt(t, "forget", "-d", db, "-b", "main", "--keep-last", "2", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || len(dry.Branches) != 1 || len(dry.Branches[0].Keep) != 2 || len(dry.Branches[0].Forget) < 3 {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := mustArt(t, "cat", "-d", db, "main~3:ws/note"); got != "version 1\n" {
		t.Fatalf("after a dry run main~3 is %q", got)
	}
	var rep forgetJSON
	if err := json.Unmarshal([]byte(mustArt(t, "forget", "-d", db, "-b", "main", "--keep-last", "2", "--prune", "--grace", "0", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.DryRun || rep.Branches[0].Op == 0 || rep.Branches[0].Events == 0 || rep.GC == nil || rep.GC.RemovedBytes < 3*300_000 {
		t.Fatalf("forget --prune: %+v %+v", rep, rep.GC)
	}
	// The kept states are whole; the forgotten ones say so.
	if got := mustArt(t, "cat", "-d", db, "main~1:ws/big"); got != versions[3] {
		t.Fatal("main~1 lost its content")
	}
	if got := mustArt(t, "cat", "-d", db, "main:ws/big"); got != versions[4] {
		t.Fatal("the head lost its content")
	}
	_, stderr, code := art(t, "cat", "-d", db, "main~2:ws/big")
	if code == 0 || !strings.Contains(stderr, "forgotten") {
		t.Fatalf("main~2 after forget: exit %d, %q", code, stderr)
	}
	mustArt(t, "verify", "-d", db)
	if _, stderr, code := art(t, "blame", "-d", db, "ws/note"); code != 0 || !strings.Contains(stderr, "forgotten") {
		t.Fatalf("blame after forget: exit %d, stderr %q", code, stderr)
	}
	if out := mustArt(t, "log", "-d", db); !strings.Contains(out, "forget") || !strings.Contains(out, "[events forgotten]") {
		t.Fatalf("art log does not show the forget:\n%s", out)
	}
	if out := mustArt(t, "log", "-d", db, "--events"); !strings.Contains(out, "forgotten by op") {
		t.Fatalf("art log --events does not mark the forgotten stretch:\n%s", out)
	}
	// Human output names what was kept and why.
	out := mustArt(t, "forget", "-d", db, "--all", "--keep-last", "1", "--dry-run")
	if !strings.Contains(out, "would forget 1 snapshots") || !strings.Contains(out, "(last 1)") {
		t.Fatalf("dry-run output:\n%s", out)
	}
}

func TestForgetBadInput(t *testing.T) {
	db, _ := forgetStore(t, 1)
	for _, args := range [][]string{
		{"-b", "main"},       // no rule
		{"--keep-last", "1"}, // no branch
		{"-b", "main", "--all", "--keep-last", "1"}, // both
		{"-b", "main", "--keep-within", "soon"},     // bad duration
		{"-b", "main", "--keep-last", "-1"},         // negative
	} {
		_, stderr, code := art(t, append([]string{"forget", "-d", db}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Fatalf("forget %v: exit %d, stderr %q; want a one-line usage error, exit 2", args, code, stderr)
		}
	}
	_, stderr, code := art(t, "forget", "-d", db, "-b", "nosuch", "--keep-last", "1")
	if code == 0 || !strings.Contains(stderr, "nosuch") {
		t.Fatalf("forget on a missing branch: exit %d %q", code, stderr)
	}
}

// art status says what gc would give back after a forget.
func TestStatusShowsReclaimable(t *testing.T) {
	db, _ := forgetStore(t, 3)
	mustArt(t, "forget", "-d", db, "-b", "main", "--keep-last", "1")
	var rep statusReport
	if err := json.Unmarshal([]byte(mustArt(t, "status", "-d", db, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	// Written within the last hour: held back by gc's default grace.
	if rep.GC == nil || !rep.GC.DryRun || rep.GC.ProtectedBytes+rep.GC.RemovedBytes < 2*300_000 {
		t.Fatalf("status gc: %+v", rep.GC)
	}
	if out := mustArt(t, "status", "-d", db); !strings.Contains(out, "art gc would reclaim") || !strings.Contains(out, "grace period") {
		t.Fatalf("status:\n%s", out)
	}
	mustArt(t, "gc", "-d", db, "--grace", "0")
	rep.GC = nil
	if err := json.Unmarshal([]byte(mustArt(t, "status", "-d", db, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.GC.ProtectedBytes+rep.GC.RemovedBytes > 100_000 {
		t.Fatalf("status after gc: %+v", rep.GC)
	}
}

// With a retention section in the host config, art run forgets and
// collects once the store passes max_store_size; a bad section stops the
// run before it starts.
func TestRunAppliesAutomaticRetention(t *testing.T) {
	ws, db := overlayWorkspace(t)
	cfg := t.TempDir()
	write := func(body string) {
		writeFile(t, filepath.Join(cfg, "art", "config.json"), body)
	}
	run := func(script string) runOut {
		cmd := artCmd(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", script)
		cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+cfg)
		return exe(t, cmd)
	}
	write(`{"retention":{"max_store_size":"1K","keep_lsat":1}}`)
	if r := run("echo should-not-run > ran"); r.code == 0 || !strings.Contains(r.stderr, "keep_lsat") {
		t.Fatalf("bad config: exit %d, %q", r.code, r.stderr)
	}
	write(`{"retention":{"max_store_size":"1K","keep_last":1,"grace":"0s"}}`)
	for i := 0; i < 3; i++ {
		r := run(fmt.Sprintf("head -c 300000 /dev/urandom > big; echo %d > n", i))
		if r.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", i, r.code, r.stderr)
		}
		if i > 0 && !strings.Contains(r.stderr, "over retention.max_store_size") {
			t.Fatalf("run %d did not apply retention:\n%s", i, r.stderr)
		}
	}
	snaps := mustArt(t, "log", "-d", db, "--json")
	if !strings.Contains(snaps, "automatic retention") {
		t.Fatalf("the op log does not show the automatic forget:\n%.2000s", snaps)
	}
	if got := mustArt(t, "cat", "-d", db, "main:ws/n"); got != "2\n" {
		t.Fatalf("head lost: %q", got)
	}
	mustArt(t, "verify", "-d", db)
}
