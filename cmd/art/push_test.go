package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type pushJSON struct {
	Files, Changed, Unchanged int
	NothingChanged            bool `json:"nothing_changed"`
	Snapshot                  struct{ ID string }
}

func pushJSONOf(t *testing.T, ws, db string) pushJSON {
	t.Helper()
	var st pushJSON
	if err := json.Unmarshal([]byte(mustArt(t, "push", "-m", ws, "-d", db, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPushNothingChangedWritesNothing: once a push -m has left the branch
// equal to the host, with files older than the racy window, a push that
// finds nothing changed says so and leaves the store file as it was: no
// op, no snapshot, nothing in the WAL. The next change is pushed as ever.
func TestPushNothingChangedWritesNothing(t *testing.T) {
	dir := t.TempDir()
	ws, db := filepath.Join(dir, "ws"), filepath.Join(dir, "ws.db")
	writeFile(t, filepath.Join(ws, "a.txt"), "aaa\n")
	writeFile(t, filepath.Join(ws, "sub", "b.txt"), "bbb\n")
	// Past the racy window (2 s): the first push's mark then proves
	// every entry. Not a timing test.
	time.Sleep(2100 * time.Millisecond)
	first := pushJSONOf(t, ws, db)
	if first.NothingChanged || first.Files != 2 {
		t.Fatalf("first push: %+v", first)
	}
	logBefore := mustArt(t, "log", "-d", db, "--json")
	before, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	noop := pushJSONOf(t, ws, db)
	if !noop.NothingChanged || noop.Unchanged != 2 || noop.Snapshot.ID != first.Snapshot.ID {
		t.Fatalf("no-op push: %+v, want nothing changed, 2 unchanged, snapshot %s", noop, first.Snapshot.ID)
	}
	after, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("the store file changed: %v %d bytes, was %v %d", after.ModTime(), after.Size(), before.ModTime(), before.Size())
	}
	if wal, err := os.Stat(db + "-wal"); err == nil && wal.Size() != 0 {
		t.Errorf("the WAL holds %d bytes after a no-op push", wal.Size())
	}
	if got := mustArt(t, "log", "-d", db, "--json"); got != logBefore {
		t.Errorf("a no-op push changed the log:\n%s\nwas\n%s", got, logBefore)
	}

	// Same size, within the same second: the ctime and content differ.
	writeFile(t, filepath.Join(ws, "sub", "b.txt"), "BBB\n")
	next := pushJSONOf(t, ws, db)
	if next.NothingChanged || next.Changed != 1 || next.Snapshot.ID == first.Snapshot.ID {
		t.Fatalf("push after an edit: %+v", next)
	}
	if got := mustArt(t, "cat", "-d", db, "main:ws/sub/b.txt"); got != "BBB\n" {
		t.Fatalf("ws/sub/b.txt = %q after the push", got)
	}
}
