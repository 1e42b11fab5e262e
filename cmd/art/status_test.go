package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
)

// TestStatus: art status names the branch's head and last snapshot, counts
// what changed since that snapshot, measures the store, and refuses
// arguments; --json carries the same.
func TestStatus(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-m", ws, "-d", db, "-q")
	out := mustArt(t, "status", "-d", db)
	for _, want := range []string{"branch main: head @", "last snapshot ", "nothing changed since", "no session running", "content ", "journal "} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	writeFile(t, filepath.Join(ws, "new.txt"), "n\n")
	mustArt(t, "push", "-m", ws, "-d", db, "-q")
	var rep statusReport
	if err := json.Unmarshal([]byte(mustArt(t, "status", "-d", db, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Branch.Branch != "main" || rep.Last == nil || rep.Last.Root != rep.Branch.Root || len(rep.Sessions) != 0 {
		t.Fatalf("status --json: %+v", rep)
	}
	if rep.Usage.Chunks.Count < 3 || rep.Usage.Manifests.Count < 3 || rep.Usage.Trees.Count < 2 ||
		rep.Usage.Events.Rows == 0 || rep.Usage.FileBytes == 0 || rep.Usage.Snapshots != 2 {
		t.Fatalf("usage: %+v", rep.Usage)
	}
	if _, errs, code := art(t, "status", "-d", db, "extra"); code != 2 || !strings.Contains(errs, "no arguments") {
		t.Fatalf("status with an argument: exit %d, %q", code, errs)
	}
	if _, errs, code := art(t, "status", "-d", db, "-b", "nosuch"); code == 0 || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Fatalf("status of a missing branch: exit %d, %q", code, errs)
	}
}

// TestStatusListsSessions: a mount of a branch shows as a session with
// its pid and branch while it runs, and not after.
func TestStatusListsSessions(t *testing.T) {
	testutil.RequireFUSE(t)
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-m", ws, "-d", db, "-q")
	mustArt(t, "branch", "-d", db, "other")
	mnt := t.TempDir()
	cmd := startMount(t, "-d", db, "-b", "other", mnt)
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var rep statusReport
	if err := json.Unmarshal([]byte(mustArt(t, "status", "-d", db, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sessions) != 1 || rep.Sessions[0].PID != cmd.Process.Pid || rep.Sessions[0].Branch != "other" ||
		time.Since(rep.Sessions[0].Since) > time.Minute {
		t.Fatalf("sessions while mounted: %+v (mount pid %d)", rep.Sessions, cmd.Process.Pid)
	}
	if out := mustArt(t, "status", "-d", db, "-b", "other"); !strings.Contains(out, "on branch other since") {
		t.Fatalf("status does not show the session:\n%s", out)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	stopped = true
	rep = statusReport{}
	if err := json.Unmarshal([]byte(mustArt(t, "status", "-d", db, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sessions) != 0 {
		t.Fatalf("sessions after the mount ended: %+v", rep.Sessions)
	}
}
