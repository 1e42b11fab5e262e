package merge

// The search of step 3 (see diff.go). In Myers' terms, line x of a and
// line y of b are a point of the edit graph, diagonal k is the points with
// x-y = k, and a snake is a run of equal lines followed along a diagonal.
// Each round of cost d extends, on every reachable diagonal, the furthest
// point a script of d edits reaches from the top-left corner (forward) and
// the one it reaches from the bottom-right corner (backward); when the two
// frontiers overlap on a diagonal, the point there splits the box into two
// smaller boxes, each diffed the same way.
//
// Exact choices matter, since they pick among equally short scripts: the
// forward frontier prefers a deletion (coming from diagonal k-1) when that
// reaches at least as far, the backward one an insertion, diagonals are
// scanned from the highest down, and each round does forward before
// backward. On long costly inputs two cut-offs stop the search early, at
// a point that is good enough rather than on the shortest path:
//
//   - once past heurMinCost rounds, a diagonal whose frontier ended a
//     snake of at least snakeLen lines and got far enough (more than 4
//     lines per round of progress) splits there;
//   - at maxCost rounds (about the square root of the number of
//     diagonals, at least 256) the frontier point that got furthest splits.
//
// The half before such a split is searched minimally when the split came
// from the forward side, the half after it when it came from the backward
// side; both are otherwise minimal only if the caller's box was.
const (
	heurMinCost = 256
	snakeLen    = 20
	minMaxCost  = 256
)

// search diffs the lines the first steps kept: a and b hold their ids.
type search struct {
	a, b               []int32
	changedA, changedB []bool
	// fwd and bwd hold, for each diagonal k at index k+off, the x of the
	// furthest point found from each end.
	fwd, bwd []int
	off      int
	maxCost  int
	// The current box and frontiers: the diagonals fwdLo..fwdHi and
	// bwdLo..bwdHi (every other one) are live, within kLo..kHi.
	x0, x1, y0, y1 int
	kLo, kHi       int
	fwdLo, fwdHi   int
	bwdLo, bwdHi   int
}

// split is where a box divides, and which of its halves must be searched
// minimally.
type split struct {
	x, y         int
	minLo, minHi bool
}

func newSearch(keptA, keptB []int, a, b []int32) *search {
	s := &search{
		a:        make([]int32, len(keptA)),
		b:        make([]int32, len(keptB)),
		changedA: make([]bool, len(keptA)),
		changedB: make([]bool, len(keptB)),
	}
	for i, x := range keptA {
		s.a[i] = a[x]
	}
	for i, y := range keptB {
		s.b[i] = b[y]
	}
	diagonals := len(keptA) + len(keptB) + 3
	s.fwd, s.bwd = make([]int, diagonals), make([]int, diagonals)
	s.off = len(keptB) + 1
	s.maxCost = max(isqrtPow2(diagonals), minMaxCost)
	return s
}

// isqrtPow2 is the square root of n rounded up to a power of two.
func isqrtPow2(n int) int {
	r := 1
	for ; n > 0; n >>= 2 {
		r <<= 1
	}
	return r
}

// compare diffs a[x0:x1] against b[y0:y1], marking changed lines.
func (s *search) compare(x0, x1, y0, y1 int, minimal bool) {
	for {
		for x0 < x1 && y0 < y1 && s.a[x0] == s.b[y0] {
			x0, y0 = x0+1, y0+1
		}
		for x0 < x1 && y0 < y1 && s.a[x1-1] == s.b[y1-1] {
			x1, y1 = x1-1, y1-1
		}
		switch {
		case x0 == x1:
			for y := y0; y < y1; y++ {
				s.changedB[y] = true
			}
			return
		case y0 == y1:
			for x := x0; x < x1; x++ {
				s.changedA[x] = true
			}
			return
		}
		sp := s.split(x0, x1, y0, y1, minimal)
		s.compare(x0, sp.x, y0, sp.y, sp.minLo)
		x0, y0, minimal = sp.x, sp.y, sp.minHi
	}
}

// split runs the two-ended search on a box whose corners differ (no common
// first or last line, neither side empty) until it finds where to cut it.
func (s *search) split(x0, x1, y0, y1 int, minimal bool) split {
	s.x0, s.x1, s.y0, s.y1 = x0, x1, y0, y1
	s.kLo, s.kHi = x0-y1, x1-y0
	fmid, bmid := x0-y0, x1-y1
	s.fwdLo, s.fwdHi, s.bwdLo, s.bwdHi = fmid, fmid, bmid, bmid
	s.fwd[fmid+s.off] = x0
	s.bwd[bmid+s.off] = x1
	odd := (fmid-bmid)&1 != 0
	for cost := 1; ; cost++ {
		sp, met, long1 := s.forward(odd)
		if met {
			return sp
		}
		sp, met, long2 := s.backward(!odd)
		if met {
			return sp
		}
		if minimal {
			continue
		}
		if (long1 || long2) && cost > heurMinCost {
			if sp, ok := s.snakeCut(cost, fmid, bmid); ok {
				return sp
			}
		}
		if cost >= s.maxCost {
			return s.costCut()
		}
	}
}

// forward extends the forward frontier by one edit. It reports a split
// where it meets the backward frontier (checked only when check: Myers'
// overlap test on the round where the parity allows it), and whether it
// followed a snake longer than snakeLen.
func (s *search) forward(check bool) (sp split, met, long bool) {
	const none = -1
	if s.fwdLo > s.kLo {
		s.fwdLo--
		s.fwd[s.fwdLo-1+s.off] = none
	} else {
		s.fwdLo++
	}
	if s.fwdHi < s.kHi {
		s.fwdHi++
		s.fwd[s.fwdHi+1+s.off] = none
	} else {
		s.fwdHi--
	}
	for k := s.fwdHi; k >= s.fwdLo; k -= 2 {
		x := s.fwd[k+1+s.off] // an insertion: down from diagonal k+1
		if del := s.fwd[k-1+s.off]; del >= x {
			x = del + 1 // a deletion: right from diagonal k-1
		}
		start := x
		y := x - k
		for x < s.x1 && y < s.y1 && s.a[x] == s.b[y] {
			x, y = x+1, y+1
		}
		if x-start > snakeLen {
			long = true
		}
		s.fwd[k+s.off] = x
		if check && s.bwdLo <= k && k <= s.bwdHi && s.bwd[k+s.off] <= x {
			return split{x: x, y: y, minLo: true, minHi: true}, true, long
		}
	}
	return split{}, false, long
}

// backward is forward's mirror image, from the bottom-right corner.
func (s *search) backward(check bool) (sp split, met, long bool) {
	const none = int(^uint(0) >> 1)
	if s.bwdLo > s.kLo {
		s.bwdLo--
		s.bwd[s.bwdLo-1+s.off] = none
	} else {
		s.bwdLo++
	}
	if s.bwdHi < s.kHi {
		s.bwdHi++
		s.bwd[s.bwdHi+1+s.off] = none
	} else {
		s.bwdHi--
	}
	for k := s.bwdHi; k >= s.bwdLo; k -= 2 {
		x := s.bwd[k+1+s.off] - 1 // a deletion, walking back
		if ins := s.bwd[k-1+s.off]; ins < x+1 {
			x = ins // an insertion, walking back
		}
		start := x
		y := x - k
		for x > s.x0 && y > s.y0 && s.a[x-1] == s.b[y-1] {
			x, y = x-1, y-1
		}
		if start-x > snakeLen {
			long = true
		}
		s.bwd[k+s.off] = x
		if check && s.fwdLo <= k && k <= s.fwdHi && x <= s.fwd[k+s.off] {
			return split{x: x, y: y, minLo: true, minHi: true}, true, long
		}
	}
	return split{}, false, long
}
