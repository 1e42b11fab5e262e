package merge

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchSides builds a base of n source-like lines (distinct statements,
// with the repeated braces and blank lines real code has) and two sides
// with edits scattered over it; moves also reorders blocks of lines, the
// case that drives the diff search to its cost cut-offs.
func benchSides(n, edits int, moves bool) (base, ours, theirs []byte) {
	r := rand.New(rand.NewPCG(1, 2))
	lines := make([]string, n)
	for i := range lines {
		switch r.IntN(8) {
		case 0:
			lines[i] = "}"
		case 1:
			lines[i] = ""
		default:
			lines[i] = fmt.Sprintf("\tx%d := f(%d)", i, r.IntN(1000))
		}
	}
	g := genText{r: r, k: 200}
	o, t := lines, lines
	if moves {
		o, t = moveBlocks(r, lines), moveBlocks(r, lines)
	}
	return g.join(lines), g.join(g.edit(o, edits)), g.join(g.edit(t, edits))
}

func benchmarkText(b *testing.B, n, edits int, moves bool) {
	base, ours, theirs := benchSides(n, edits, moves)
	o := TextOptions{Labels: Labels{Ours: "ours", Base: "base", Theirs: "theirs"}}
	b.SetBytes(int64(len(base)))
	b.ResetTimer()
	for range b.N {
		Text(base, ours, theirs, o)
	}
}

// BenchmarkTextSource is a typical source file both sides edited a little.
func BenchmarkTextSource(b *testing.B) { benchmarkText(b, 2000, 10, false) }

// BenchmarkTextEdited is a long file with hundreds of edits on each side.
func BenchmarkTextEdited(b *testing.B) { benchmarkText(b, 5000, 300, false) }

// BenchmarkTextMoves is a 36,000-line file whose blocks both sides reordered.
func BenchmarkTextMoves(b *testing.B) { benchmarkText(b, 36000, 50, true) }
