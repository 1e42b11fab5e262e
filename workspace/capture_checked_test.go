package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// TestCaptureCheckedAgreesWithImport: CaptureChecked, whose import takes
// the host listings its check read once it found a change, decides as a
// capture by Import alone does. Two stores get the same captures of the
// same workspace; after each host change one captures with
// CaptureChecked, the other with Import, and the stats and the branch
// trees must be equal - and equal to the host. A case with nothing
// changed must say so without an import.
func TestCaptureCheckedAgreesWithImport(t *testing.T) {
	t.Run("records held whole", captureCheckedAgrees)
	// Past the bound the records are read directory by directory and
	// the check's listings are not held: the same answers.
	t.Run("records past the bound", func(t *testing.T) {
		workspace.SetCacheLimit(t, 3)
		captureCheckedAgrees(t)
	})
}

func captureCheckedAgrees(t *testing.T) {
	ctx := context.Background()
	workspace.SetRacyWindow(t, 100*time.Millisecond)
	ws := filepath.Join(t.TempDir(), "ws")
	for p, data := range map[string]string{
		"top.txt": "top", "a/b/other.txt": "other", "a/b/c/deep.txt": "deep1", "d/x.txt": "old1", "d/e/f/g.txt": "g",
		"z/last.txt": "last",
	} {
		write(t, filepath.Join(ws, p), []byte(data), 0o644)
	}
	if err := os.Symlink("top.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	checked, _ := openDB(t)
	plain, _ := openDB(t)
	opts := workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, SkipUnchanged: true}
	step := func(name string, change func()) {
		t.Helper()
		change()
		time.Sleep(150 * time.Millisecond) // past the racy window
		got, same, err := workspace.CaptureChecked(ctx, checked, opts)
		if err != nil {
			t.Fatalf("%s: CaptureChecked: %v", name, err)
		}
		want, err := workspace.Import(ctx, plain, opts)
		if err != nil {
			t.Fatalf("%s: Import: %v", name, err)
		}
		if same != want.NothingChanged {
			t.Errorf("%s: CaptureChecked said unchanged=%v, Import NothingChanged=%v", name, same, want.NothingChanged)
		}
		g, w := got, want
		g.Snapshot, w.Snapshot = journal.Snapshot{}, journal.Snapshot{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: CaptureChecked %+v\nImport %+v", name, g, w)
		}
		if got.Snapshot.Root != want.Snapshot.Root {
			t.Errorf("%s: trees differ: %s against %s", name, got.Snapshot.Root.Short(), want.Snapshot.Root.Short())
		}
		for _, p := range []string{"top.txt", "a/b/other.txt", "a/b/c/deep.txt", "d/x.txt", "d/e/f/g.txt", "z/last.txt", "z/new.txt", "d/e/f/h.txt"} {
			host, err := os.ReadFile(filepath.Join(ws, p))
			hs := string(host)
			if os.IsNotExist(err) {
				hs = "<none>"
			}
			if got := readStore(t, checked, "main", "ws/"+p); got != hs {
				t.Errorf("%s: ws/%s = %q in the branch, %q on the host", name, p, got, hs)
			}
		}
	}
	step("first capture", func() {})
	step("nothing changed", func() {})
	step("one deep file changed", func() { write(t, filepath.Join(ws, "a/b/c/deep.txt"), []byte("deep2"), 0o644) })
	step("a file added after the change", func() { write(t, filepath.Join(ws, "z/new.txt"), []byte("new"), 0o644) })
	step("a change, a deletion, an addition, a mode", func() {
		write(t, filepath.Join(ws, "top.txt"), []byte("top2"), 0o644)
		if err := os.Remove(filepath.Join(ws, "d/x.txt")); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(ws, "d/e/f/h.txt"), []byte("h"), 0o644)
		if err := os.Chmod(filepath.Join(ws, "z/last.txt"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	step("a directory removed", func() {
		if err := os.RemoveAll(filepath.Join(ws, "a/b")); err != nil {
			t.Fatal(err)
		}
	})
	step("nothing changed again", func() {})
}
