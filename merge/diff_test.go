package merge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// gitDiffHunks runs the real `git diff --no-index -U0 --diff-algorithm=myers`
// (no indent heuristic, as merge-file runs it) on a and b and returns its
// hunks: with no context lines each hunk header is exactly one edit.
func gitDiffHunks(t *testing.T, dir string, a, b []byte) []edit {
	t.Helper()
	for name, c := range map[string][]byte{"a": a, "b": b} {
		if err := os.WriteFile(filepath.Join(dir, name), c, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("git", "diff", "--no-index", "--no-color", "-U0", "--no-indent-heuristic", "--diff-algorithm=myers", "a", "b")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+filepath.Join(dir, "nogit"))
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("git diff: %v", err)
	}
	var hunks []edit
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "@@ -") {
			f := strings.Fields(l)
			a0, an := hunkRange(t, f[1][1:])
			b0, bn := hunkRange(t, f[2][1:])
			hunks = append(hunks, edit{a0, an, b0, bn})
		}
	}
	return hunks
}

// hunkRange parses a unified diff range "start[,count]" into a 0-based
// start and a count (a count of 0 names the line before the gap).
func hunkRange(t *testing.T, s string) (int, int) {
	start, count, ok := strings.Cut(s, ",")
	n := 1
	var err error
	if ok {
		if n, err = strconv.Atoi(count); err != nil {
			t.Fatal(err)
		}
	}
	at, err := strconv.Atoi(start)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		at--
	}
	return at, n
}

// checkDiff compares diffLines with git's diff of the same two files.
func checkDiff(t *testing.T, dir string, a, b []string, what string) {
	t.Helper()
	// git diff (unlike merge-file) first cuts the files' common tail in
	// 1 KiB blocks, which changes the line counts the diff's step 2 uses:
	// a different last line on each side keeps that tail empty.
	ab := []byte(strings.Join(append(slices.Clone(a), "end of a"), "\n") + "\n")
	bb := []byte(strings.Join(append(slices.Clone(b), "end of b"), "\n") + "\n")
	var in interner
	got := diffLines(in.ids(splitLines(ab)), in.ids(splitLines(bb)), in.n())
	want := gitDiffHunks(t, dir, ab, bb)
	if !slices.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d lines vs %d: hunk %d differs: got %v want %v (of %d vs %d hunks)",
			what, len(a), len(b), i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))], len(got), len(want))
	}
}

// frequentLines is a file in which most lines are distinct but a share of
// them are one of a few very common lines (braces, blank lines), which is
// what makes the diff set lines aside before its search: a common line
// amid lines the other file lacks.
func frequentLines(r *rand.Rand, n int, common float64, tag string) []string {
	lines := make([]string, n)
	for i := range lines {
		if r.Float64() < common {
			lines[i] = []string{"}", "", "{", "return"}[r.IntN(1+r.IntN(4))]
		} else {
			lines[i] = fmt.Sprintf("%s%d", tag, r.IntN(1<<30))
		}
	}
	return lines
}

// rewrite replaces a few stretches of lines, some long, with new lines
// of the same kind.
func rewrite(r *rand.Rand, lines []string, common float64, tag string) []string {
	out := slices.Clone(lines)
	for range 1 + r.IntN(6) {
		at := r.IntN(len(out) + 1)
		del := min(r.IntN(1+r.IntN(250)), len(out)-at)
		ins := frequentLines(r, r.IntN(1+r.IntN(250)), common, tag)
		out = slices.Concat(out[:at], ins, out[at+del:])
	}
	return out
}

// TestDiffMatchesGitFrequentLines checks the diff's setting aside of
// common lines among unmatched ones against git diff: how common a line
// must be (against the other file's length), how far around it the run
// of unmatched lines is measured, and what share of common lines keeps it.
func TestDiffMatchesGitFrequentLines(t *testing.T) {
	requireGit(t)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 17))
	dir := t.TempDir()
	n := 400
	if testing.Short() {
		n = 100
	}
	for i := range n {
		common := 0.1 + 0.6*r.Float64()
		a := frequentLines(r, 1+r.IntN(600), common, "a")
		b := rewrite(r, a, common, "b")
		checkDiff(t, dir, a, b, fmt.Sprintf("case %d (seed %d)", i, seed))
	}
}

// TestDiffMatchesGitMoves checks the search's cut-offs against git diff on
// long files with reordered blocks: past 256 rounds on inputs of more
// than 32768 lines together, a split at a long snake; past the maximum
// cost, a split at the furthest point.
func TestDiffMatchesGitMoves(t *testing.T) {
	requireGit(t)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 19))
	dir := t.TempDir()
	n := 6
	if testing.Short() {
		n = 3
	}
	for i := range n {
		lines := make([]string, 30000+r.IntN(20000))
		for j := range lines {
			lines[j] = fmt.Sprintf("u%d", j)
			if r.IntN(10) == 0 {
				lines[j] = "}"
			}
		}
		var moved []string
		switch i % 3 {
		case 0:
			moved = moveBlocks(r, lines)
		case 1:
			moved = moveLongBlocks(r, lines)
		default:
			moved = swapNeighbours(r, lines)
		}
		checkDiff(t, dir, lines, moved, fmt.Sprintf("case %d (seed %d)", i, seed))
	}
}

// moveLongBlocks is moveBlocks with blocks of 20..120 lines: the longer
// snakes the search follows through them are what its first cut-off looks
// for.
func moveLongBlocks(r *rand.Rand, lines []string) []string {
	var blocks [][]string
	for len(lines) > 0 {
		n := min(20+r.IntN(101), len(lines))
		blocks = append(blocks, lines[:n])
		lines = lines[n:]
	}
	for range len(blocks) / 2 {
		i, j := r.IntN(len(blocks)), r.IntN(len(blocks))
		blocks[i], blocks[j] = blocks[j], blocks[i]
	}
	return slices.Concat(blocks...)
}

// swapNeighbours swaps about one pair of adjacent lines in 30: a costly
// diff made of many cheap edits between long runs of equal lines, on
// which the search makes fast progress along a diagonal (the case its
// first cut-off takes).
func swapNeighbours(r *rand.Rand, lines []string) []string {
	out := slices.Clone(lines)
	for i := 0; i+1 < len(out); i++ {
		if r.IntN(30) == 0 {
			out[i], out[i+1] = out[i+1], out[i]
			i++
		}
	}
	return out
}

// TestDiffMatchesGitHugeFile checks the cap on how common a line must be
// to be set aside (1024 occurrences, reached by files of 262,144 lines):
// a line that occurs 512 to 1023 times stays a plain match.
func TestDiffMatchesGitHugeFile(t *testing.T) {
	requireGit(t)
	if testing.Short() {
		t.Skip("a 270,000-line file")
	}
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 23))
	a := frequentLines(r, 270000, 0.006, "a")
	b := slices.Clone(a)
	for range 20 {
		b = rewrite(r, b, 0.3, "b")
	}
	checkDiff(t, t.TempDir(), a, b, fmt.Sprintf("seed %d", seed))
}
