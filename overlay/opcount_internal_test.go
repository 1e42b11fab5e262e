package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
