package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/artrt/art/internal/termtext"
)

// Line diff for art diff --patch: Myers' O(ND) algorithm over lines, printed
// as unified hunks with three lines of context.

const (
	maxPatchBytes = 4 << 20 // larger files are reported, not diffed
	maxEditCost   = 20000   // beyond this many edits, show the files as replaced
)

func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}

func splitLines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

type edit struct {
	op   byte // ' ', '-', '+'
	line []byte
}

// myers returns the edit script turning a into b.
func myers(a, b [][]byte) []edit {
	n, m := len(a), len(b)
	max := n + m
	if max > 2*maxEditCost {
		max = 2 * maxEditCost
	}
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := -1
	for d := 0; d <= max && found < 0; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && bytes.Equal(a[x], b[y]) {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 { // too different: delete everything, add everything
		var out []edit
		for _, l := range a {
			out = append(out, edit{'-', l})
		}
		for _, l := range b {
			out = append(out, edit{'+', l})
		}
		return out
	}
	trace = append(trace, v)
	// Walk back through the recorded frontiers.
	var rev []edit
	x, y := n, m
	for d := found; d > 0; d-- {
		vd := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && vd[off+k-1] < vd[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := vd[off+pk]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, edit{' ', a[x]})
		}
		if x == px {
			y--
			rev = append(rev, edit{'+', b[y]})
		} else {
			x--
			rev = append(rev, edit{'-', a[x]})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{' ', a[x]})
	}
	out := make([]edit, len(rev))
	for i := range rev {
		out[i] = rev[len(rev)-1-i]
	}
	return out
}

// writeUnified prints a unified diff of a and b under the given names.
func writeUnified(w io.Writer, nameA, nameB string, a, b []byte) {
	if bytes.Equal(a, b) {
		return
	}
	if isBinary(a) || isBinary(b) || len(a) > maxPatchBytes || len(b) > maxPatchBytes {
		fmt.Fprintf(w, "Binary or large files %s and %s differ\n", nameA, nameB)
		return
	}
	edits := myers(splitLines(a), splitLines(b))
	fmt.Fprintf(w, "--- %s\n+++ %s\n", nameA, nameB)
	const ctx = 3
	for i := 0; i < len(edits); {
		// Find the next change.
		for i < len(edits) && edits[i].op == ' ' {
			i++
		}
		if i == len(edits) {
			break
		}
		start := i - ctx
		if start < 0 {
			start = 0
		}
		// Extend the hunk while changes are within 2*ctx of each other.
		end := i
		for j := i; j < len(edits); j++ {
			if edits[j].op != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		stop := end + ctx + 1
		if stop > len(edits) {
			stop = len(edits)
		}
		aLine, bLine := 1, 1
		for _, e := range edits[:start] {
			if e.op != '+' {
				aLine++
			}
			if e.op != '-' {
				bLine++
			}
		}
		aCount, bCount := 0, 0
		for _, e := range edits[start:stop] {
			if e.op != '+' {
				aCount++
			}
			if e.op != '-' {
				bCount++
			}
		}
		if aCount == 0 {
			aLine--
		}
		if bCount == 0 {
			bLine--
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", aLine, aCount, bLine, bCount)
		for _, e := range edits[start:stop] {
			// The content is the agent's: a control byte in a line
			// (an escape sequence, a carriage return) is shown, not
			// acted on by the terminal.
			line, nl := bytes.CutSuffix(e.line, []byte("\n"))
			w.Write([]byte{e.op})
			io.WriteString(w, termtext.Content(string(line)))
			if nl {
				io.WriteString(w, "\n")
			} else {
				fmt.Fprint(w, "\n\\ No newline at end of file\n")
			}
		}
		i = stop
	}
}
