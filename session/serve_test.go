package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/sandbox"
)

// TestServeHoldsTheBranch: art mount's Serve takes the same branch lock
// as a session, so a mount and a run never write one branch at the same
// time; a read-only mount of a past state takes none and leaves no
// temporary branch behind.
func TestServeHoldsTheBranch(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	o := testWorkspace(t)
	db, err := journal.Open(ctx, o.Store, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(ctx, db, mnt, ServeOptions{Branch: "main", Workspace: o.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	if srv.Capture == nil || srv.Capture.New == 0 {
		t.Errorf("capture before the mount: %+v", srv.Capture)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "ws", "main.py")); err != nil || string(got) != "print('hello')\n" {
		t.Errorf("main.py through the mount: %q, %v", got, err)
	}

	var cfg sandbox.Config
	s, err := Open(ctx, o, &cfg, nil)
	closeSession(t, s)
	var inUse *BranchInUseError
	if !errors.As(err, &inUse) || inUse.Branch != journal.DefaultBranch {
		t.Errorf("a session on the mounted branch: %v, want a BranchInUseError", err)
	}

	past := filepath.Join(t.TempDir(), "past")
	if err := os.Mkdir(past, 0o755); err != nil {
		t.Fatal(err)
	}
	ro, err := Serve(ctx, db, past, ServeOptions{Branch: "main", At: "main", ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only mount of main's head beside the writable mount: %v", err)
	}
	if err := ro.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(ctx, db, past, ServeOptions{Branch: "main", At: "main"}); !errors.As(err, new(*UsageError)) {
		t.Errorf("--at without --read-only: %v, want a UsageError", err)
	}

	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, o, &cfg, nil)
	if err != nil {
		t.Errorf("a session after the mount closed: %v", err)
	}
	closeSession(t, s)
	brs, err := db.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brs) != 1 {
		t.Errorf("branches after the mounts: %+v, want main only", brs)
	}
}
