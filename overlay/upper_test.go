package overlay_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/artrt/art/overlay"
)

// A killed daemon's upper directory (its lock not held) is removed; a
// live one, and one with no lock file yet (being made), stay.
func TestCleanStaleUppers(t *testing.T) {
	parent := t.TempDir()
	live, release, err := overlay.MakeUpperDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	stale := filepath.Join(parent, "art-upper-stale")
	making := filepath.Join(parent, "art-upper-making")
	for _, d := range []string{stale, making} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "u-1"), []byte("agent's open file"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stale, "lock"), nil, 0o600); err != nil { // nobody holds it
		t.Fatal(err)
	}
	n, err := overlay.CleanStaleUppers(parent)
	if err != nil || n != 1 {
		t.Fatalf("CleanStaleUppers = %d, %v; want 1 removed", n, err)
	}
	for d, want := range map[string]bool{live: true, making: true, stale: false} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
	release()
	if _, err := os.Stat(live); !os.IsNotExist(err) {
		t.Errorf("release left the upper dir: %v", err)
	}
}
