package execapi

import (
	"sync"
	"unicode/utf8"
)

// Capture keeps the first Limit bytes written to it and counts the rest.
// Write never fails and never blocks on anything but its own mutex, so a
// producer writing gigabytes is drained at memory speed: the command is
// never slowed or stopped by art's limit, its output is just cut.
// It is safe for concurrent use.
type Capture struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	total int64
}

// NewCapture returns a Capture keeping at most limit bytes.
func NewCapture(limit int) *Capture { return &Capture{limit: limit} }

// Write keeps what fits under the limit and reports len(p), nil.
func (c *Capture) Write(p []byte) (int, error) {
	n := len(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(n)
	if room := c.limit - len(c.buf); room > 0 {
		if len(p) > room {
			p = p[:room]
		}
		c.buf = append(c.buf, p...)
	}
	return n, nil
}

// Total is the number of bytes written, kept or not.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Truncated reports whether bytes were dropped.
func (c *Capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(len(c.buf))
}

// Bytes returns the kept bytes (not a copy).
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf
}

// String returns the kept output for the response. A cut through a UTF-8
// sequence drops the partial rune, so truncation alone never adds a U+FFFD;
// other invalid UTF-8 becomes U+FFFD when the response is encoded.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	if c.total > int64(len(b)) {
		b = trimPartialRune(b)
	}
	return string(b)
}

func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if start := len(b) - i; utf8.RuneStart(b[start]) {
			if !utf8.FullRune(b[start:]) {
				return b[:start]
			}
			return b
		}
	}
	return b
}
