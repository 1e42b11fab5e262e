package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote/s3api"
)

func headRoot(t *testing.T, path, branch string) string {
	t.Helper()
	db, err := journal.Open(context.Background(), path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.Head(context.Background(), branch)
	if err != nil {
		t.Fatal(err)
	}
	return st.Root.String()
}

// TestRemoteS3RoundTrip: store A -> S3 -> empty store B, verify clean on
// both, same root, and pull -m from B reproduces the workspace.
func TestRemoteS3RoundTrip(t *testing.T) {
	srv := testutil.MinIO(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("ART_S3_ENDPOINT", srv.Endpoint)
	c, err := s3api.New(s3api.Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "art-cli-" + hex.EncodeToString(b)
	if err := c.MakeBucket(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}
	url := "s3://" + bucket + "/team/store"

	ws, dbA := newWorkspace(t)
	for i := 0; i < 30; i++ {
		writeFile(t, filepath.Join(ws, "pkg", fmt.Sprintf("f%d.go", i)), strings.Repeat(fmt.Sprintf("// line %d\n", i), 50*i+1))
	}
	mustArt(t, "push", "-q", "-m", ws, "-d", dbA)
	mustArt(t, "remote", "add", "-d", dbA, "origin", url)
	if out := mustArt(t, "remote", "list", "-d", dbA); !strings.Contains(out, "origin") || !strings.Contains(out, url) {
		t.Fatalf("remote list: %q", out)
	}
	var st struct {
		Objects  int64 `json:"objects"`
		Bytes    int64 `json:"bytes"`
		Branches []struct {
			Status string `json:"status"`
		} `json:"branches"`
	}
	if err := json.Unmarshal([]byte(mustArt(t, "push", "-d", dbA, "origin", "main", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Objects == 0 || st.Bytes == 0 || st.Branches[0].Status != "created" {
		t.Fatalf("push --json: %+v", st)
	}

	dbB := filepath.Join(t.TempDir(), "b.db")
	out := mustArt(t, "pull", "-d", dbB, url, "main")
	if !strings.Contains(out, "main") {
		t.Fatalf("pull output: %q", out)
	}
	mustArt(t, "verify", "-d", dbA)
	mustArt(t, "verify", "-d", dbB)
	if a, b := headRoot(t, dbA, "main"), headRoot(t, dbB, "main"); a != b {
		t.Fatalf("roots differ: A %s, B %s", a, b)
	}
	back := filepath.Join(t.TempDir(), "ws")
	mustArt(t, "pull", "-q", "-m", back, "-d", dbB)
	if d := testutil.DiffTrees(testutil.DescribeTree(t, ws, testutil.TreeOptions{}), testutil.DescribeTree(t, back, testutil.TreeOptions{})); d != "" {
		t.Fatalf("workspace pulled from B differs:\n%s", d)
	}
	// B's log shows where its state came from.
	if out := mustArt(t, "log", "-d", dbB); !strings.Contains(out, "pull "+url+" main") {
		t.Fatalf("log on B does not show the pull:\n%s", out)
	}
	// A no-op push says so and sends nothing.
	if out := mustArt(t, "push", "-d", dbA, "origin"); !strings.Contains(out, "up to date") || !strings.Contains(out, "0 objects") {
		t.Fatalf("no-op push: %q", out)
	}

	// art gc REMOTE: after files are deleted and pushed, the old state's
	// objects go; the remote still pulls the branch exactly.
	for i := 10; i < 30; i++ {
		os.Remove(filepath.Join(ws, "pkg", fmt.Sprintf("f%d.go", i)))
	}
	mustArt(t, "push", "-q", "-m", ws, "-d", dbA)
	mustArt(t, "push", "-d", dbA, "origin")
	var gc struct {
		DryRun      bool  `json:"dry_run"`
		Condemned   int   `json:"condemned"`
		Deleted     int   `json:"deleted"`
		Pending     bool  `json:"pending"`
		BytesBefore int64 `json:"bytes_before"`
		BytesAfter  int64 `json:"bytes_after"`
	}
	if err := json.Unmarshal([]byte(mustArt(t, "gc", url, "--dry-run", "--json")), &gc); err != nil {
		t.Fatal(err)
	}
	if !gc.DryRun || gc.Condemned == 0 || gc.Deleted != 0 {
		t.Fatalf("gc --dry-run: %+v", gc)
	}
	if out := mustArt(t, "gc", "-d", dbA, "origin"); !strings.Contains(out, "run art gc origin again in") {
		t.Fatalf("gc with the default grace: %q, want a pending round", out)
	}
	if err := json.Unmarshal([]byte(mustArt(t, "gc", "-d", dbA, "origin", "--grace", "0", "--json")), &gc); err != nil {
		t.Fatal(err)
	}
	if gc.Deleted == 0 || gc.Pending || gc.BytesAfter >= gc.BytesBefore {
		t.Fatalf("gc --grace 0: %+v", gc)
	}
	dbC := filepath.Join(t.TempDir(), "c.db")
	mustArt(t, "pull", "-d", dbC, url, "main")
	mustArt(t, "verify", "-d", dbC)
	if a, c := headRoot(t, dbA, "main"), headRoot(t, dbC, "main"); a != c {
		t.Fatalf("after gc: roots differ: A %s, C %s", a, c)
	}
	if _, _, code := art(t, "gc", "-d", dbA, "--history", "1"); code != exitUsage {
		t.Fatalf("gc --history without REMOTE: exit %d, want usage", code)
	}
}

func TestRemoteFileCLI(t *testing.T) {
	ws, dbA := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", dbA)
	dbR := filepath.Join(t.TempDir(), "shared.db")
	mustArt(t, "push", "-d", dbA, dbR)
	mustArt(t, "verify", "-d", dbR)
	if a, r := headRoot(t, dbA, "main"), headRoot(t, dbR, "main"); a != r {
		t.Fatalf("remote store root %s, local %s", r, a)
	}
	// Diverge the remote, then a push is refused with a hint, exit 1.
	dbB := filepath.Join(t.TempDir(), "b.db")
	mustArt(t, "pull", "-d", dbB, dbR)
	wsB := filepath.Join(t.TempDir(), "ws")
	mustArt(t, "pull", "-q", "-m", wsB, "-d", dbB)
	writeFile(t, filepath.Join(wsB, "b.txt"), "from b\n")
	mustArt(t, "push", "-q", "-m", wsB, "-d", dbB)
	mustArt(t, "push", "-d", dbB, dbR, "main")
	writeFile(t, filepath.Join(ws, "a.txt"), "from a\n")
	mustArt(t, "push", "-q", "-m", ws, "-d", dbA)
	_, errs, code := art(t, "push", "-d", dbA, dbR, "main")
	if code != exitFailure || !strings.Contains(errs, "not a fast-forward") || !strings.Contains(errs, "--force") {
		t.Fatalf("diverged push: exit %d, stderr %q", code, errs)
	}
	mustArt(t, "push", "-d", dbA, dbR, "main", "--force")
	if a, r := headRoot(t, dbA, "main"), headRoot(t, dbR, "main"); a != r {
		t.Fatalf("forced push: remote %s, local %s", r, a)
	}
	// -m and a REMOTE do not mix; a remote name that is unknown and not a
	// store file is not found.
	if _, _, code := art(t, "push", "-m", ws, "-d", dbA, dbR); code != exitUsage {
		t.Fatalf("push -m DIR REMOTE: exit %d, want usage", code)
	}
	if _, _, code := art(t, "pull", "-d", dbA, filepath.Join(t.TempDir(), "nosuch.db")); code != exitNotFound {
		t.Fatalf("pull from a missing store: exit %d, want not found", code)
	}
	// A branch the remote does not have is not found too (remote.ErrNoBranch
	// is of class not found; it exited 1 before the one error table).
	if _, errs, code := art(t, "pull", "-d", dbA, dbR, "nosuch"); code != exitNotFound || !strings.Contains(errs, "no such branch on the remote") {
		t.Fatalf("pull of a branch the remote lacks: exit %d, stderr %q, want not found", code, errs)
	}
	// art gc on a store-file remote is that store's gc.
	if out := mustArt(t, "gc", dbR, "--grace", "0"); !strings.Contains(out, "objects reachable") {
		t.Fatalf("gc of a store-file remote: %q", out)
	}
	mustArt(t, "verify", "-d", dbR)
	mustArt(t, "remote", "add", "-d", dbA, "shared", dbR)
	if _, _, code := art(t, "remote", "add", "-d", dbA, "shared", dbR); code == 0 {
		t.Fatal("adding a remote twice succeeded")
	}
	mustArt(t, "remote", "remove", "-d", dbA, "shared")
	if _, _, code := art(t, "remote", "remove", "-d", dbA, "shared"); code != exitNotFound {
		t.Fatalf("removing a missing remote: exit %d", code)
	}
}
