package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// gcStore makes a store with history (files pushed, changed, pushed again)
// and n unreferenced objects of 50 KB, as an aborted writer leaves them,
// followed by one more push so that the garbage is not the newest object.
func gcStore(t *testing.T, n int, seed int64) string {
	t.Helper()
	ws, db := newWorkspace(t)
	for i := 0; i < 3; i++ {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%d", i)), strings.Repeat(fmt.Sprintf("v1 %d\n", i), 5000))
	}
	mustArt(t, "push", "-m", ws, "-d", db)
	raw, err := sql.Open("sqlite3", "file:"+db+"?_busy_timeout=10000&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	objs := cas.NewStore(raw)
	r := rand.New(rand.NewSource(seed))
	for i := 0; i < n; i++ {
		b := make([]byte, 50000)
		r.Read(b)
		if _, _, err := objs.Put(context.Background(), cas.KindChunk, b); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	writeFile(t, filepath.Join(ws, "f0"), "v2\n")
	mustArt(t, "push", "-m", ws, "-d", db)
	return db
}

func TestGCCommand(t *testing.T) {
	db := gcStore(t, 300, 1)
	before := mustArt(t, "cat", "-d", db, "main~1:ws/f0")
	var dry journal.GCReport
	if err := json.Unmarshal([]byte(mustArt(t, "gc", "-d", db, "--dry-run", "--grace", "0", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.Removed < 300 || !dry.DryRun {
		t.Fatalf("dry run: %+v", dry)
	}
	// The default grace period keeps objects this new.
	if out := mustArt(t, "gc", "-d", db); !strings.Contains(out, "removed 0 objects") {
		t.Fatalf("gc with the default grace removed something:\n%s", out)
	}
	st0, _ := os.Stat(db)
	var rep journal.GCReport
	if err := json.Unmarshal([]byte(mustArt(t, "gc", "-d", db, "--grace", "0", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Removed != dry.Removed {
		t.Fatalf("removed %d, dry run said %d", rep.Removed, dry.Removed)
	}
	st1, _ := os.Stat(db)
	if st1.Size() > st0.Size()-10*1000*1000 || rep.FileAfter > rep.FileBefore-10*1000*1000 {
		t.Fatalf("store file %d -> %d bytes (report %d -> %d): want >= 10 MB less", st0.Size(), st1.Size(), rep.FileBefore, rep.FileAfter)
	}
	mustArt(t, "verify", "-d", db)
	if got := mustArt(t, "cat", "-d", db, "main~1:ws/f0"); got != before {
		t.Fatal("a past state changed after gc")
	}
	mustArt(t, "log", "-d", db)
	mustArt(t, "diff", "-d", db, "main~1", "main")
}

// kill -9 of gc at any moment leaves a clean store, and a second gc completes.
func TestGCKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := artBinary(t)
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	for trial := 0; trial < 5; trial++ {
		db := gcStore(t, 400, int64(trial))
		cmd := exec.Command(bin, "gc", "-d", db, "--grace", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(r.Intn(150)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		mustArt(t, "verify", "-d", db)
		mustArt(t, "gc", "-d", db, "--grace", "0")
		out := mustArt(t, "gc", "-d", db, "--grace", "0")
		if !strings.Contains(out, "removed 0 objects") {
			t.Fatalf("trial %d: a third gc still found garbage:\n%s", trial, out)
		}
		mustArt(t, "verify", "-d", db)
	}
}
