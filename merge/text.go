package merge

import "bytes"

// Labels name the three sides in conflict markers, as git merge-file's -L
// options do: Ours after "<<<<<<<", Base after "|||||||", Theirs after
// ">>>>>>>". An empty label leaves the marker bare.
type Labels struct {
	Ours, Base, Theirs string
}

// markerSize is git's DEFAULT_CONFLICT_MARKER_SIZE.
const markerSize = 7

// mhunk is one region of the merge (git's xdmerge_t): mode 1 takes ours,
// 2 theirs, 0 is a conflict; i0/i1/i2 index base, ours and theirs.
type mhunk struct {
	mode               int
	i0, chg0, i1, chg1 int
	i2, chg2           int
}

// TextOptions are the choices of a text merge: the marker labels, and a
// side that wins each conflicting hunk instead of markers (git merge-file
// --ours / --theirs).
type TextOptions struct {
	Labels Labels
	Favor  Side // Ours or Theirs; 0 writes markers
}

// TextResult is a text merge's outcome. Conflicts counts the hunks written
// with markers (git merge-file's exit status, which git caps at 127);
// Favored counts the conflicting hunks that Favor decided instead.
type TextResult struct {
	Merged    []byte
	Conflicts int
	Favored   int
}

// Text merges ours and theirs against base line by line, with diff3-style
// conflict markers. The output and the count are git merge-file's (see the
// package doc for the inputs that holds for): `git merge-file --diff3 -p
// -L labels.Ours -L labels.Base -L labels.Theirs ours base theirs`. The
// inputs are not modified; the result never aliases them.
func Text(base, ours, theirs []byte, o TextOptions) TextResult {
	e1 := xdiff(base, ours)
	e2 := xdiff(base, theirs)
	s1 := e1.script()
	s2 := e2.script()
	if len(s1) == 0 {
		return TextResult{Merged: bytes.Clone(theirs)}
	}
	if len(s2) == 0 {
		return TextResult{Merged: bytes.Clone(ours)}
	}
	hunks := mergeScripts(e1, s1, e2, s2)
	var out bytes.Buffer
	var res TextResult
	i := 0
	for _, m := range hunks {
		if m.mode == 0 && o.Favor != 0 {
			m.mode = int(o.Favor)
			res.Favored++
		}
		switch m.mode {
		case 0:
			res.Conflicts++
			writeConflict(&out, e1, e2, m, i, o.Labels)
		case 1, 2:
			writeRecs(&out, e1.f2.recs[i:m.i1], false, false)
			if m.mode&1 != 0 {
				writeRecs(&out, e1.f2.recs[m.i1:m.i1+m.chg1], false, false)
			}
			if m.mode&2 != 0 {
				writeRecs(&out, e2.f2.recs[m.i2:m.i2+m.chg2], false, false)
			}
		}
		i = m.i1 + m.chg1
	}
	writeRecs(&out, e1.f2.recs[i:], false, false)
	res.Merged = out.Bytes()
	return res
}

// mergeScripts is the hunk-pairing loop of xdl_do_merge at git's EAGER
// level (the level diff3 style caps to): changes of one side that do not
// touch a change of the other are taken; overlapping or adjacent changes
// are a conflict unless both sides made the very same change.
func mergeScripts(e1 *xenv, s1 []change, e2 *xenv, s2 []change) []mhunk {
	var out []mhunk
	add := func(mode, i0, chg0, i1, chg1, i2, chg2 int) {
		if n := len(out); n > 0 {
			m := &out[n-1]
			if i1 <= m.i1+m.chg1 || i2 <= m.i2+m.chg2 {
				if mode != m.mode {
					m.mode = 0
				}
				m.chg0 = i0 + chg0 - m.i0
				m.chg1 = i1 + chg1 - m.i1
				m.chg2 = i2 + chg2 - m.i2
				return
			}
		}
		out = append(out, mhunk{mode: mode, i0: i0, chg0: chg0, i1: i1, chg1: chg1, i2: i2, chg2: chg2})
	}
	for len(s1) > 0 && len(s2) > 0 {
		x1, x2 := s1[0], s2[0]
		if x1.i1+x1.chg1 < x2.i1 {
			add(1, x1.i1, x1.chg1, x1.i2, x1.chg2, x2.i2-x2.i1+x1.i1, x1.chg1)
			s1 = s1[1:]
			continue
		}
		if x2.i1+x2.chg1 < x1.i1 {
			add(2, x2.i1, x2.chg1, x1.i2-x1.i1+x2.i1, x2.chg1, x2.i2, x2.chg2)
			s2 = s2[1:]
			continue
		}
		if x1.i1 != x2.i1 || x1.chg1 != x2.chg1 || x1.chg2 != x2.chg2 ||
			!sameLines(e1.f2.recs[x1.i2:x1.i2+x1.chg2], e2.f2.recs[x2.i2:x2.i2+x2.chg2]) {
			off := x1.i1 - x2.i1
			ffo := off + x1.chg1 - x2.chg1
			i0, i1, i2 := x1.i1, x1.i2, x2.i2
			if off > 0 {
				i0 -= off
				i1 -= off
			} else {
				i2 += off
			}
			chg0 := x1.i1 + x1.chg1 - i0
			chg1 := x1.i2 + x1.chg2 - i1
			chg2 := x2.i2 + x2.chg2 - i2
			if ffo < 0 {
				chg0 -= ffo
				chg1 -= ffo
			} else {
				chg2 += ffo
			}
			add(0, i0, chg0, i1, chg1, i2, chg2)
		}
		end1 := x1.i1 + x1.chg1
		end2 := x2.i1 + x2.chg1
		if end1 >= end2 {
			s2 = s2[1:]
		}
		if end2 >= end1 {
			s1 = s1[1:]
		}
	}
	for _, x1 := range s1 {
		add(1, x1.i1, x1.chg1, x1.i2, x1.chg2, x1.i1+e2.f2.nrec()-e2.f1.nrec(), x1.chg1)
	}
	for _, x2 := range s2 {
		add(2, x2.i1, x2.chg1, x2.i1+e1.f2.nrec()-e1.f1.nrec(), x2.chg1, x2.i2, x2.chg2)
	}
	return out
}

func sameLines(a, b [][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// writeRecs appends lines; with addNL a last line lacking '\n' gets one
// ("\r\n" when crlf), as git does inside conflict sections.
func writeRecs(out *bytes.Buffer, recs [][]byte, crlf, addNL bool) {
	for _, r := range recs {
		out.Write(r)
	}
	if addNL && len(recs) > 0 {
		last := recs[len(recs)-1]
		if len(last) == 0 || last[len(last)-1] != '\n' {
			if crlf {
				out.WriteByte('\r')
			}
			out.WriteByte('\n')
		}
	}
}

func writeMarker(out *bytes.Buffer, c byte, label string, crlf bool) {
	for range markerSize {
		out.WriteByte(c)
	}
	if label != "" {
		out.WriteByte(' ')
		out.WriteString(label)
	}
	if crlf {
		out.WriteByte('\r')
	}
	out.WriteByte('\n')
}

// writeConflict is fill_conflict_hunk in diff3 style.
func writeConflict(out *bytes.Buffer, e1, e2 *xenv, m mhunk, i int, l Labels) {
	crlf := crNeeded(e1, e2, m)
	writeRecs(out, e1.f2.recs[i:m.i1], false, false)
	writeMarker(out, '<', l.Ours, crlf)
	writeRecs(out, e1.f2.recs[m.i1:m.i1+m.chg1], crlf, true)
	writeMarker(out, '|', l.Base, crlf)
	writeRecs(out, e1.f1.recs[m.i0:m.i0+m.chg0], crlf, true)
	writeMarker(out, '=', "", crlf)
	writeRecs(out, e2.f2.recs[m.i2:m.i2+m.chg2], crlf, true)
	writeMarker(out, '>', l.Theirs, crlf)
}

// eolCRLF is is_eol_crlf: 1 when line i of recs ends in "\r\n", 0 when in
// "\n" alone, -1 when it cannot tell.
func eolCRLF(recs [][]byte, i int) int {
	n := len(recs)
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	if i < n-1 {
		r := recs[i]
		return b2i(len(r) > 1 && r[len(r)-2] == '\r')
	}
	if n == 0 {
		return -1
	}
	if r := recs[i]; len(r) > 0 && r[len(r)-1] == '\n' {
		return b2i(len(r) > 1 && r[len(r)-2] == '\r')
	}
	if i == 0 {
		return -1
	}
	r := recs[i-1]
	return b2i(len(r) > 1 && r[len(r)-2] == '\r')
}

// crNeeded is is_cr_needed: markers end in "\r\n" when the lines around
// the hunk do.
func crNeeded(e1, e2 *xenv, m mhunk) bool {
	prev := func(i int) int {
		if i > 0 {
			return i - 1
		}
		return 0
	}
	n := eolCRLF(e1.f2.recs, prev(m.i1))
	if n != 0 {
		n = eolCRLF(e2.f2.recs, prev(m.i2))
	}
	if n != 0 {
		n = eolCRLF(e1.f1.recs, 0)
	}
	return n > 0
}
