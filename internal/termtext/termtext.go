// Package termtext is the one place where text that someone else chose (a
// file name from the workspace, an argv recorded inside the sandbox, a
// snapshot message) is made safe for a terminal. Every human-readable output
// of art that echoes such text goes through it; --json output does not (JSON
// escapes control bytes itself and must keep the exact bytes).
//
// The rule follows git's core.quotePath=false: text that is safe is printed
// as it is; text that is not is printed with C-style escapes. Unsafe bytes:
//   - C0 controls (below 0x20) and DEL (0x7f): a terminal acts on them (ESC
//     starts an escape sequence that can retitle or clear the screen, BEL,
//     a newline splits one entry into two lines);
//   - C1 controls (U+0080-U+009F; U+009B is a one-character CSI on some
//     terminals), and the invisible format characters that reorder or hide
//     text (bidi overrides and isolates, line and paragraph separators);
//   - bytes that are not valid UTF-8 (a terminal may read them as C1).
//
// Escapes are \a \b \t \n \v \f \r \" \\, \ooo (octal, as git) for other
// controls and escaped runes, and \xHH for an invalid UTF-8 byte, so the
// escaped form tells the two apart and can be decoded back.
//
// Which function: Quote (QuotePath) for a name or path, Quoted for a
// message shown in quotes, Text for free text inside a line (a description,
// an error's detail), Content for a line of a file (art diff --patch), Argv
// (Word) for a command line.
package termtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Quote returns s unchanged when it is safe, else s escaped and wrapped in
// double quotes (git's quoted path): "evil\033]0;pwned\a". Use it for names
// and paths. A name that contains a double quote or backslash but nothing
// unsafe is printed as it is, as git does with quotePath=false.
func Quote(s string) string {
	if Safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteByte('"')
	escape(&b, s, inQuotes)
	b.WriteByte('"')
	return b.String()
}

// QuotePath is Quote for a path given as bytes (as the journal stores them).
func QuotePath(p []byte) string { return Quote(string(p)) }

// Quoted returns s always in double quotes, with the escapes of Quote and
// any double quote or backslash escaped too, so the end of the text is
// unambiguous: for a message shown inside a line ("fix the parser").
func Quoted(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	escape(&b, s, inQuotes)
	b.WriteByte('"')
	return b.String()
}

// Text returns s with its unsafe bytes escaped and no quotes added, for free
// text inside a line: a message, a description, an error's detail. A
// backslash is doubled only when something else in s was escaped, so
// ordinary text reads as typed.
func Text(s string) string {
	if Safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	escape(&b, s, inText)
	return b.String()
}

// Content returns a line of a file's content with its unsafe bytes
// escaped, for a person reading it (art diff --patch): tabs and
// backslashes stay as they are, so ordinary source reads as written; a
// line's own newline is the caller's. Not reversible: for reading only.
func Content(s string) string {
	if safeContent(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	escape(&b, s, inContent)
	return b.String()
}

func safeContent(s string) bool {
	for {
		i := strings.IndexByte(s, '\t')
		if i < 0 {
			return Safe(s)
		}
		if !Safe(s[:i]) {
			return false
		}
		s = s[i+1:]
	}
}

// Argv renders a command line so that a shell would run it: words that need
// no quoting bare, others in single quotes, and words with unsafe bytes in
// bash's $'...' form with the escapes above. The result is one line with no
// unsafe byte.
func Argv(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Word(a))
	}
	return b.String()
}

// Word is Argv for one word.
func Word(a string) string {
	switch {
	case a == "":
		return "''"
	case shellBare(a):
		return a
	case Safe(a):
		return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(a); {
		if a[i] == '\'' {
			b.WriteString(`\'`)
			i++
			continue
		}
		n := escapeOne(&b, a, i, inQuotes)
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}

// Safe reports whether s can reach a terminal as it is.
func Safe(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || unsafeRune(r) {
			return false
		}
		i += n
	}
	return true
}

func shellBare(a string) bool {
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_./=:,+@%^-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// unsafeRune: C1 controls and the format characters that change how the
// surrounding text is shown (Trojan Source, CVE-2021-42574).
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return false
}

// mode says what else than unsafe bytes an escape must escape.
type mode int

const (
	inText    mode = iota // free text: a backslash is doubled, so escapes read back
	inQuotes              // inside double quotes or $'...': a backslash and a double quote
	inContent             // a file's line: only unsafe bytes, and tabs stay
)

func escape(b *strings.Builder, s string, m mode) {
	for i := 0; i < len(s); {
		i += escapeOne(b, s, i, m)
	}
}

// escapeOne writes the character at s[i] (escaped when needed) and returns
// how many bytes it took.
func escapeOne(b *strings.Builder, s string, i int, m mode) int {
	c := s[i]
	if c < utf8.RuneSelf {
		switch {
		case c == '\\' && m != inContent:
			b.WriteString(`\\`)
		case c == '"' && m == inQuotes:
			b.WriteString(`\"`)
		case c >= 0x20 && c != 0x7f, c == '\t' && m == inContent:
			b.WriteByte(c)
		default:
			writeControl(b, c)
		}
		return 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n <= 1 {
		b.WriteString(`\x`)
		b.WriteString(hex2(c))
		return 1
	}
	if unsafeRune(r) {
		for k := 0; k < n; k++ {
			writeOctal(b, s[i+k])
		}
		return n
	}
	b.WriteString(s[i : i+n])
	return n
}

func writeControl(b *strings.Builder, c byte) {
	switch c {
	case '\a':
		b.WriteString(`\a`)
	case '\b':
		b.WriteString(`\b`)
	case '\t':
		b.WriteString(`\t`)
	case '\n':
		b.WriteString(`\n`)
	case '\v':
		b.WriteString(`\v`)
	case '\f':
		b.WriteString(`\f`)
	case '\r':
		b.WriteString(`\r`)
	default:
		writeOctal(b, c)
	}
}

func writeOctal(b *strings.Builder, c byte) {
	o := strconv.FormatInt(int64(c), 8)
	b.WriteByte('\\')
	b.WriteString(strings.Repeat("0", 3-len(o)))
	b.WriteString(o)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}
