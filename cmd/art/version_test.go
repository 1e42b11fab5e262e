package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/artrt/art/migrations"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		out := mustArt(t, args...)
		if !strings.HasPrefix(out, "art ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("art %s: %q lacks the version or the Go version", args, out)
		}
		if want := "store schema " + strconv.Itoa(migrations.Latest()); !strings.Contains(out, want) {
			t.Errorf("art %s: %q lacks %q", args, out, want)
		}
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(mustArt(t, "version", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.StoreSchema != migrations.Latest() || v.Go != runtime.Version() || v.Version == "" {
		t.Errorf("art version --json = %+v", v)
	}
	if _, errs, code := art(t, "version", "extra"); code != exitUsage || !strings.Contains(errs, "no arguments") {
		t.Errorf("art version extra: exit %d, %q", code, errs)
	}
}

// The original art's documentation spells -m as --workspace on push and pull.
func TestWorkspaceAlias(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "--db", db, "--workspace", ws)
	out := filepath.Join(t.TempDir(), "ws")
	mustArt(t, "pull", "-q", "--db", db, "--workspace", out)
	if b, err := os.ReadFile(filepath.Join(out, "main.py")); err != nil || string(b) != "print('hello')\n" {
		t.Fatalf("pulled main.py = %q, %v", b, err)
	}
}
