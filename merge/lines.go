package merge

import "bytes"

// splitLines cuts b into lines that keep their terminator: "\n", so a CRLF
// line keeps "\r\n". A last line without a newline is a line too. Lines are
// compared byte for byte, terminator included, as git merge-file does: "a"
// at the end of a file without a newline differs from "a\n", and "a\r\n"
// differs from "a\n".
func splitLines(b []byte) [][]byte {
	lines := make([][]byte, 0, bytes.Count(b, []byte{'\n'})+1)
	for len(b) > 0 {
		n := bytes.IndexByte(b, '\n') + 1
		if n == 0 {
			n = len(b)
		}
		lines = append(lines, b[:n:n])
		b = b[n:]
	}
	return lines
}

// interner numbers distinct lines, so the diffs compare small integers
// instead of bytes: equal lines of any of the three files get equal ids.
type interner struct {
	seen map[string]int32
}

func (in *interner) ids(lines [][]byte) []int32 {
	if in.seen == nil {
		in.seen = make(map[string]int32)
	}
	ids := make([]int32, len(lines))
	for i, l := range lines {
		id, ok := in.seen[string(l)]
		if !ok {
			id = int32(len(in.seen))
			in.seen[string(l)] = id
		}
		ids[i] = id
	}
	return ids
}

// n is the number of distinct lines seen: every id is below it.
func (in *interner) n() int { return len(in.seen) }
