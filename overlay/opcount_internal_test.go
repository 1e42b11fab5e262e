package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpCounter: go-fuse's request lines are counted by opcode, replies
// and other lines are not, and write appends the counts with the first
// request of each.
func TestOpCounter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "counts")
	t.Setenv("ART_FUSE_COUNTS", p)
	c := newOpCounter()
	if c == nil {
		t.Fatal("ART_FUSE_COUNTS set, no counter")
	}
	for _, l := range []string{
		`rx 6: LOOKUP n1  "a"  p42`,
		`rx 7: LOOKUP n1  "b"  p42`,
		`tx 7:     OK, {n2 g1 tE=1h0m0s tA=1h0m0s}`,
		`rx 8: GETATTR n2 {Fh 0 } p42`,
		`received ENODEV (unmount request), thread exiting`,
	} {
		c.line(l)
	}
	c.write()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"GETATTR 1\t(first: rx 8: GETATTR", "LOOKUP 2\t(first: rx 6: LOOKUP n1  \"a\"", "--\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("counts file %q lacks %q", got, want)
		}
	}
	if strings.Count(got, "\n") != 3 {
		t.Errorf("counts file %q: want 2 opcodes and the separator", got)
	}
}

// TestOpCounterSignal: SIGUSR1 appends the counts so far and starts a
// new tally, so the next write has only what came after.
func TestOpCounterSignal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "counts")
	t.Setenv("ART_FUSE_COUNTS", p)
	c := newOpCounter()
	stop := c.onSignal()
	c.line(`rx 6: LOOKUP n1  "a"  p42`)
	c.line(`rx 7: LOOKUP n1  "b"  p42`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(p); err == nil && strings.HasSuffix(string(b), "--\n") {
			got = b
			break
		}
	}
	if !strings.HasPrefix(string(got), "LOOKUP 2\t") {
		t.Fatalf("counts after SIGUSR1: %q", got)
	}
	c.line(`rx 8: GETATTR n2 {Fh 0 } p42`)
	stop()
	c.write()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	second := strings.TrimPrefix(string(b), string(got))
	if !strings.HasPrefix(second, "GETATTR 1\t") || strings.Contains(second, "LOOKUP") {
		t.Errorf("counts after the dump: %q, want the GETATTR alone", second)
	}
}
