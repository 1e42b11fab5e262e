package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// mountRamfs mounts a ramfs - a Linux filesystem whose change times stay
// coarse (the clock's tick, with no fine-grained ctime after a stat) - in
// a new directory and returns it; unmounted when t ends.
func mountRamfs(t *testing.T) string {
	t.Helper()
	testutil.RequireMount(t)
	dir := filepath.Join(t.TempDir(), "ramfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("art-test", dir, "ramfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
		t.Fatalf("mount ramfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// coarseStore opens a new store beside a workspace directory (not made)
// on a new ramfs, so that the change-time probe runs there.
func coarseStore(t *testing.T) (db *journal.DB, ws string) {
	t.Helper()
	dir := mountRamfs(t)
	db, err := journal.Open(context.Background(), filepath.Join(dir, "ws.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, filepath.Join(dir, "ws")
}

// importRecord is the import record of store path p on branch main.
func importRecord(t *testing.T, db *journal.DB, p string) journal.StatCache {
	t.Helper()
	var c journal.StatCache
	agent(t, db, "main", func(tx *journal.Tx) error {
		var ok bool
		var err error
		c, ok, err = tx.ImportRecord(p)
		if err == nil && !ok {
			t.Fatalf("no import record for %s", p)
		}
		return err
	})
	return c
}

// freshCtimeOldMtime writes path and puts its mtime an hour back: its
// ctime is now, as after cp -p, tar x or rsync -t.
func freshCtimeOldMtime(t *testing.T, path, data string) {
	t.Helper()
	write(t, path, []byte(data), 0o644)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// TestCoarseCtimeFreshFileIsRacy: on a filesystem whose change times are
// coarse, a host file changed within the racy window of the capture's
// stat is recorded racy even when its mtime is old (cp -p, touch -d):
// an edit that kept its size and put the mtime back within the ctime's
// tick would leave the stat equal, and a non-racy record would take the
// edited file for unchanged (the user's edit dropped). Its next capture
// compares it by content, finds the edit and takes it.
func TestCoarseCtimeFreshFileIsRacy(t *testing.T) {
	ctx := context.Background()
	db, ws := coarseStore(t)
	p := filepath.Join(ws, "a.txt")
	freshCtimeOldMtime(t, p, "v1\n")
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	if c := importRecord(t, db, "/ws/a.txt"); !c.Racy {
		t.Fatalf("record of a file changed just now on a coarse-ctime filesystem is not racy: %+v", c)
	}
	// The edit the record must not hide: same size, mtime put back.
	freshCtimeOldMtime(t, p, "v2\n")
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	if got := readStore(t, db, "main", "ws/a.txt"); got != "v2\n" {
		t.Fatalf("ws/a.txt = %q after the host's same-size edit, want %q", got, "v2\n")
	}
}

// TestFineCtimeFreshFileIsNotRacy: where the filesystem gives every
// change after a stat a new ctime (Linux 6.13 and later on ext4, xfs,
// btrfs, tmpfs), an old mtime with a fresh ctime is no race - the record
// stays trusted, so a workspace copied with cp -a keeps its stat
// fidelity (docs/architecture.md) from its first capture. On a machine
// whose temporary directory is coarse, the record must be racy instead.
func TestFineCtimeFreshFileIsNotRacy(t *testing.T) {
	ctx := context.Background()
	db, path := openDB(t)
	ws := filepath.Join(filepath.Dir(path), "ws")
	freshCtimeOldMtime(t, filepath.Join(ws, "a.txt"), "v1\n")
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(ws, &st); err != nil {
		t.Fatal(err)
	}
	fine := workspace.FineCtime(st.Dev, filepath.Dir(path))
	if c := importRecord(t, db, "/ws/a.txt"); c.Racy == fine {
		t.Fatalf("record %+v: racy %v on a filesystem whose ctime is fine: %v", c, c.Racy, fine)
	}
}

// TestCoarseCtimePulledFilesAreRacy: files a pull writes on a coarse-ctime
// filesystem are recorded racy even where the pull put their mtimes
// back to the stored ones, so a same-size edit right after the pull is
// captured.
func TestCoarseCtimePulledFilesAreRacy(t *testing.T) {
	ctx := context.Background()
	db, ws := coarseStore(t)
	freshCtimeOldMtime(t, filepath.Join(ws, "a.txt"), "v1\n")
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	pullInto(t, db, "main", ws)
	if c := importRecord(t, db, "/ws/a.txt"); !c.Racy {
		t.Fatalf("record of a pulled file on a coarse-ctime filesystem is not racy: %+v", c)
	}
}
