package merge

// This file and myers.go compute a line diff the way git's default diff
// ("myers", git 2.39 with no options) does, since a three-way merge's
// hunks, and so its conflicts, depend on which of the many equally short
// edit scripts the diff picks. The steps, each checked against `git diff
// --no-index --diff-algorithm=myers` and `git merge-file` by the tests
// (diff_test.go, text_test.go):
//
//  1. Lines common to both ends of the two files are matched outright.
//  2. In the middle, a line that never occurs in the other file is a
//     change; so is a line that occurs there very often (about the square
//     root of its own file's length or more) when it sits among runs of
//     such lines. Only the remaining lines go to the search.
//  3. The search is Myers' greedy shortest-edit-script search, run from
//     both ends at once to find a middle snake and recursing on the two
//     halves (Myers 1986, "An O(ND) Difference Algorithm and Its
//     Variations", section 4b, linear space), with cut-offs that trade a
//     minimal script for bounded time on costly inputs (myers.go).
//  4. Each run of changed lines is slid up or down over equal lines to a
//     canonical place (compact.go).

// edit is one hunk of a diff: lines a[a0:a0+an] of the old file become
// lines b[b0:b0+bn] of the new one.
type edit struct {
	a0, an, b0, bn int
}

// commonLimit is the number of occurrences in the other file from which a
// line counts as too common to match on its own (step 2): the square root
// of the file's length rounded up to a power of two, at most 1024.
func commonLimit(n int) int {
	return min(isqrtPow2(n), 1024)
}

// Line classes for step 2.
const (
	unmatched = iota // no equal line in the other file
	matched          // a few equal lines there
	frequent         // commonLimit or more equal lines there
)

// diffLines diffs a into b, given as line ids below n, and returns the
// hunks in order.
func diffLines(a, b []int32, n int) []edit {
	ca := make([]bool, len(a))
	cb := make([]bool, len(b))
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	countA, countB := make([]int32, n), make([]int32, n)
	for _, id := range a {
		countA[id]++
	}
	for _, id := range b {
		countB[id]++
	}
	keptA := keep(a, pre, len(a)-suf, countB, commonLimit(len(a)), ca)
	keptB := keep(b, pre, len(b)-suf, countA, commonLimit(len(b)), cb)
	s := newSearch(keptA, keptB, a, b)
	s.compare(0, len(keptA), 0, len(keptB), false)
	for i, x := range keptA {
		ca[x] = s.changedA[i]
	}
	for i, y := range keptB {
		cb[y] = s.changedB[i]
	}
	compact(a, ca, cb)
	compact(b, cb, ca)
	return script(ca, cb)
}

// keep applies step 2 to lines[lo:hi]: it marks the lines the search will
// not see as changed and returns the indexes of the others. other counts
// each id's occurrences in the other file.
func keep(lines []int32, lo, hi int, other []int32, limit int, changed []bool) []int {
	class := make([]uint8, hi-lo)
	for i := lo; i < hi; i++ {
		switch n := int(other[lines[i]]); {
		case n == 0:
			class[i-lo] = unmatched
		case n >= limit:
			class[i-lo] = frequent
		default:
			class[i-lo] = matched
		}
	}
	kept := make([]int, 0, hi-lo)
	for i := range class {
		if class[i] == matched || class[i] == frequent && !amidUnmatched(class, i) {
			kept = append(kept, lo+i)
		} else {
			changed[lo+i] = true
		}
	}
	return kept
}

// amidUnmatched reports whether the frequent line class[i] lies in a
// stretch of unmatched and frequent lines (up to the nearest matched line,
// looking at most 100 lines each way) that has unmatched lines on both
// sides of i and in which frequent lines, i counted on each side, are
// under a quarter: such a line would only match by accident, so it is
// left out of the search with its neighbours.
func amidUnmatched(class []uint8, i int) bool {
	const window = 100
	lo, hi := max(0, i-window), min(len(class)-1, i+window)
	freq, unm := 2, 0
	before := 0
	for j := i - 1; j >= lo && class[j] != matched; j-- {
		if class[j] == unmatched {
			before++
		} else {
			freq++
		}
	}
	if before == 0 {
		return false
	}
	after := 0
	for j := i + 1; j <= hi && class[j] != matched; j++ {
		if class[j] == unmatched {
			after++
		} else {
			freq++
		}
	}
	if after == 0 {
		return false
	}
	unm = before + after
	return freq*4 < freq+unm
}

// script turns the changed flags of both files into hunks: unchanged
// lines pair up in order, and each stretch between two pairs is a hunk.
func script(ca, cb []bool) []edit {
	var out []edit
	i, j := 0, 0
	for i < len(ca) || j < len(cb) {
		if i < len(ca) && j < len(cb) && !ca[i] && !cb[j] {
			i, j = i+1, j+1
			continue
		}
		e := edit{a0: i, b0: j}
		for i < len(ca) && ca[i] {
			i++
		}
		for j < len(cb) && cb[j] {
			j++
		}
		e.an, e.bn = i-e.a0, j-e.b0
		if e.an == 0 && e.bn == 0 {
			break // unreachable: both files have as many unchanged lines
		}
		out = append(out, e)
	}
	return out
}
