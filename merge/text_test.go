package merge

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// gitMergeFile runs the real `git merge-file --diff3 -p` on the three
// inputs and returns its output and exit status, with no user or system
// configuration (merge.conflictStyle would change the output).
func gitMergeFile(t *testing.T, dir string, base, ours, theirs []byte, o TextOptions) ([]byte, int) {
	t.Helper()
	for name, b := range map[string][]byte{"base": base, "ours": ours, "theirs": theirs} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := o.Labels
	args := []string{"merge-file", "--diff3", "-p", "-L", l.Ours, "-L", l.Base, "-L", l.Theirs}
	switch o.Favor {
	case Ours:
		args = append(args, "--ours")
	case Theirs:
		args = append(args, "--theirs")
	}
	cmd := exec.Command("git", append(args, "ours", "base", "theirs")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+filepath.Join(dir, "nogit"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 128 && stderr.Len() == 0:
		return out, ee.ExitCode()
	}
	t.Fatalf("git merge-file: %v: %s", err, stderr.Bytes())
	return nil, 0
}

func requireGit(t *testing.T) {
	t.Helper()
	testutil.Require(t, "git")
}

// genText is a random file of n lines drawn from an alphabet of k lines,
// so lines repeat (the cases where diff tie-breaking matters). Some files
// use CRLF, some lack the final newline, some lines are blank.
type genText struct {
	r     *rand.Rand
	k     int
	crlf  bool
	noEOL bool
}

func (g genText) line() string {
	if g.r.IntN(8) == 0 {
		return ""
	}
	return fmt.Sprintf("l%d", g.r.IntN(g.k))
}

func (g genText) join(lines []string) []byte {
	eol := "\n"
	if g.crlf {
		eol = "\r\n"
	}
	s := strings.Join(lines, eol)
	if len(lines) > 0 && !g.noEOL {
		s += eol
	}
	return []byte(s)
}

// edit applies a few random hunks (replace, insert, delete) to lines.
func (g genText) edit(lines []string, hunks int) []string {
	out := append([]string(nil), lines...)
	for range hunks {
		at := g.r.IntN(len(out) + 1)
		del := 0
		if at < len(out) {
			del = g.r.IntN(min(4, len(out)-at) + 1)
		}
		var ins []string
		for range g.r.IntN(4) {
			ins = append(ins, g.line())
		}
		out = append(out[:at], append(ins, out[at+del:]...)...)
	}
	return out
}

func TestTextMatchesGitMergeFile(t *testing.T) {
	requireGit(t)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	labels := Labels{Ours: "ours", Base: "base", Theirs: "theirs"}
	n := 800
	if testing.Short() {
		n = 200
	}
	stats := map[string]int{}
	for i := range n {
		g := genText{r: r, k: 2 + r.IntN(12)}
		g.crlf = r.IntN(10) == 0
		nl := r.IntN(30)
		if r.IntN(10) == 0 {
			nl = 0
		}
		base := make([]string, nl)
		for j := range base {
			base[j] = g.line()
		}
		ours := g.edit(base, r.IntN(4))
		theirs := g.edit(base, r.IntN(4))
		if r.IntN(5) == 0 {
			theirs = g.edit(ours, r.IntN(2)) // sides that made the same changes
		}
		gb, g1, g2 := g, g, g
		gb.noEOL = r.IntN(6) == 0
		g1.noEOL = r.IntN(6) == 0
		g2.noEOL = r.IntN(6) == 0
		if r.IntN(20) == 0 {
			g1.crlf = !g1.crlf
		}
		b, o, th := gb.join(base), g1.join(ours), g2.join(theirs)
		opts := TextOptions{Labels: labels}
		if r.IntN(8) == 0 {
			opts.Favor = Side(1 + r.IntN(2))
		}
		want, wantN := gitMergeFile(t, dir, b, o, th, opts)
		res := Text(b, o, th, opts)
		got, gotN := res.Merged, res.Conflicts
		if !bytes.Equal(got, want) || min(gotN, 127) != wantN {
			t.Fatalf("case %d (seed %d, favor %d): conflicts got %d want %d\nbase %q\nours %q\ntheirs %q\ngot  %q\nwant %q",
				i, seed, opts.Favor, gotN, wantN, b, o, th, got, want)
		}
		switch {
		case res.Favored > 0:
			stats["favored"]++
		case gotN > 0:
			stats["conflicted"]++
		case bytes.Equal(got, o) || bytes.Equal(got, th):
			stats["one side"]++
		default:
			stats["merged"]++
		}
	}
	t.Logf("%d cases identical to git merge-file: %v", n, stats)
}

// TestTextMatchesGitLarge covers the cost heuristics of git's diff (the
// cut-offs that start above 256 differences): long files with many
// scattered edits.
func TestTextMatchesGitLarge(t *testing.T) {
	requireGit(t)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	dir := t.TempDir()
	labels := Labels{Ours: "a", Base: "o", Theirs: "b"}
	for i := range 6 {
		g := genText{r: r, k: 20 + r.IntN(2000)}
		base := make([]string, 1000+r.IntN(4000))
		for j := range base {
			base[j] = g.line()
		}
		ours := g.edit(base, 100+r.IntN(800))
		theirs := g.edit(base, 100+r.IntN(800))
		b, o, th := g.join(base), g.join(ours), g.join(theirs)
		want, wantN := gitMergeFile(t, dir, b, o, th, TextOptions{Labels: labels})
		res := Text(b, o, th, TextOptions{Labels: labels})
		got, gotN := res.Merged, res.Conflicts
		if !bytes.Equal(got, want) || min(gotN, 127) != wantN {
			t.Fatalf("case %d (seed %d): conflicts got %d want %d; outputs differ (%d vs %d bytes)", i, seed, gotN, wantN, len(got), len(want))
		}
	}
}

// moveBlocks cuts lines into blocks of 15..45 and swaps many of them:
// moved lines match on both sides but cannot all be kept, which is what
// makes git's diff cost climb past its heuristic thresholds with long
// snakes in between (plain edits are mostly discarded before the search).
func moveBlocks(r *rand.Rand, lines []string) []string {
	var blocks [][]string
	for len(lines) > 0 {
		n := min(15+r.IntN(31), len(lines))
		blocks = append(blocks, lines[:n])
		lines = lines[n:]
	}
	for range len(blocks) / 2 {
		i, j := r.IntN(len(blocks)), r.IntN(len(blocks))
		blocks[i], blocks[j] = blocks[j], blocks[i]
	}
	var out []string
	for _, b := range blocks {
		out = append(out, b...)
	}
	return out
}

// TestTextMatchesGitMoves drives the Myers search into git's cost
// heuristics (the snake sampling above 256 differences and the cut-off at
// the maximum cost) with files whose blocks were reordered.
func TestTextMatchesGitMoves(t *testing.T) {
	requireGit(t)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 13))
	dir := t.TempDir()
	labels := Labels{Ours: "a", Base: "o", Theirs: "b"}
	// The snake sampling needs a maximum cost above 256, that is files of
	// more than 32768 lines (after discarding) together: the first cases
	// are that long.
	for i := range 8 {
		n := 2000 + r.IntN(6000)
		if i < 1 {
			n = 36000 + r.IntN(4000)
		}
		base := make([]string, n)
		for j := range base {
			base[j] = fmt.Sprintf("u%d", j)
			if r.IntN(10) == 0 {
				base[j] = "}"
			}
		}
		ours, theirs := moveBlocks(r, base), base
		if r.IntN(2) == 0 {
			theirs = moveBlocks(r, base)
		}
		g := genText{r: r, k: 50}
		ours, theirs = g.edit(ours, r.IntN(50)), g.edit(theirs, r.IntN(50))
		b, o, th := g.join(base), g.join(ours), g.join(theirs)
		want, wantN := gitMergeFile(t, dir, b, o, th, TextOptions{Labels: labels})
		res := Text(b, o, th, TextOptions{Labels: labels})
		got, gotN := res.Merged, res.Conflicts
		if !bytes.Equal(got, want) || min(gotN, 127) != wantN {
			t.Fatalf("case %d (seed %d): conflicts got %d want %d; outputs differ (%d vs %d bytes)", i, seed, gotN, wantN, len(got), len(want))
		}
	}
}

func TestTextExamples(t *testing.T) {
	l := TextOptions{Labels: Labels{Ours: "L1", Base: "LB", Theirs: "L2"}}
	text := func(b, o, th []byte, l TextOptions) ([]byte, int) {
		r := Text(b, o, th, l)
		return r.Merged, r.Conflicts
	}
	base := []byte("a\nb\nc\n")
	// Edits of adjacent lines conflict in git, and so here.
	got, n := text(base, []byte("a\nB\nc\n"), []byte("a\nb\nC\n"), l)
	if want := "a\n<<<<<<< L1\nB\nc\n||||||| LB\nb\nc\n=======\nb\nC\n>>>>>>> L2\n"; n != 1 || string(got) != want {
		t.Fatalf("adjacent edits: got %q (%d conflicts), want %q", got, n, want)
	}
	got, n = text([]byte("a\nb\nc\nd\ne\n"), []byte("A\nb\nc\nd\ne\n"), []byte("a\nb\nc\nd\nE\n"), l)
	if want := "A\nb\nc\nd\nE\n"; n != 0 || string(got) != want {
		t.Fatalf("disjoint edits: got %q (%d conflicts), want %q", got, n, want)
	}
	got, n = text(base, []byte("a\nX\nc\n"), []byte("a\nY\nc\n"), l)
	if want := "a\n<<<<<<< L1\nX\n||||||| LB\nb\n=======\nY\n>>>>>>> L2\nc\n"; n != 1 || string(got) != want {
		t.Fatalf("overlapping edits: got %q (%d conflicts), want %q", got, n, want)
	}
}
