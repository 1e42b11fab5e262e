package merge

// Step 4 of the diff (see diff.go). A run of changed lines that is
// followed by a line equal to its first one can slide down by one (the
// first line becomes unchanged, the following one changed) without
// changing the diff's meaning; likewise up. git puts each run in one
// canonical place, which the three-way merge's hunks inherit:
//
//   - slide it as far down as it goes (runs that meet on the way merge
//     and the sliding starts over, from the top of the merged run);
//   - if on the way its end passed next to a run of changes in the other
//     file, move it back up to the lowest such place, so the two files'
//     changes line up in one hunk.
//
// (git's indent heuristic, which would move runs to blank-line
// boundaries, is not on for merge-file.)

// run is a stretch [start, end) of changed lines of one file, possibly
// empty: the place between two unchanged lines.
type run struct {
	start, end int
}

// runs walks the runs of a file's changed flags, in step with the other
// file's: the k-th unchanged line of each pairs with the other's, so the
// k-th run of one lies between the same pairs as the k-th run of the other.
type runs struct {
	ids []int32
	ch  []bool
	run
}

func newRuns(ids []int32, ch []bool) *runs {
	r := &runs{ids: ids, ch: ch}
	for r.end < len(ch) && ch[r.end] {
		r.end++
	}
	return r
}

// next moves to the run after the next unchanged line, if any.
func (r *runs) next() bool {
	if r.end == len(r.ch) {
		return false
	}
	r.start = r.end + 1
	r.end = r.start
	for r.end < len(r.ch) && r.ch[r.end] {
		r.end++
	}
	return true
}

// prev moves to the run before the previous unchanged line, if any.
func (r *runs) prev() bool {
	if r.start == 0 {
		return false
	}
	r.end = r.start - 1
	r.start = r.end
	for r.start > 0 && r.ch[r.start-1] {
		r.start--
	}
	return true
}

// down slides the run one line down if the line after it equals its
// first, absorbing the run that follows if they now touch.
func (r *runs) down() bool {
	if r.end == len(r.ch) || r.ids[r.start] != r.ids[r.end] {
		return false
	}
	r.ch[r.start], r.ch[r.end] = false, true
	r.start++
	r.end++
	for r.end < len(r.ch) && r.ch[r.end] {
		r.end++
	}
	return true
}

// up slides the run one line up if the line before it equals its last.
func (r *runs) up() bool {
	if r.start == 0 || r.ids[r.start-1] != r.ids[r.end-1] {
		return false
	}
	r.start--
	r.end--
	r.ch[r.start], r.ch[r.end] = true, false
	for r.start > 0 && r.ch[r.start-1] {
		r.start--
	}
	return true
}

// compact places the runs of changes of one file (ids, ch), keeping the
// other file's runs (och) in step.
func compact(ids []int32, ch, och []bool) {
	g, o := newRuns(ids, ch), newRuns(nil, och)
	for {
		if g.end > g.start {
			place(g, o)
		}
		if !g.next() {
			return
		}
		o.next()
	}
}

// place moves the non-empty run g to its canonical place (see above); o
// is the other file's run between the same unchanged pairs, and moves
// with it.
func place(g, o *runs) {
	var top, alongOther int
	for {
		size := g.end - g.start
		for g.up() {
			o.prev()
		}
		top, alongOther = g.end, -1
		if o.end > o.start {
			alongOther = g.end
		}
		for g.down() {
			o.next()
			if o.end > o.start {
				alongOther = g.end
			}
		}
		if g.end-g.start == size {
			break
		}
	}
	if g.end != top && alongOther >= 0 {
		for o.end == o.start {
			g.up()
			o.prev()
		}
	}
}
