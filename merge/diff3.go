package merge

import "bytes"

// The three-way merge proper, as git merge-file does it with diff3-style
// markers (git-merge-file(1), git-merge(1) "diff3" conflict style; the
// rules below are checked against the command's output by the tests):
//
//   - each side is diffed against base; a hunk of one side whose base
//     lines end before the other side's next hunk begins (strictly: a hunk
//     ending right where the other begins still overlaps) is taken as is;
//   - overlapping hunks conflict, unless both sides replaced the same base
//     lines with the same lines, in which case the change is just kept;
//   - a conflict covers the base lines of both hunks, and each side's part
//     grows by the base lines the other hunk covered beyond its own;
//   - a hunk that touches or overlaps the previous one, counting in ours'
//     or in theirs' lines, joins it, and a joined hunk mixing sides is a
//     conflict: changes on adjacent lines conflict.
//
// The output is ours' lines between hunks, then each hunk's chosen side or
// its markers. diff3 style never goes further (git's "zealous" levels,
// which would shrink conflicts to their differing lines, are off for it).

// Which side a merged hunk takes.
const (
	conflicted = 0
	takeOurs   = 1
	takeTheirs = 2
)

// files are the three files of a merge, as lines and as line ids.
type files struct {
	base, ours, theirs [][]byte
	ids                [3][]int32 // base, ours, theirs
}

// mhunk is one region of the merge: base[b0:b0+bn], ours[o0:o0+on] and
// theirs[t0:t0+tn] correspond, and take says which one the result has.
type mhunk struct {
	take           int
	b0, bn, o0, on int
	t0, tn         int
}

// align merges the diffs of ours (d1) and theirs (d2) against base into
// the merge's hunks.
func (f *files) align(d1, d2 []edit) []mhunk {
	var out []mhunk
	i, j := 0, 0
	for i < len(d1) && j < len(d2) {
		e1, e2 := d1[i], d2[j]
		switch {
		case e1.a0+e1.an < e2.a0:
			out = appendHunk(out, mhunk{takeOurs, e1.a0, e1.an, e1.b0, e1.bn, e1.a0 + e2.b0 - e2.a0, e1.an})
			i++
			continue
		case e2.a0+e2.an < e1.a0:
			out = appendHunk(out, mhunk{takeTheirs, e2.a0, e2.an, e2.a0 + e1.b0 - e1.a0, e2.an, e2.b0, e2.bn})
			j++
			continue
		}
		if !f.sameChange(e1, e2) {
			out = appendHunk(out, overlap(e1, e2))
		}
		end1, end2 := e1.a0+e1.an, e2.a0+e2.an
		if end1 >= end2 {
			j++
		}
		if end2 >= end1 {
			i++
		}
	}
	shift := len(f.theirs) - len(f.base)
	for _, e1 := range d1[i:] {
		out = appendHunk(out, mhunk{takeOurs, e1.a0, e1.an, e1.b0, e1.bn, e1.a0 + shift, e1.an})
	}
	shift = len(f.ours) - len(f.base)
	for _, e2 := range d2[j:] {
		out = appendHunk(out, mhunk{takeTheirs, e2.a0, e2.an, e2.a0 + shift, e2.an, e2.b0, e2.bn})
	}
	return out
}

// sameChange reports whether both sides replaced the same base lines with
// the same lines.
func (f *files) sameChange(e1, e2 edit) bool {
	if e1.a0 != e2.a0 || e1.an != e2.an || e1.bn != e2.bn {
		return false
	}
	o, t := f.ids[1][e1.b0:e1.b0+e1.bn], f.ids[2][e2.b0:e2.b0+e2.bn]
	for k := range o {
		if o[k] != t[k] {
			return false
		}
	}
	return true
}

// overlap is the conflict of two overlapping hunks: the union of their
// base lines, each side's lines widened by the base lines only the other
// side's hunk covers.
func overlap(e1, e2 edit) mhunk {
	b0 := min(e1.a0, e2.a0)
	end := max(e1.a0+e1.an, e2.a0+e2.an)
	o0 := e1.b0 - (e1.a0 - b0)
	t0 := e2.b0 - (e2.a0 - b0)
	oEnd := e1.b0 + e1.bn + end - (e1.a0 + e1.an)
	tEnd := e2.b0 + e2.bn + end - (e2.a0 + e2.an)
	return mhunk{conflicted, b0, end - b0, o0, oEnd - o0, t0, tEnd - t0}
}

// appendHunk adds h, joining it to the last hunk if they touch or overlap
// in ours' or theirs' lines.
func appendHunk(hs []mhunk, h mhunk) []mhunk {
	if len(hs) == 0 {
		return append(hs, h)
	}
	p := &hs[len(hs)-1]
	if h.o0 > p.o0+p.on && h.t0 > p.t0+p.tn {
		return append(hs, h)
	}
	if p.take != h.take {
		p.take = conflicted
	}
	p.bn = h.b0 + h.bn - p.b0
	p.on = h.o0 + h.on - p.o0
	p.tn = h.t0 + h.tn - p.t0
	return hs
}

// write renders the merged hunks: ours' lines between them, each hunk's
// side, or markers for a conflict unless o.Favor picks a side.
func (f *files) write(hs []mhunk, o TextOptions) TextResult {
	var res TextResult
	var out bytes.Buffer
	at := 0 // next line of ours to copy
	for _, h := range hs {
		copyLines(&out, f.ours[at:h.o0], false, false)
		at = h.o0 + h.on
		take := h.take
		if take == conflicted && o.Favor != 0 {
			take = int(o.Favor)
			res.Favored++
		}
		switch take {
		case takeOurs:
			copyLines(&out, f.ours[h.o0:at], false, false)
		case takeTheirs:
			copyLines(&out, f.theirs[h.t0:h.t0+h.tn], false, false)
		default:
			res.Conflicts++
			f.markers(&out, h, o.Labels)
		}
	}
	copyLines(&out, f.ours[at:], false, false)
	res.Merged = out.Bytes()
	return res
}

// markers writes one conflict: ours' lines, base's and theirs', each part
// ending in a newline, between marker lines. The markers (and a newline
// added to a part's last line) end in CRLF when the lines around the
// conflict do (see crlf).
func (f *files) markers(out *bytes.Buffer, h mhunk, l Labels) {
	cr := f.crlf(h)
	marker(out, '<', l.Ours, cr)
	copyLines(out, f.ours[h.o0:h.o0+h.on], true, cr)
	marker(out, '|', l.Base, cr)
	copyLines(out, f.base[h.b0:h.b0+h.bn], true, cr)
	marker(out, '=', "", cr)
	copyLines(out, f.theirs[h.t0:h.t0+h.tn], true, cr)
	marker(out, '>', l.Theirs, cr)
}

// marker writes a marker line: seven c, then a space and the label if any.
func marker(out *bytes.Buffer, c byte, label string, cr bool) {
	for range 7 {
		out.WriteByte(c)
	}
	if label != "" {
		out.WriteByte(' ')
		out.WriteString(label)
	}
	eol(out, cr)
}

func eol(out *bytes.Buffer, cr bool) {
	if cr {
		out.WriteByte('\r')
	}
	out.WriteByte('\n')
}

// copyLines writes lines; with terminate, a last line lacking a newline
// gets one, so a marker that follows starts its own line.
func copyLines(out *bytes.Buffer, lines [][]byte, terminate, cr bool) {
	for _, l := range lines {
		out.Write(l)
	}
	if terminate && len(lines) > 0 {
		if l := lines[len(lines)-1]; len(l) == 0 || l[len(l)-1] != '\n' {
			eol(out, cr)
		}
	}
}

// crlf decides a conflict's line ending, as git merge-file does: CRLF when
// the line before the conflict in ours (its first line if the conflict
// starts the file), the same in theirs, and base's first line all end in
// CRLF; a file whose ending cannot be told (empty, or a single line
// without newline) does not vote; LF if none can be told.
func (f *files) crlf(h mhunk) bool {
	vote := lineEnding(f.ours, max(h.o0-1, 0))
	if vote != 0 {
		vote = lineEnding(f.theirs, max(h.t0-1, 0))
	}
	if vote != 0 {
		vote = lineEnding(f.base, 0)
	}
	return vote > 0
}

// lineEnding tells whether lines[i] ends in CRLF (1) or LF (0), or -1 if
// it cannot be told: a missing line, or a last line without a newline
// (its predecessor tells then, if there is one).
func lineEnding(lines [][]byte, i int) int {
	if len(lines) == 0 {
		return -1
	}
	l := lines[i]
	if i == len(lines)-1 && (len(l) == 0 || l[len(l)-1] != '\n') {
		if i == 0 {
			return -1
		}
		l = lines[i-1]
	}
	if len(l) > 1 && l[len(l)-2] == '\r' {
		return 1
	}
	return 0
}
