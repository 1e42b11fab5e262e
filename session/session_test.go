package session

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// testWorkspace makes base/ws with one file, reachable by the sandbox's
// uid, and returns the options of a session on it with a store beside it.
func testWorkspace(t *testing.T) Options {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "main.py"), []byte("print('hello')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{ws, filepath.Join(ws, "main.py")} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	uid, gid := DefaultUser(ws)
	return Options{Store: filepath.Join(base, "ws.db"), Workspace: ws, Branch: "main", UID: uid, GID: gid}
}

// closeSession closes s and its store, as a caller must even after a
// failed Open.
func closeSession(t *testing.T, s *Session) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if s.DB != nil {
		if err := s.DB.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestOpenLocksTheBranch: an open session serves the captured workspace
// at cfg.Home, holds its branch (another branch of the store opens
// beside it) and is listed as live; Close removes its state directory and
// frees the branch.
func TestOpenLocksTheBranch(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	o := testWorkspace(t)
	var warn bytes.Buffer
	o.Warn = &warn
	var cfg sandbox.Config
	s, err := Open(ctx, o, &cfg, nil)
	if err != nil {
		closeSession(t, s)
		t.Fatal(err)
	}
	if s.Branch != journal.DefaultBranch || s.Before.ID.IsZero() || cfg.Home != filepath.Join(s.Dir, "home") {
		t.Errorf("session on %q, capture snapshot %v, home %q in %q", s.Branch, s.Before.ID, cfg.Home, s.Dir)
	}
	if got, err := os.ReadFile(filepath.Join(cfg.Home, "ws", "main.py")); err != nil || string(got) != "print('hello')\n" {
		t.Errorf("main.py through the mount: %q, %v", got, err)
	}
	if !strings.Contains(strings.Join(cfg.Hide, " "), o.Store) {
		t.Errorf("the store is not hidden from the sandbox: %q", cfg.Hide)
	}

	base, err := StateDir()
	if err != nil {
		t.Fatal(err)
	}
	live, err := List(base, o.Store)
	if err != nil || len(live) != 1 || live[0].PID != os.Getpid() || live[0].Branch != journal.DefaultBranch || live[0].Dir != s.Dir {
		t.Errorf("live sessions of the store: %+v, %v", live, err)
	}

	var cfg2 sandbox.Config
	s2, err := Open(ctx, o, &cfg2, nil)
	closeSession(t, s2)
	var inUse *BranchInUseError
	if !errors.As(err, &inUse) || inUse.Branch != journal.DefaultBranch {
		t.Errorf("second session on main: %v, want a BranchInUseError", err)
	}

	other := o
	other.Branch = "try-a"
	var cfg3 sandbox.Config
	s3, err := Open(ctx, other, &cfg3, nil)
	closeSession(t, s3)
	if err != nil {
		t.Errorf("a session on another branch: %v", err)
	}
	if !strings.Contains(warn.String(), "art: new branch try-a from main") {
		t.Errorf("warnings: %q", warn.String())
	}

	dir := s.Dir
	closeSession(t, s)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state dir after Close: %v", err)
	}
	if live, err := List(base, o.Store); err != nil || len(live) != 0 {
		t.Errorf("live sessions after Close: %+v, %v", live, err)
	}
	s4, err := Open(ctx, o, &cfg2, nil)
	closeSession(t, s4)
	if err != nil {
		t.Errorf("main after Close: %v", err)
	}
}

// TestCleanStale: a session directory whose lock nobody holds is removed
// (its art was killed); one whose lock is held stays.
func TestCleanStale(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"session-dead/home", "session-alive/home"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"session-dead", "session-alive"} {
		if err := os.WriteFile(filepath.Join(base, d, "lock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(base, "session-alive", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	CleanStale(base, &warn)
	if _, err := os.Stat(filepath.Join(base, "session-dead")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale session dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "session-alive", "home")); err != nil {
		t.Errorf("live session dir: %v", err)
	}
	if !strings.Contains(warn.String(), "cleaned up after a killed session (session-dead)") || strings.Contains(warn.String(), "session-alive") {
		t.Errorf("report: %q", warn.String())
	}
}

// TestRunRecordsTheCommand: Run with a store journals the command's
// change under a run op with its status and ends with a snapshot.
func TestRunRecordsTheCommand(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	ctx := context.Background()
	o := testWorkspace(t)
	var stdout, warn bytes.Buffer
	o.Warn = &warn
	res, err := Run(ctx, o, Command{Argv: []string{"sh", "-c", "echo new > made.txt; echo out; exit 3"}, Net: sandbox.NetNone,
		Stdout: &stdout, Stderr: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Direct || res.Branch != journal.DefaultBranch || res.Changed != 1 || res.Snapshot.ID.IsZero() {
		t.Fatalf("result %+v (warnings %q)", res, warn.String())
	}
	if stdout.String() != "out\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	db, err := journal.Open(ctx, o.Store, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	head, err := db.Head(ctx, journal.DefaultBranch)
	if err != nil || head.Snapshot != res.Snapshot.ID {
		t.Errorf("head %+v, %v; want snapshot %v", head, err, res.Snapshot.ID)
	}
	ops, err := db.Ops(ctx, journal.LogQuery{Branch: journal.DefaultBranch, Limit: 1})
	if err != nil || len(ops) != 1 || ops[0].Kind != "run" || ops[0].Status == nil || *ops[0].Status != 3 {
		t.Fatalf("last op: %+v, %v", ops, err)
	}
	if _, err := os.Stat(filepath.Join(o.Workspace, "made.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the host workspace was written: %v", err)
	}
}

// TestRunMissingCommand: a command the sandbox cannot find is the
// shell's 127 with art's message on Warn, not bwrap's 1.
func TestRunMissingCommand(t *testing.T) {
	testutil.Require(t, "bwrap")
	o := testWorkspace(t)
	o.Store = "" // direct mode
	var warn bytes.Buffer
	o.Warn = &warn
	res, err := Run(context.Background(), o, Command{Argv: []string{"no-such-command-here"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 127 || !res.Direct || !strings.Contains(warn.String(), "art: command not found: no-such-command-here") {
		t.Errorf("exit %d, direct %v, warnings %q", res.ExitCode, res.Direct, warn.String())
	}
}

// TestExecutorOverOneSession: the exec API's executor serves a stream of
// requests over one mount; a later request sees an earlier one's file.
func TestExecutorOverOneSession(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	ctx := context.Background()
	o := testWorkspace(t)
	ex, release, err := NewExecutor(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := &execapi.Server{Executor: ex}
	in := `{"command":["sh","-c","echo a > a.txt"]}` + "\n" + `{"command":["cat","a.txt"]}` + "\n"
	var out bytes.Buffer
	err = srv.Serve(ctx, strings.NewReader(in), &out, execapi.JSONL)
	if rerr := release(); err == nil {
		err = rerr
	}
	if err != nil {
		t.Fatal(err)
	}
	resps := execResponses(t, out.String())
	if len(resps) != 2 {
		t.Fatalf("%d responses", len(resps))
	}
	if r := resps[0]; r.Status != execapi.StatusSuccess || r.Changes == nil || r.Changes.Added != 1 {
		t.Errorf("first: %s %+v %+v", r.Status, r.Changes, r.Error)
	}
	if r := resps[1]; r.Status != execapi.StatusSuccess || r.Stdout != "a\n" || r.SnapshotBefore != resps[0].SnapshotAfter {
		t.Errorf("second: %s stdout %q, error %+v", r.Status, r.Stdout, r.Error)
	}
}

// TestOpenLooksUpTheWorkspace: Open looks up the workspace's directory on
// the new mount (bwrap's --chdir target) on its own, so the kernel has
// it cached when the sandbox starts; nothing else here touches the mount.
func TestOpenLooksUpTheWorkspace(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	o := testWorkspace(t)
	cfg := sandbox.Config{Name: filepath.Base(o.Workspace)}
	s, err := Open(ctx, o, &cfg, nil)
	defer closeSession(t, s)
	if err != nil {
		t.Fatal(err)
	}
	// The lookup reads the root's listing (a small directory is listed at
	// its first lookup, and a listing now answers for its subdirectories)
	// or, for a big root, queries the name alone.
	looked := func() bool { st := s.FS.Stats(); return st.LookupQueries+st.ListQueries > 0 }
	for start := time.Now(); !looked(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no lookup on the mount after Open: %+v", s.FS.Stats())
		}
	}
}

// TestCloseAside: CloseAside unmounts and lets go of the failure reserve
// before it returns (the end's records may need the space), and its wait
// leaves what Close leaves: no session directory, the branch free.
func TestCloseAside(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	o := testWorkspace(t)
	var cfg sandbox.Config
	s, err := Open(ctx, o, &cfg, nil)
	if err != nil {
		closeSession(t, s)
		t.Fatal(err)
	}
	if s.reserve == nil {
		t.Log("no failure reserve on this file system")
	}
	wait, err := s.CloseAside(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.FS != nil || s.reserve != nil {
		t.Errorf("CloseAside returned with the mount (%v) or the reserve (%v) still held", s.FS != nil, s.reserve != nil)
	}
	// The branch stays the session's until the wait (the caller's end
	// records come first): another session is refused meanwhile.
	var cfgEarly sandbox.Config
	early, err := Open(ctx, o, &cfgEarly, nil)
	closeSession(t, early)
	var inUse *journal.BranchInUseError
	if !errors.As(err, &inUse) {
		t.Errorf("another session before CloseAside's wait: %v, want the branch in use", err)
	}
	wait()
	if _, err := os.Stat(s.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("session directory after CloseAside's wait: %v", err)
	}
	var cfg2 sandbox.Config
	s2, err := Open(ctx, o, &cfg2, nil)
	closeSession(t, s2)
	if err != nil {
		t.Errorf("the branch after CloseAside's wait: %v", err)
	}
	s.DB.Close()
}
