package execapi

import (
	"bytes"
	"testing"
	"time"
)

func TestCaptureKeepsFirstBytes(t *testing.T) {
	c := NewCapture(10)
	for _, s := range []string{"hello ", "world", "!!!"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: a capture never refuses", s, n, err)
		}
	}
	if got, want := c.String(), "hello worl"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	if !c.Truncated() || c.Total() != 14 {
		t.Errorf("truncated %v total %d", c.Truncated(), c.Total())
	}
	full := NewCapture(5)
	full.Write([]byte("12345"))
	if full.Truncated() {
		t.Error("exactly the limit is not truncated")
	}
}

func TestCaptureCutsWholeRunes(t *testing.T) {
	c := NewCapture(4)
	c.Write([]byte("ab€")) // € is 3 bytes: the cut falls inside it
	if got := c.String(); got != "ab" {
		t.Errorf("got %q, want %q", got, "ab")
	}
	c = NewCapture(5)
	c.Write([]byte("ab€x"))
	if got := c.String(); got != "ab€" {
		t.Errorf("got %q, want %q", got, "ab€")
	}
}

func TestCapture10MiBIsFast(t *testing.T) {
	c := NewCapture(1 << 20)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	start := time.Now()
	for i := 0; i < 160; i++ { // 10 MiB
		c.Write(chunk)
	}
	took := time.Since(start)
	if len(c.Bytes()) != 1<<20 || c.Total() != 10<<20 || !c.Truncated() {
		t.Errorf("kept %d of %d", len(c.Bytes()), c.Total())
	}
	if took > 100*time.Millisecond {
		t.Errorf("10 MiB took %v", took)
	}
}
