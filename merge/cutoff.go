package merge

// The two cut-offs of the search (see myers.go), which end a costly
// search early at a good-enough split instead of the middle snake.

// snakeCut looks for a frontier point that ends (forward) or starts
// (backward) a run of at least snakeLen equal lines and whose progress
// towards its corner, less its drift from the box's central diagonal,
// is over 4 lines per round. The forward frontier is tried first; on each
// side the point with the most progress wins, the highest diagonal on a
// tie.
func (s *search) snakeCut(cost, fmid, bmid int) (split, bool) {
	best, sp := 0, split{}
	for k := s.fwdHi; k >= s.fwdLo; k -= 2 {
		x := s.fwd[k+s.off]
		y := x - k
		v := (x - s.x0) + (y - s.y0) - abs(k-fmid)
		if v > 4*cost && v > best && s.x0+snakeLen <= x && x < s.x1 &&
			s.y0+snakeLen <= y && y < s.y1 && s.equalRun(x-snakeLen, y-snakeLen) {
			best, sp = v, split{x: x, y: y, minLo: true}
		}
	}
	if best > 0 {
		return sp, true
	}
	for k := s.bwdHi; k >= s.bwdLo; k -= 2 {
		x := s.bwd[k+s.off]
		y := x - k
		v := (s.x1 - x) + (s.y1 - y) - abs(k-bmid)
		if v > 4*cost && v > best && s.x0 < x && x <= s.x1-snakeLen &&
			s.y0 < y && y <= s.y1-snakeLen && s.equalRun(x, y) {
			best, sp = v, split{x: x, y: y, minHi: true}
		}
	}
	return sp, best > 0
}

// equalRun reports whether the snakeLen lines from a[x] and b[y] are equal.
func (s *search) equalRun(x, y int) bool {
	for i := range snakeLen {
		if s.a[x+i] != s.b[y+i] {
			return false
		}
	}
	return true
}

// costCut ends a search that reached maxCost rounds: of the forward
// frontier's points (clipped to the box), the one furthest from the
// top-left corner (x+y largest, first found on a tie); of the backward
// frontier's, the one furthest from the bottom-right corner; and of the
// two, the forward one unless the backward one got strictly further.
func (s *search) costCut() split {
	fBest, fx := -1, 0
	for k := s.fwdHi; k >= s.fwdLo; k -= 2 {
		x := min(s.fwd[k+s.off], s.x1)
		y := x - k
		if y > s.y1 {
			x, y = s.y1+k, s.y1
		}
		if x+y > fBest {
			fBest, fx = x+y, x
		}
	}
	bBest, bx := int(^uint(0)>>1), 0
	for k := s.bwdHi; k >= s.bwdLo; k -= 2 {
		x := max(s.bwd[k+s.off], s.x0)
		y := x - k
		if y < s.y0 {
			x, y = s.y0+k, s.y0
		}
		if x+y < bBest {
			bBest, bx = x+y, x
		}
	}
	if (s.x1+s.y1)-bBest < fBest-(s.x0+s.y0) {
		return split{x: fx, y: fBest - fx, minLo: true}
	}
	return split{x: bx, y: bBest - bx, minHi: true}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
