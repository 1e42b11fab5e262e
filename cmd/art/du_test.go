package main

import (
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestDu: each branch's content, what only it references, and the states
// together; a REV measures that state; an unknown REV is an error.
func TestDu(t *testing.T) {
	ws, db := newWorkspace(t)
	shared, only := make([]byte, 200<<10), make([]byte, 100<<10)
	rand.Read(shared)
	rand.Read(only)
	writeFile(t, filepath.Join(ws, "shared.bin"), string(shared))
	mustArt(t, "push", "-m", ws, "-d", db, "-q")
	mustArt(t, "branch", "-d", db, "b2")
	writeFile(t, filepath.Join(ws, "only-main.bin"), string(only))
	mustArt(t, "push", "-m", ws, "-d", db, "-q")

	var rows []duRow
	if err := json.Unmarshal([]byte(mustArt(t, "du", "-d", db, "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	byRev := map[string]duRow{}
	for _, r := range rows {
		byRev[r.Rev] = r
	}
	main, b2, all := byRev["main"], byRev["b2"], byRev["(together)"]
	if len(rows) != 3 || !all.Total {
		t.Fatalf("rows: %+v", rows)
	}
	// Random content does not compress: stored = raw.
	if main.Files != 4 || b2.Files != 3 || main.Bytes-b2.Bytes != int64(len(only)) {
		t.Fatalf("main %+v, b2 %+v", main, b2)
	}
	if main.Exclusive != int64(len(only)) || b2.Exclusive != 0 || all.Stored != main.Stored || all.Files != 4 {
		t.Fatalf("exclusive: main %d, b2 %d; together %+v", main.Exclusive, b2.Exclusive, all)
	}
	out := mustArt(t, "du", "-d", db, "main~1")
	if !strings.Contains(out, "main~1") || !strings.Contains(out, "ONLY HERE") {
		t.Fatalf("du main~1:\n%s", out)
	}
	if _, errs, code := art(t, "du", "-d", db, "nosuch"); code == 0 || !strings.Contains(errs, "nosuch") {
		t.Fatalf("du nosuch: exit %d, %q", code, errs)
	}
}
