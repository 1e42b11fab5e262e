package merge

// This file is a transcription of the parts of git's xdiff (xdiff/xprepare.c,
// xdiff/xdiffi.c, git 2.39) that a default-flags line diff runs: the same
// line classes, the same trimming of common ends and discarding of lines
// that cannot match, the same Myers divide-and-conquer with its cost
// heuristics and tie-breaking, and the same change compaction (sliding of
// change groups). A three-way merge built on anything else disagrees with
// `git merge-file` on which lines a hunk covers, so the constants and the
// loop shapes below follow git's, including its odd corners.

const (
	xdlMaxCostMin  = 256
	xdlHeurMinCost = 256
	xdlSnakeCnt    = 20
	xdlKHeur       = 4
	xdlMaxEqLimit  = 1024
	xdlSimscanWin  = 100
	xdlKpdisRun    = 4
	xdlLineMax     = int(^uint(0) >> 1)
)

// xfile is one side of a two-way diff (git's xdfile_t). recs holds the
// lines (each with its '\n' when it has one); class[i] is the line's
// equivalence class; rchg is indexed from -1 to nrec (offset by one) so the
// sentinels git relies on exist; ha/rindex are the lines left after
// discarding, which the Myers search runs on.
type xfile struct {
	recs   [][]byte
	class  []int
	rchg   []bool // rchg[i+1] is line i's changed flag
	ha     []int
	rindex []int
	dstart int
	dend   int
}

func (f *xfile) nrec() int          { return len(f.recs) }
func (f *xfile) changed(i int) bool { return f.rchg[i+1] }
func (f *xfile) set(i int, v bool)  { f.rchg[i+1] = v }

// splitLines cuts b into lines, each keeping its '\n'; a last line without
// one is a line of its own (git's records).
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i < len(b) {
			i++
		}
		out = append(out, b[:i:i])
		b = b[i:]
	}
	return out
}

// xenv is a prepared two-way diff (git's xdfenv_t): f1 is the old side.
type xenv struct {
	f1, f2 xfile
}

// xdiff runs git's default diff of a against b and leaves the changed
// flags in the returned env, compacted as xdl_merge does.
func xdiff(a, b []byte) *xenv {
	e := &xenv{}
	e.f1.recs = splitLines(a)
	e.f2.recs = splitLines(b)
	classes := map[string]int{}
	var len1, len2 []int
	classify := func(f *xfile, pass int) {
		f.class = make([]int, len(f.recs))
		for i, r := range f.recs {
			c, ok := classes[string(r)]
			if !ok {
				c = len(len1)
				classes[string(r)] = c
				len1 = append(len1, 0)
				len2 = append(len2, 0)
			}
			if pass == 1 {
				len1[c]++
			} else {
				len2[c]++
			}
			f.class[i] = c
		}
		f.rchg = make([]bool, len(f.recs)+2)
	}
	classify(&e.f1, 1)
	classify(&e.f2, 2)
	e.trimEnds()
	e.cleanupRecords(len1, len2)
	e.diff()
	compact(&e.f1, &e.f2)
	compact(&e.f2, &e.f1)
	return e
}

// trimEnds is xdl_trim_ends: common first and last lines are never
// searched.
func (e *xenv) trimEnds() {
	f1, f2 := &e.f1, &e.f2
	lim := min(f1.nrec(), f2.nrec())
	i := 0
	for ; i < lim; i++ {
		if f1.class[i] != f2.class[i] {
			break
		}
	}
	f1.dstart, f2.dstart = i, i
	lim -= i
	j := 0
	for ; j < lim; j++ {
		if f1.class[f1.nrec()-1-j] != f2.class[f2.nrec()-1-j] {
			break
		}
	}
	f1.dend = f1.nrec() - j - 1
	f2.dend = f2.nrec() - j - 1
}

func bogosqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// cleanupRecords is xdl_cleanup_records: lines with no match on the other
// side are changed outright, and lines with many matches are dropped from
// the search when they sit among unmatched lines.
func (e *xenv) cleanupRecords(len1, len2 []int) {
	mark := func(f *xfile, other []int) []byte {
		dis := make([]byte, f.nrec()+1)
		mlim := min(bogosqrt(f.nrec()), xdlMaxEqLimit)
		for i := f.dstart; i <= f.dend; i++ {
			nm := other[f.class[i]]
			switch {
			case nm == 0:
				dis[i] = 0
			case nm >= mlim:
				dis[i] = 2
			default:
				dis[i] = 1
			}
		}
		return dis
	}
	dis1 := mark(&e.f1, len2)
	dis2 := mark(&e.f2, len1)
	keep := func(f *xfile, dis []byte) {
		for i := f.dstart; i <= f.dend; i++ {
			if dis[i] == 1 || (dis[i] == 2 && !cleanMmatch(dis, i, f.dstart, f.dend)) {
				f.rindex = append(f.rindex, i)
				f.ha = append(f.ha, f.class[i])
			} else {
				f.set(i, true)
			}
		}
	}
	keep(&e.f1, dis1)
	keep(&e.f2, dis2)
}

// cleanMmatch is xdl_clean_mmatch.
func cleanMmatch(dis []byte, i, s, e int) bool {
	if i-s > xdlSimscanWin {
		s = i - xdlSimscanWin
	}
	if e-i > xdlSimscanWin {
		e = i + xdlSimscanWin
	}
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		if dis[i-r] == 0 {
			rdis0++
		} else if dis[i-r] == 2 {
			rpdis0++
		} else {
			break
		}
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		if dis[i+r] == 0 {
			rdis1++
		} else if dis[i+r] == 2 {
			rpdis1++
		} else {
			break
		}
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*xdlKpdisRun < rpdis1+rdis1
}

// kv is one of git's K vectors, indexed by diagonal (which may be
// negative).
type kv struct {
	v   []int
	off int
}

func (k *kv) get(d int) int    { return k.v[d+k.off] }
func (k *kv) put(d int, x int) { k.v[d+k.off] = x }

type split struct {
	i1, i2       int
	minLo, minHi bool
}

type searcher struct {
	ha1, ha2   []int
	rchg1      func(int)
	rchg2      func(int)
	kvdf, kvdb kv
	mxcost     int
}

func (e *xenv) diff() {
	n1, n2 := len(e.f1.ha), len(e.f2.ha)
	ndiags := n1 + n2 + 3
	s := &searcher{
		ha1:    e.f1.ha,
		ha2:    e.f2.ha,
		rchg1:  func(i int) { e.f1.set(e.f1.rindex[i], true) },
		rchg2:  func(i int) { e.f2.set(e.f2.rindex[i], true) },
		kvdf:   kv{v: make([]int, ndiags+1), off: n2 + 1},
		kvdb:   kv{v: make([]int, ndiags+1), off: n2 + 1},
		mxcost: max(bogosqrt(ndiags), xdlMaxCostMin),
	}
	s.recsCmp(0, n1, 0, n2, false)
}

// recsCmp is xdl_recs_cmp.
func (s *searcher) recsCmp(off1, lim1, off2, lim2 int, needMin bool) {
	ha1, ha2 := s.ha1, s.ha2
	for off1 < lim1 && off2 < lim2 && ha1[off1] == ha2[off2] {
		off1++
		off2++
	}
	for off1 < lim1 && off2 < lim2 && ha1[lim1-1] == ha2[lim2-1] {
		lim1--
		lim2--
	}
	switch {
	case off1 == lim1:
		for ; off2 < lim2; off2++ {
			s.rchg2(off2)
		}
	case off2 == lim2:
		for ; off1 < lim1; off1++ {
			s.rchg1(off1)
		}
	default:
		spl := s.split(off1, lim1, off2, lim2, needMin)
		s.recsCmp(off1, spl.i1, off2, spl.i2, spl.minLo)
		s.recsCmp(spl.i1, lim1, spl.i2, lim2, spl.minHi)
	}
}

// split is xdl_split: the middle snake of the box, or a heuristic cut
// when the search grows expensive. It is longer than the guideline because
// it is a line-for-line transcription of git's xdiff/xdiffi.c xdl_split,
// kept so that art's merges stay byte-identical to git merge-file; split
// into steps, it could no longer be checked against the original.
func (s *searcher) split(off1, lim1, off2, lim2 int, needMin bool) split {
	ha1, ha2 := s.ha1, s.ha2
	kvdf, kvdb := &s.kvdf, &s.kvdb
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	kvdf.put(fmid, off1)
	kvdb.put(bmid, lim1)
	for ec := 1; ; ec++ {
		gotSnake := false
		if fmin > dmin {
			fmin--
			kvdf.put(fmin-1, -1)
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			kvdf.put(fmax+1, -1)
		} else {
			fmax--
		}
		for d := fmax; d >= fmin; d -= 2 {
			var i1 int
			if kvdf.get(d-1) >= kvdf.get(d+1) {
				i1 = kvdf.get(d-1) + 1
			} else {
				i1 = kvdf.get(d + 1)
			}
			prev1 := i1
			i2 := i1 - d
			for i1 < lim1 && i2 < lim2 && ha1[i1] == ha2[i2] {
				i1++
				i2++
			}
			if i1-prev1 > xdlSnakeCnt {
				gotSnake = true
			}
			kvdf.put(d, i1)
			if odd && bmin <= d && d <= bmax && kvdb.get(d) <= i1 {
				return split{i1: i1, i2: i2, minLo: true, minHi: true}
			}
		}
		if bmin > dmin {
			bmin--
			kvdb.put(bmin-1, xdlLineMax)
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			kvdb.put(bmax+1, xdlLineMax)
		} else {
			bmax--
		}
		for d := bmax; d >= bmin; d -= 2 {
			var i1 int
			if kvdb.get(d-1) < kvdb.get(d+1) {
				i1 = kvdb.get(d - 1)
			} else {
				i1 = kvdb.get(d+1) - 1
			}
			prev1 := i1
			i2 := i1 - d
			for i1 > off1 && i2 > off2 && ha1[i1-1] == ha2[i2-1] {
				i1--
				i2--
			}
			if prev1-i1 > xdlSnakeCnt {
				gotSnake = true
			}
			kvdb.put(d, i1)
			if !odd && fmin <= d && d <= fmax && i1 <= kvdf.get(d) {
				return split{i1: i1, i2: i2, minLo: true, minHi: true}
			}
		}
		if needMin {
			continue
		}
		if gotSnake && ec > xdlHeurMinCost {
			best := 0
			var spl split
			for d := fmax; d >= fmin; d -= 2 {
				dd := fmid - d
				if d > fmid {
					dd = d - fmid
				}
				i1 := kvdf.get(d)
				i2 := i1 - d
				v := (i1 - off1) + (i2 - off2) - dd
				if v > xdlKHeur*ec && v > best &&
					off1+xdlSnakeCnt <= i1 && i1 < lim1 &&
					off2+xdlSnakeCnt <= i2 && i2 < lim2 {
					for k := 1; ha1[i1-k] == ha2[i2-k]; k++ {
						if k == xdlSnakeCnt {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = true, false
				return spl
			}
			for d := bmax; d >= bmin; d -= 2 {
				dd := bmid - d
				if d > bmid {
					dd = d - bmid
				}
				i1 := kvdb.get(d)
				i2 := i1 - d
				v := (lim1 - i1) + (lim2 - i2) - dd
				if v > xdlKHeur*ec && v > best &&
					off1 < i1 && i1 <= lim1-xdlSnakeCnt &&
					off2 < i2 && i2 <= lim2-xdlSnakeCnt {
					for k := 0; ha1[i1+k] == ha2[i2+k]; k++ {
						if k == xdlSnakeCnt-1 {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = false, true
				return spl
			}
		}
		if ec >= s.mxcost {
			fbest, fbest1 := -1, -1
			for d := fmax; d >= fmin; d -= 2 {
				i1 := min(kvdf.get(d), lim1)
				i2 := i1 - d
				if lim2 < i2 {
					i1, i2 = lim2+d, lim2
				}
				if fbest < i1+i2 {
					fbest, fbest1 = i1+i2, i1
				}
			}
			bbest, bbest1 := xdlLineMax, xdlLineMax
			for d := bmax; d >= bmin; d -= 2 {
				i1 := max(off1, kvdb.get(d))
				i2 := i1 - d
				if i2 < off2 {
					i1, i2 = off2+d, off2
				}
				if i1+i2 < bbest {
					bbest, bbest1 = i1+i2, i1
				}
			}
			if (lim1+lim2)-bbest < fbest-(off1+off2) {
				return split{i1: fbest1, i2: fbest - fbest1, minLo: true, minHi: false}
			}
			return split{i1: bbest1, i2: bbest - bbest1, minLo: false, minHi: true}
		}
	}
}

// group is git's struct xdlgroup: [start, end) of changed lines, or an
// empty group above line start.
type group struct{ start, end int }

func groupInit(f *xfile) group {
	g := group{}
	for f.changed(g.end) {
		g.end++
	}
	return g
}

func groupNext(f *xfile, g *group) bool {
	if g.end == f.nrec() {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for f.changed(g.end) {
		g.end++
	}
	return true
}

func groupPrevious(f *xfile, g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for f.changed(g.start - 1) {
		g.start--
	}
	return true
}

func groupSlideDown(f *xfile, g *group) bool {
	if g.end < f.nrec() && f.class[g.start] == f.class[g.end] {
		f.set(g.start, false)
		g.start++
		f.set(g.end, true)
		g.end++
		for f.changed(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func groupSlideUp(f *xfile, g *group) bool {
	if g.start > 0 && f.class[g.start-1] == f.class[g.end-1] {
		g.start--
		f.set(g.start, true)
		g.end--
		f.set(g.end, false)
		for f.changed(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// compact is xdl_change_compact without the indent heuristic (git
// merge-file does not ask for it): each group slides as far down as it
// can, then back up to line up with a change group of the other file if
// one was passed on the way.
func compact(f, fo *xfile) {
	g := groupInit(f)
	gog := groupInit(fo)
	for {
		if g.end != g.start {
			var earliestEnd, endMatchingOther int
			for {
				groupsize := g.end - g.start
				endMatchingOther = -1
				for groupSlideUp(f, &g) {
					if !groupPrevious(fo, &gog) {
						panic("merge: group sync broken sliding up")
					}
				}
				earliestEnd = g.end
				if gog.end > gog.start {
					endMatchingOther = g.end
				}
				for groupSlideDown(f, &g) {
					if !groupNext(fo, &gog) {
						panic("merge: group sync broken sliding down")
					}
					if gog.end > gog.start {
						endMatchingOther = g.end
					}
				}
				if groupsize == g.end-g.start {
					break
				}
			}
			if g.end != earliestEnd && endMatchingOther != -1 {
				for gog.end == gog.start {
					if !groupSlideUp(f, &g) {
						panic("merge: match disappeared")
					}
					if !groupPrevious(fo, &gog) {
						panic("merge: group sync broken sliding to match")
					}
				}
			}
		}
		if !groupNext(f, &g) {
			break
		}
		if !groupNext(fo, &gog) {
			panic("merge: group sync broken moving to next group")
		}
	}
}

// change is one hunk of a two-way script (git's xdchange_t): chg1 lines
// at i1 of the old side became chg2 lines at i2 of the new.
type change struct {
	i1, i2, chg1, chg2 int
}

// script is xdl_build_script: the change groups in file order.
func (e *xenv) script() []change {
	var rev []change
	f1, f2 := &e.f1, &e.f2
	for i1, i2 := f1.nrec(), f2.nrec(); i1 >= 0 || i2 >= 0; i1, i2 = i1-1, i2-1 {
		if f1.changed(i1-1) || f2.changed(i2-1) {
			l1, l2 := i1, i2
			for f1.changed(i1 - 1) {
				i1--
			}
			for f2.changed(i2 - 1) {
				i2--
			}
			rev = append(rev, change{i1: i1, i2: i2, chg1: l1 - i1, chg2: l2 - i2})
		}
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}
