package s3api

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// S3 answers in small, flat XML documents (an error, a listing page). They
// are read here with a minimal scanner rather than encoding/xml, whose
// package initialisation (its entity tables) and reflection every art
// process would pay for at start-up, for two documents only push, pull and
// gc read. The scanner handles what a conforming document may contain in
// these answers (declaration, comments, attributes, namespaces, entity and
// character references, CDATA, self-closing elements) and rejects what it
// does not understand: a remote is hostile, and a document it cannot read
// fails the operation rather than being half-read.

// maxXMLDepth bounds element nesting: S3's answers are three deep.
const maxXMLDepth = 16

var errXML = errors.New("malformed XML")

// xmlWalk calls start at each element's start and end at its end with the
// element's character data (entities decoded; the text of child elements
// is not included). path holds the local names (namespace prefix dropped)
// from the root to the element; it is reused between calls.
func xmlWalk(doc []byte, start func(path []string) error, end func(path []string, text string) error) error {
	var path []string
	// text holds the character data of the open elements, each from its
	// mark: a child's is cut off when it ends, leaving its parent's.
	var text []byte
	var marks []int
	rest := doc
	for len(rest) > 0 {
		lt := bytes.IndexByte(rest, '<')
		if lt < 0 {
			lt = len(rest)
		}
		if lt > 0 {
			chunk := rest[:lt]
			if len(path) == 0 {
				if len(bytes.TrimSpace(chunk)) != 0 {
					return fmt.Errorf("%w: text outside the root element", errXML)
				}
			} else {
				s, err := unescapeXML(chunk)
				if err != nil {
					return err
				}
				text = append(text, s...)
			}
			rest = rest[lt:]
			continue
		}
		switch {
		case bytes.HasPrefix(rest, []byte("<?")):
			i := bytes.Index(rest, []byte("?>"))
			if i < 0 {
				return fmt.Errorf("%w: unterminated declaration", errXML)
			}
			rest = rest[i+2:]
		case bytes.HasPrefix(rest, []byte("<!--")):
			i := bytes.Index(rest[4:], []byte("-->"))
			if i < 0 {
				return fmt.Errorf("%w: unterminated comment", errXML)
			}
			rest = rest[4+i+3:]
		case bytes.HasPrefix(rest, []byte("<![CDATA[")):
			i := bytes.Index(rest, []byte("]]>"))
			if i < 0 || len(path) == 0 {
				return fmt.Errorf("%w: bad CDATA section", errXML)
			}
			text = append(text, rest[9:i]...)
			rest = rest[i+3:]
		case bytes.HasPrefix(rest, []byte("<!")):
			return fmt.Errorf("%w: document type declarations are not accepted", errXML)
		case bytes.HasPrefix(rest, []byte("</")):
			gt := bytes.IndexByte(rest, '>')
			if gt < 0 {
				return fmt.Errorf("%w: unterminated end tag", errXML)
			}
			name := localName(string(bytes.TrimSpace(rest[2:gt])))
			if len(path) == 0 || path[len(path)-1] != name {
				return fmt.Errorf("%w: unexpected end tag", errXML)
			}
			m := marks[len(marks)-1]
			if err := end(path, string(text[m:])); err != nil {
				return err
			}
			path, marks, text = path[:len(path)-1], marks[:len(marks)-1], text[:m]
			rest = rest[gt+1:]
			if len(path) == 0 {
				return xmlTail(rest)
			}
		default:
			gt := tagEnd(rest)
			if gt < 0 {
				return fmt.Errorf("%w: unterminated start tag", errXML)
			}
			tag := rest[1:gt]
			selfClosing := bytes.HasSuffix(tag, []byte("/"))
			if selfClosing {
				tag = tag[:len(tag)-1]
			}
			name := tag
			if i := bytes.IndexAny(tag, " \t\r\n"); i >= 0 {
				name = tag[:i]
			}
			if len(name) == 0 {
				return fmt.Errorf("%w: empty element name", errXML)
			}
			if len(path) == maxXMLDepth {
				return fmt.Errorf("%w: elements nested over %d deep", errXML, maxXMLDepth)
			}
			path = append(path, localName(string(name)))
			marks = append(marks, len(text))
			if err := start(path); err != nil {
				return err
			}
			rest = rest[gt+1:]
			if selfClosing {
				if err := end(path, ""); err != nil {
					return err
				}
				path, marks = path[:len(path)-1], marks[:len(marks)-1]
				if len(path) == 0 {
					return xmlTail(rest)
				}
			}
		}
	}
	if len(path) > 0 {
		return fmt.Errorf("%w: document ends inside an element", errXML)
	}
	return fmt.Errorf("%w: no root element", errXML)
}

// xmlTail checks what follows the root element: only space and comments.
func xmlTail(rest []byte) error {
	for {
		rest = bytes.TrimSpace(rest)
		if len(rest) == 0 {
			return nil
		}
		if !bytes.HasPrefix(rest, []byte("<!--")) {
			return fmt.Errorf("%w: content after the root element", errXML)
		}
		i := bytes.Index(rest[4:], []byte("-->"))
		if i < 0 {
			return fmt.Errorf("%w: unterminated comment", errXML)
		}
		rest = rest[4+i+3:]
	}
}

// tagEnd finds the '>' closing the start tag at b[0], skipping quoted
// attribute values (which may hold '>').
func tagEnd(b []byte) int {
	var quote byte
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return i
		case c == '<':
			return -1
		}
	}
	return -1
}

func localName(n string) string {
	if i := strings.LastIndexByte(n, ':'); i >= 0 {
		return n[i+1:]
	}
	return n
}

// unescapeXML decodes the five predefined entities and character
// references in character data.
func unescapeXML(b []byte) (string, error) {
	if bytes.IndexByte(b, '&') < 0 {
		return string(b), nil
	}
	var out strings.Builder
	out.Grow(len(b))
	for len(b) > 0 {
		amp := bytes.IndexByte(b, '&')
		if amp < 0 {
			out.Write(b)
			break
		}
		out.Write(b[:amp])
		b = b[amp:]
		semi := bytes.IndexByte(b, ';')
		if semi < 0 || semi > 12 {
			return "", fmt.Errorf("%w: bad entity reference", errXML)
		}
		ref := string(b[1:semi])
		b = b[semi+1:]
		switch ref {
		case "amp":
			out.WriteByte('&')
		case "lt":
			out.WriteByte('<')
		case "gt":
			out.WriteByte('>')
		case "quot":
			out.WriteByte('"')
		case "apos":
			out.WriteByte('\'')
		default:
			num, ok := strings.CutPrefix(ref, "#")
			if !ok {
				return "", fmt.Errorf("%w: unknown entity", errXML)
			}
			base := 10
			if h, ok := strings.CutPrefix(num, "x"); ok {
				num, base = h, 16
			}
			n, err := strconv.ParseUint(num, base, 32)
			if err != nil || n == 0 || n > utf8.MaxRune || !utf8.ValidRune(rune(n)) {
				return "", fmt.Errorf("%w: bad character reference", errXML)
			}
			out.WriteRune(rune(n))
		}
	}
	return out.String(), nil
}
