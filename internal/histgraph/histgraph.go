// Package histgraph lays out a history DAG as columns, one row per node,
// newest first, in the style of jj log and git log --graph: every edge runs
// straight down its own column (lanes never move sideways), a node's extra
// parents branch off to the right under it ("├─╮"), and columns that wait
// for the same parent join right above it ("├─╯"). The same layout renders
// as terminal text (Text) and as a self-contained HTML page with an SVG
// drawing (HTML).
//
// It knows nothing of art: the caller gives node ids, parent ids and the
// text of each row, already made safe for where it goes (termtext for a
// terminal; HTML escapes it itself).
package histgraph

// Node is one row of the graph.
type Node struct {
	ID int64
	// Parents, first parent first. Parents that are not among the nodes,
	// or not after this node in the list, are not drawn.
	Parents []int64
	// Glyph marks the node in the text rendering (one terminal column),
	// e.g. "○"; "" is "○".
	Glyph string
}

// Edge is a parent edge as laid out: from row From (the child) down lane
// Lane to row To (the parent).
type Edge struct {
	From, To, Lane int
}

// Row is the layout of one node.
type Row struct {
	Col int // the node's column
	// Before are the text lines drawn above the node's line (columns
	// joining it), After those below it (its extra parents branching off).
	Before, After []string
	// Prefix is the graph part of the node's own line, padded to the
	// graph's width at that row.
	Prefix string
}

// Layout is the whole graph laid out.
type Layout struct {
	Rows  []Row
	Edges []Edge
	Width int // the most columns any row uses
}

// Lay lays nodes out, in the order given (newest first: every parent after
// its children).
func Lay(nodes []Node) Layout {
	index := make(map[int64]int, len(nodes))
	for i, n := range nodes {
		if _, dup := index[n.ID]; !dup {
			index[n.ID] = i
		}
	}
	var l Layout
	var lanes []int64       // the node id each column waits for; 0 = free
	open := map[int][]int{} // lane -> edges running in it, not yet ended
	// avoid is the column a node without parents just left: the next
	// row's new column must not start there, or it would read as that
	// node's parent (or child).
	avoid := -1
	for i, n := range nodes {
		var waiting []int
		for k, id := range lanes {
			if id == n.ID {
				waiting = append(waiting, k)
			}
		}
		var row Row
		if len(waiting) == 0 {
			row.Col = freeLane(&lanes, 0, avoid)
		} else {
			row.Col = waiting[0]
		}
		if len(waiting) > 1 {
			row.Before = append(row.Before, joinLine(lanes, row.Col, waiting[1:]))
		}
		for _, k := range waiting {
			for _, e := range open[k] {
				l.Edges[e].To = i
			}
			delete(open, k)
			lanes[k] = 0
		}
		glyph := n.Glyph
		if glyph == "" {
			glyph = "○"
		}
		row.Prefix = nodeLine(lanes, row.Col, glyph)
		var parents []int64
		for _, p := range n.Parents {
			if j, ok := index[p]; ok && j > i && !containsID(parents, p) {
				parents = append(parents, p)
			}
		}
		if len(parents) > 0 {
			lanes[row.Col] = parents[0]
			open[row.Col] = append(open[row.Col], len(l.Edges))
			l.Edges = append(l.Edges, Edge{From: i, To: -1, Lane: row.Col})
			var targets []int
			var fresh []bool
			for _, p := range parents[1:] {
				k, existing := -1, false
				for j, id := range lanes {
					if id == p && j != row.Col {
						k, existing = j, true
						break
					}
				}
				if k < 0 {
					k = freeLane(&lanes, row.Col+1, avoid)
					lanes[k] = p
				}
				targets, fresh = append(targets, k), append(fresh, !existing)
				open[k] = append(open[k], len(l.Edges))
				l.Edges = append(l.Edges, Edge{From: i, To: -1, Lane: k})
			}
			if len(targets) > 0 {
				row.After = append(row.After, splitLine(lanes, row.Col, targets, fresh))
			}
		}
		avoid = -1
		if len(parents) == 0 {
			avoid = row.Col
		}
		for len(lanes) > 0 && lanes[len(lanes)-1] == 0 {
			lanes = lanes[:len(lanes)-1]
		}
		l.Width = max(l.Width, len(lanes), row.Col+1)
		l.Rows = append(l.Rows, row)
	}
	return l
}

// freeLane returns the first free column at or after from other than
// avoid, growing lanes when there is none (the column is still free: the
// caller fills it).
func freeLane(lanes *[]int64, from, avoid int) int {
	for k := from; ; k++ {
		if k >= len(*lanes) {
			*lanes = append(*lanes, make([]int64, k+1-len(*lanes))...)
		}
		if (*lanes)[k] == 0 && k != avoid {
			return k
		}
	}
}

// nodeLine draws the node's line: its glyph in its column, the other
// busy columns as "│".
func nodeLine(lanes []int64, col int, glyph string) string {
	n := col + 1
	for k, id := range lanes {
		if id != 0 {
			n = max(n, k+1)
		}
	}
	b := make([]string, 0, 2*n)
	for k := 0; k < n; k++ {
		switch {
		case k == col:
			b = append(b, glyph)
		case k < len(lanes) && lanes[k] != 0:
			b = append(b, "│")
		default:
			b = append(b, " ")
		}
		b = append(b, " ")
	}
	return concat(b)
}

// joinLine draws the columns in ends joining column col from the right
// (or left): "├─╯", "├─┴─╯", "╰─┤".
func joinLine(lanes []int64, col int, ends []int) string {
	lo, hi := col, col
	for _, k := range ends {
		lo, hi = min(lo, k), max(hi, k)
	}
	return crossLine(lanes, lo, hi, func(k int) string {
		switch {
		case k == col:
			return pick(k, lo, hi, "├", "┤", "┼")
		case containsInt(ends, k):
			return pick(k, lo, hi, "╰", "╯", "┴")
		}
		return ""
	})
}

// splitLine draws col's extra parents branching off to columns targets:
// a new column opens with "╮" (or "╭"), an existing one is joined ("┤").
func splitLine(lanes []int64, col int, targets []int, fresh []bool) string {
	lo, hi := col, col
	for _, k := range targets {
		lo, hi = min(lo, k), max(hi, k)
	}
	return crossLine(lanes, lo, hi, func(k int) string {
		if k == col {
			return pick(k, lo, hi, "├", "┤", "┼")
		}
		for i, t := range targets {
			if t == k && fresh[i] {
				return pick(k, lo, hi, "╭", "╮", "┬")
			}
			if t == k {
				return pick(k, lo, hi, "├", "┤", "┼")
			}
		}
		return ""
	})
}

// crossLine draws a horizontal connection from column lo to hi: end(k)
// gives the glyph of a column that takes part ("" for one that does
// not); busy columns crossed show "┼", free ones "─", and columns outside
// [lo, hi] their "│" or nothing.
func crossLine(lanes []int64, lo, hi int, end func(int) string) string {
	n := max(len(lanes), hi+1)
	b := make([]string, 0, 2*n)
	for k := 0; k < n; k++ {
		busy := k < len(lanes) && lanes[k] != 0
		g := ""
		if k >= lo && k <= hi {
			g = end(k)
		}
		switch {
		case g != "":
		case k > lo && k < hi && busy:
			g = "┼"
		case k > lo && k < hi:
			g = "─"
		case busy:
			g = "│"
		default:
			g = " "
		}
		gap := " "
		if k >= lo && k < hi {
			gap = "─"
		}
		b = append(b, g, gap)
	}
	return trimRight(concat(b))
}

// pick chooses a glyph by where column k is on a horizontal line from lo
// to hi: its left end, its right end, or in between.
func pick(k, lo, hi int, left, right, middle string) string {
	switch {
	case k == lo && k < hi:
		return left
	case k == hi && k > lo:
		return right
	}
	return middle
}

func containsID(ids []int64, id int64) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

func containsInt(ks []int, k int) bool {
	for _, v := range ks {
		if v == k {
			return true
		}
	}
	return false
}

func concat(parts []string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return string(b)
}

func trimRight(s string) string {
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}
