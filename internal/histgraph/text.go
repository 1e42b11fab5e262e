package histgraph

import (
	"io"
	"strings"
)

// WriteText writes the graph with lines[i] as the text of row i (one line
// each, already safe for a terminal: the caller quotes what others chose).
func WriteText(w io.Writer, l Layout, lines []string) error {
	var b strings.Builder
	for i, r := range l.Rows {
		for _, s := range r.Before {
			b.WriteString(s)
			b.WriteByte('\n')
		}
		b.WriteString(r.Prefix)
		if i < len(lines) {
			b.WriteString(lines[i])
		}
		b.WriteByte('\n')
		for _, s := range r.After {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
