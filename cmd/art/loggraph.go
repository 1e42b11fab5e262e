package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/artrt/art/internal/histgraph"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

// graphOps reads what art log --graph shows: the history of --branch, or
// with --all every op; the newest --limit of them.
func graphOps(c *cli.Context, db *journal.DB) ([]journal.GraphOp, error) {
	ops, err := db.Graph(c.Context, journal.GraphQuery{Branch: branchScope(c)})
	if err != nil {
		return nil, err
	}
	if n := c.Int("limit"); n > 0 && len(ops) > n {
		ops = ops[:n]
	}
	return ops, nil
}

// graphLayout lays ops out: "@" marks the newest op of the current
// branch (--branch), "●" an op that took a snapshot.
func graphLayout(ops []journal.GraphOp, current string) histgraph.Layout {
	nodes := make([]histgraph.Node, len(ops))
	head := false
	for i := range ops {
		o := &ops[i]
		nodes[i] = histgraph.Node{ID: o.ID, Parents: o.Parents}
		switch {
		case !head && !o.Deleted && o.Branch == current:
			nodes[i].Glyph, head = "@", true
		case len(o.Snapshots) > 0:
			nodes[i].Glyph = "●"
		}
	}
	return histgraph.Lay(nodes)
}

// jumpNote says where a checkout or undo moved its branch.
func jumpNote(o *journal.GraphOp, byID map[int64]*journal.GraphOp) string {
	if o.Jump == 0 {
		return ""
	}
	if t := byID[o.Jump]; t != nil && t.BranchID != o.BranchID {
		return fmt.Sprintf("↶ to op %d on %s", o.Jump, termtext.Quote(t.Branch))
	}
	return fmt.Sprintf("↶ back to op %d", o.Jump)
}

func indexGraph(ops []journal.GraphOp) map[int64]*journal.GraphOp {
	m := make(map[int64]*journal.GraphOp, len(ops))
	for i := range ops {
		m[ops[i].ID] = &ops[i]
	}
	return m
}

// logGraph prints art log --graph (--json: the ops with their parents).
func logGraph(c *cli.Context, e *env, db *journal.DB, color bool) error {
	ops, err := graphOps(c, db)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(e.stdout, ops)
	}
	byID := indexGraph(ops)
	lines := make([]string, len(ops))
	for i := range ops {
		o := &ops[i]
		line := opLine(color, &o.OpInfo)
		for _, s := range o.Snapshots {
			line += "  " + paint(color, sgrYellow, "snapshot "+s.ID.Short())
			if s.Message != o.Description {
				line += " " + termtext.Quoted(s.Message)
			}
		}
		if n := jumpNote(o, byID); n != "" {
			line += "  " + paint(color, sgrCyan, n)
		}
		lines[i] = line
	}
	return histgraph.WriteText(e.stdout, graphLayout(ops, c.String("branch")), lines)
}

// logGraphHTML writes art log --graph --html FILE ("-": stdout). Every
// text on the page is what the terminal would show (termtext), and the
// page escapes it again as HTML.
func logGraphHTML(c *cli.Context, e *env, db *journal.DB) error {
	if c.Bool("json") {
		return usagef("--html writes a page, --json prints JSON: choose one")
	}
	ops, err := graphOps(c, db)
	if err != nil {
		return err
	}
	byID := indexGraph(ops)
	page := histgraph.Page{Rows: make([][]histgraph.Cell, len(ops))}
	scope := "branch " + termtext.Quote(c.String("branch"))
	if c.Bool("all") {
		scope = "every branch"
	}
	page.Title = fmt.Sprintf("art history of %s: %s", termtext.Quote(filepath.Base(c.String("db"))), scope)
	index := map[int64]int{}
	for i := range ops {
		index[ops[i].ID] = i
	}
	for i := range ops {
		o := &ops[i]
		row := []histgraph.Cell{
			{Class: "id", Text: fmt.Sprintf("op %d", o.ID)},
			{Class: "time", Text: fmtTime(o.Start)},
			{Class: "branch", Text: termtext.Quote(o.Branch)},
			{Class: "kind", Text: termtext.Text(o.Kind)},
			{Class: "desc", Text: termtext.Text(o.Description)},
		}
		if st := opStatus(false, &o.OpInfo); st != "" {
			row = append(row, histgraph.Cell{Class: "warn", Text: st[2:]})
		}
		for _, s := range o.Snapshots {
			t := "snapshot " + s.ID.Short()
			if s.Message != o.Description {
				t += " " + termtext.Quoted(s.Message)
			}
			row = append(row, histgraph.Cell{Class: "snap", Text: t})
		}
		if n := jumpNote(o, byID); n != "" {
			row = append(row, histgraph.Cell{Class: "note", Text: n})
			if j, ok := index[o.Jump]; ok {
				page.Jumps = append(page.Jumps, histgraph.Jump{From: i, To: j})
			}
		}
		page.Rows[i] = row
	}
	var b bytes.Buffer
	if err := histgraph.WriteHTML(&b, graphLayout(ops, c.String("branch")), page); err != nil {
		return err
	}
	path := c.String("html")
	if path == "-" {
		_, err := e.stdout.Write(b.Bytes())
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", termtext.Quote(path), err)
	}
	fmt.Fprintf(e.stderr, "art: wrote the graph of %d operations to %s\n", len(ops), termtext.Quote(path))
	return nil
}
