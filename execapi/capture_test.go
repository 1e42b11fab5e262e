package execapi

import (
	"bytes"
	"runtime"
	"testing"
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

// TestCapture10MiBKeepsOneBuffer: capturing 10 MiB through a 1 MiB
// capture allocates about the buffer it keeps, not a copy per write (what
// made a chatty process's capture slow: the cost is counted in bytes
// allocated, which a loaded machine cannot blur as it blurs a timing).
func TestCapture10MiBKeepsOneBuffer(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := NewCapture(1 << 20)
	for i := 0; i < 160; i++ { // 10 MiB
		c.Write(chunk)
	}
	runtime.ReadMemStats(&after)
	if len(c.Bytes()) != 1<<20 || c.Total() != 10<<20 || !c.Truncated() {
		t.Errorf("kept %d of %d", len(c.Bytes()), c.Total())
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("capturing 10 MiB allocated %d bytes; want well under the 10 MiB written (the 1 MiB kept, its growth and copies)", alloc)
	}
}
