package overlay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// primeTree makes dirs directories of files files each under a new
// directory, plus links that lead out of it and back into it.
func primeTree(t *testing.T, dirs, files int) (root, outside string) {
	t.Helper()
	root, outside = t.TempDir(), t.TempDir()
	for i := range dirs {
		d := filepath.Join(root, fmt.Sprintf("d%03d", i), "sub")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range files {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(outside, fmt.Sprintf("x%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(root, "d000", "loop")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

// TestPrimeWalk: the walk lists every entry of the tree once, each
// directory once, follows no link (out of the tree or back into it), and
// stops at its bound and when cancelled.
func TestPrimeWalk(t *testing.T) {
	root, _ := primeTree(t, 12, 30)
	// 12 dN + 12 sub + 360 files + out + loop.
	entries, dirs := primeWalk(context.Background(), root, 1<<30, nil)
	if entries != 12+12+360+2 || dirs != 1+12+12 {
		t.Fatalf("walk listed %d entries in %d directories, want %d in %d", entries, dirs, 12+12+360+2, 1+12+12)
	}
	// Bounded: it stops listing once past the bound (a directory's
	// getdents may take more than one entry past it).
	if entries, dirs := primeWalk(context.Background(), root, 40, nil); entries < 40 || entries > 40+31 || dirs > 3 {
		t.Fatalf("walk bounded to 40 listed %d entries in %d directories", entries, dirs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if entries, dirs := primeWalk(ctx, root, 1<<30, nil); entries != 0 || dirs > 1 {
		t.Fatalf("cancelled walk listed %d entries in %d directories", entries, dirs)
	}
	if entries, dirs := primeWalk(context.Background(), filepath.Join(root, "out"), 1<<30, nil); entries != 0 || dirs != 0 {
		t.Fatalf("walk from a link listed %d entries in %d directories, want none", entries, dirs)
	}
}

// TestPrimeQuiet: the walk goes on at once while nothing else asks,
// waits while another keeps the mount busy, and gives up when cancelled.
func TestPrimeQuiet(t *testing.T) {
	f := &FS{}
	seen := f.others.Load()
	if !f.quiet(context.Background(), &seen, primeQuiet) {
		t.Fatal("quiet refused on an idle mount")
	}
	stop := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		for {
			select {
			case <-stop:
				return
			case <-time.After(primeQuiet / 4):
				f.others.Add(1)
			}
		}
	}()
	for f.others.Load() == seen {
		time.Sleep(time.Millisecond)
	}
	done := make(chan bool, 1)
	start := time.Now()
	go func() { done <- f.quiet(context.Background(), &seen, primeQuiet) }()
	select {
	case <-done:
		t.Fatal("quiet returned while another kept the mount busy")
	case <-time.After(10 * primeQuiet):
	}
	close(stop)
	<-busy
	if !<-done {
		t.Fatal("quiet refused once the mount was idle")
	}
	if d := time.Since(start); d < 10*primeQuiet {
		t.Fatalf("quiet returned after %v", d)
	}
	f.others.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if f.quiet(ctx, &seen, primeQuiet) {
		t.Fatal("quiet went on after its walk was cancelled")
	}
}
