package histgraph

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// Cell is a piece of a row's text in the HTML page: Class names its CSS
// class (one of the page's: id, time, branch, kind, desc, snap, note,
// warn), Text is shown escaped.
type Cell struct {
	Class, Text string
}

// Jump is a non-parent edge drawn dashed from row From to row To (a
// branch jumping back to an older state).
type Jump struct {
	From, To int
}

// Page is what WriteHTML shows besides the layout.
type Page struct {
	Title string
	Rows  [][]Cell // Rows[i] is the text of layout row i
	Jumps []Jump
}

const (
	rowH   = 24
	colW   = 16
	padX   = 12
	radius = 4.5
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"}

// pageCSS is the page's only style: no fonts, images or scripts come from
// anywhere (the page's Content-Security-Policy forbids it too).
const pageCSS = `body{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;margin:16px;color:#222;background:#fff}
h1{font-size:15px;margin:0 0 12px}
.g{position:relative}
.g svg{position:absolute;left:0;top:0}
.r{height:24px;line-height:24px;white-space:pre;overflow:hidden;text-overflow:ellipsis}
.id{font-weight:bold}.time{color:#888}.branch{color:#4e79a7}.kind{color:#59a14f}
.snap{color:#b8860b}.note{color:#888}.warn{color:#c0392b}`

// WriteHTML writes a self-contained HTML page of the layout: inline CSS and
// SVG, no script and no network asset; every text is HTML-escaped.
func WriteHTML(w io.Writer, l Layout, p Page) error {
	var b strings.Builder
	esc := html.EscapeString
	width := padX*2 + colW*max(l.Width-1, 0)
	jumpX := width + 8
	if len(p.Jumps) > 0 {
		width += 24
	}
	height := rowH * len(l.Rows)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style></head><body>\n<h1>%s</h1>\n", esc(p.Title), pageCSS, esc(p.Title))
	fmt.Fprintf(&b, "<div class=\"g\" style=\"padding-left:%dpx\">\n", width+8)
	fmt.Fprintf(&b, "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", width, height, width, height)
	b.WriteString("<defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"7\" refY=\"4\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#999\"/></marker></defs>\n")
	x := func(col int) float64 { return float64(padX + col*colW) }
	y := func(row int) float64 { return float64(row*rowH + rowH/2) }
	for _, e := range l.Edges {
		if e.To < 0 || e.From >= len(l.Rows) || e.To >= len(l.Rows) {
			continue
		}
		x1, y1 := x(l.Rows[e.From].Col), y(e.From)
		xl := x(e.Lane)
		x2, y2 := x(l.Rows[e.To].Col), y(e.To)
		half := float64(rowH) / 2
		var d strings.Builder
		fmt.Fprintf(&d, "M%g %g", x1, y1)
		if xl != x1 {
			fmt.Fprintf(&d, " Q%g %g %g %g", xl, y1, xl, y1+half)
		}
		if xl != x2 {
			fmt.Fprintf(&d, " L%g %g Q%g %g %g %g", xl, y2-half, xl, y2, x2, y2)
		} else {
			fmt.Fprintf(&d, " L%g %g", x2, y2)
		}
		fmt.Fprintf(&b, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", d.String(), palette[e.Lane%len(palette)])
	}
	for n, j := range p.Jumps {
		jx := jumpX + 5*(n%4) // side by side, not on top of each other
		if j.From < 0 || j.To < 0 || j.From >= len(l.Rows) || j.To >= len(l.Rows) {
			continue
		}
		x1, y1 := x(l.Rows[j.From].Col), y(j.From)
		x2, y2 := x(l.Rows[j.To].Col), y(j.To)
		fmt.Fprintf(&b, "<path d=\"M%g %g C%d %g %d %g %g %g\" fill=\"none\" stroke=\"#999\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\" marker-end=\"url(#arrow)\"/>\n",
			x1+radius, y1, jx, y1, jx, y2, x2+radius+1, y2)
	}
	for i, r := range l.Rows {
		fmt.Fprintf(&b, "<circle cx=\"%g\" cy=\"%g\" r=\"%g\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1.5\"/>\n",
			x(r.Col), y(i), radius, palette[r.Col%len(palette)])
	}
	b.WriteString("</svg>\n")
	for i := range l.Rows {
		b.WriteString("<div class=\"r\">")
		if i < len(p.Rows) {
			for k, c := range p.Rows[i] {
				if k > 0 {
					b.WriteString("  ")
				}
				fmt.Fprintf(&b, "<span class=\"%s\">%s</span>", esc(c.Class), esc(c.Text))
			}
		}
		b.WriteString("</div>\n")
	}
	b.WriteString("</div>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
