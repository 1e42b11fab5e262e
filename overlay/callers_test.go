package overlay_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
)

// TestNameCallers: each change carries the pid of the process that made
// it, and that pid is named by an exec event (argv from /proc).
func TestNameCallers(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	dir := t.TempDir()
	db, err := journal.Open(ctx, filepath.Join(dir, "s.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mnt := mustMkdir(t, filepath.Join(dir, "mnt"))
	fsys, err := overlay.Mount(ctx, mnt, overlay.Options{Branch: "main", DB: db, UpperDir: mustMkdir(t, filepath.Join(dir, "upper")), NameCallers: true})
	if err != nil {
		t.Fatal(err)
	}
	script := "echo x > f; echo y > g"
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = mnt
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	shPid := int64(cmd.Process.Pid)
	// A change from the test process itself: another pid, another name.
	if err := os.WriteFile(filepath.Join(mnt, "h"), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Events appended through the mount's batch by another writer.
	if err := fsys.Record(ctx, journal.Event{Kind: journal.EvSyscall, PID: 42, Text: "connect"}); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(ctx, journal.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	execs := map[int64][]journal.Event{}
	byPath := map[string]int64{}
	var syscalls int
	for _, ev := range evs {
		switch ev.Kind {
		case journal.EvExec:
			execs[ev.PID] = append(execs[ev.PID], ev)
		case journal.EvCreate:
			byPath[string(ev.Path)] = ev.PID
		case journal.EvSyscall:
			if ev.PID == 42 && ev.Text == "connect" {
				syscalls++
			}
		}
	}
	for _, p := range []string{"f", "g"} {
		if got := byPath[p]; got != shPid {
			t.Errorf("create %s: pid %d, want sh %d", p, got, shPid)
		}
	}
	if got := byPath["h"]; got != int64(os.Getpid()) && got == 0 {
		t.Errorf("create h: pid %d, want this process", got)
	}
	if n := len(execs[shPid]); n != 1 {
		t.Fatalf("%d exec events for sh (pid %d), want exactly 1 (named once)", n, shPid)
	}
	ev := execs[shPid][0]
	if got, want := ev.Text, "/bin/sh\x00-c\x00"+script; got != want {
		t.Errorf("exec text %q, want %q", got, want)
	}
	var info struct {
		Cwd    string `json:"cwd"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal(ev.Value, &info); err != nil {
		t.Fatal(err)
	}
	if info.Cwd != mnt || info.Source != "proc" {
		t.Errorf("exec value %s: want cwd %s, source proc", ev.Value, mnt)
	}
	if syscalls != 1 {
		t.Errorf("%d recorded syscall events, want 1", syscalls)
	}
}
