package main

// The front's side of the warm daemon's JSON protocol, written out: the
// request is one object of strings, string lists and integers, and of
// the answer the front reads three fields. encoding/json builds its
// encoders by reflection at a program's first use and its packages'
// initialisers run at every start; in a process that lives for one warm
// run both were a measurable part of its milliseconds (docs/benchmarks.md,
// "A lean front"). TestRequestMatchesEncodingJSON and FuzzReply hold
// both to encoding/json, which the daemon speaks.

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// appendRequest appends r as encoding/json would marshal it (omitempty as
// tagged), without its HTML escapes, which no JSON reader needs.
func appendRequest(b []byte, r request) []byte {
	b = append(b, `{"op":`...)
	b = appendString(b, r.Op)
	if len(r.Args) > 0 {
		b = appendStrings(append(b, `,"args":`...), r.Args)
	}
	if len(r.Env) > 0 {
		b = appendStrings(append(b, `,"env":`...), r.Env)
	}
	if r.Cwd != "" {
		b = appendString(append(b, `,"cwd":`...), r.Cwd)
	}
	if r.Umask != 0 {
		b = strconv.AppendInt(append(b, `,"umask":`...), int64(r.Umask), 10)
	}
	if r.Proc != "" {
		b = appendString(append(b, `,"proc":`...), r.Proc)
	}
	if r.SigIgn != 0 {
		b = strconv.AppendUint(append(b, `,"sig_ign":`...), r.SigIgn, 10)
	}
	if r.Signal != 0 {
		b = strconv.AppendInt(append(b, `,"signal":`...), int64(r.Signal), 10)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string: '"' and '\' escaped, control
// characters as \u00XX, and each byte that is not part of valid UTF-8 as
// U+FFFD, as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// errReply is an answer that is not a JSON object encoding/json could
// decode into reply.
var errReply = errors.New("malformed answer")

// maxDepth bounds the nesting of the values skipped in an answer.
const maxDepth = 64

// parseReply decodes the daemon's answer, one JSON value with white space
// around it, as encoding/json would decode it into reply (keys matched
// regardless of case, the last of a repeated key kept, null leaving a
// field as it was); anything encoding/json would refuse is errReply.
func parseReply(b []byte) (reply, error) {
	var r reply
	p := parser{b: b}
	p.space()
	switch {
	case p.null(): // nothing decoded
	case !p.take('{'):
		return r, errReply
	default:
		p.space()
		if p.take('}') {
			break
		}
		for {
			p.space()
			key, ok := p.str()
			if !ok {
				return r, errReply
			}
			p.space()
			if !p.take(':') {
				return r, errReply
			}
			p.space()
			switch {
			case p.null():
			case strings.EqualFold(key, "fallback"):
				if r.Fallback, ok = p.str(); !ok {
					return r, errReply
				}
			case strings.EqualFold(key, "error"):
				if r.Error, ok = p.str(); !ok {
					return r, errReply
				}
			case strings.EqualFold(key, "code"):
				n, ok := p.number()
				if !ok {
					return r, errReply
				}
				code, err := strconv.ParseInt(n, 10, strconv.IntSize)
				if err != nil {
					return r, errReply
				}
				r.Code = int(code)
			default:
				if !p.value(0) {
					return r, errReply
				}
			}
			p.space()
			if p.take('}') {
				break
			}
			if !p.take(',') {
				return r, errReply
			}
		}
	}
	p.space()
	if p.i != len(p.b) {
		return r, errReply
	}
	return r, nil
}

// parser reads JSON from b at i.
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *parser) take(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) word(w string) bool {
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

func (p *parser) null() bool { return p.word("null") }

// value skips one value of any kind.
func (p *parser) value(depth int) bool {
	if depth > maxDepth || p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		p.i++
		p.space()
		if p.take(end) {
			return true
		}
		for {
			p.space()
			if c == '{' {
				if _, ok := p.str(); !ok {
					return false
				}
				p.space()
				if !p.take(':') {
					return false
				}
				p.space()
			}
			if !p.value(depth + 1) {
				return false
			}
			p.space()
			if p.take(end) {
				return true
			}
			if !p.take(',') {
				return false
			}
		}
	case c == 't':
		return p.word("true")
	case c == 'f':
		return p.word("false")
	case c == 'n':
		return p.null()
	default:
		_, ok := p.number()
		return ok
	}
}

// number reads a JSON number and returns its text.
func (p *parser) number() (string, bool) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	p.take('-')
	switch {
	case p.take('0'):
	case digits() == 0:
		return "", false
	}
	if p.take('.') && digits() == 0 {
		return "", false
	}
	if p.take('e') || p.take('E') {
		if !p.take('+') {
			p.take('-')
		}
		if digits() == 0 {
			return "", false
		}
	}
	return string(p.b[start:p.i]), true
}

// str reads a JSON string and returns its value (bytes that are not
// valid UTF-8 kept as they are: only whether a field is empty, and keys,
// are read).
func (p *parser) str() (string, bool) {
	if !p.take('"') {
		return "", false
	}
	var out []byte
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		esc := p.b[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half is U+FFFD.
				save := p.i
				if p.word(`\u`) {
					if r2, ok := p.hex4(); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							out = utf8.AppendRune(out, d)
							continue
						}
					}
				}
				p.i = save
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *parser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}
