package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpCounts feeds go-fuse's debug lines (requests, replies, other
// messages, a write holding several lines) and checks the counts appended
// to the file, in ART_FUSE_COUNTS's format.
func TestOpCounts(t *testing.T) {
	c := &opCounts{n: map[string]int64{}}
	for _, l := range []string{
		"rx 18: LOOKUP n1  \".git\"  p6828\n",
		"tx 18:     OK, {n2 g1 tE=3600s}\n",
		"rx 20: LOOKUP n2  \"HEAD\"  p6828\nrx 22: OPEN n3 {LARGEFILE} p6828\n",
		"ioctl: BACKING_OPEN {fd 9, flags 0x0}: id 1 (errno 0)\n",
		"received ENODEV (unmount request), thread exiting\n",
	} {
		if n, err := c.Write([]byte(l)); n != len(l) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	path := filepath.Join(t.TempDir(), "counts")
	if err := c.appendTo(path); err != nil {
		t.Fatal(err)
	}
	// A second append (SIGUSR1's, then the unmount's) has only what came
	// since the first.
	if _, err := c.Write([]byte("rx 24: GETATTR n3 {Fh 0 } p6828\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.appendTo(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "LOOKUP 2\nOPEN 1\n--\nGETATTR 1\n--\n"; string(got) != want {
		t.Errorf("counts file:\n%s\nwant:\n%s", got, want)
	}
}
