package merge

import (
	"bytes"
	"unicode/utf8"
)

// MaxTextSize is the largest file a merge treats as text: bigger files
// that both sides changed conflict instead of being merged line by line.
const MaxTextSize = 8 << 20

// IsText reports whether b is mergeable text: at most MaxTextSize bytes,
// valid UTF-8, no NUL.
func IsText(b []byte) bool {
	return len(b) <= MaxTextSize && bytes.IndexByte(b, 0) < 0 && utf8.Valid(b)
}
