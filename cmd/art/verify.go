package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newVerifyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check every object's hash, every hash chain and snapshot; name damaged paths",
		UsageText: "art verify -d FILE [--rebuild] [--json]",
		Description: `Re-hashes every object, re-checks each branch's event chain against the count and
head kept outside it, checks every snapshot, and walks every recorded state to find
missing objects and the paths that depend on damaged ones. --rebuild also replays each
branch's whole journal and compares the result with its live tree (replacing a live
tree that disagrees: the journal is the source of truth). Exits 4 when anything is
damaged.

Findings are grouped: a pack that is missing or short is one line naming what it
affects (a store is FILE plus the FILE.packs/ directory beside it: a copy of the
file alone has every large content missing), and damage of one cause is one line
with a count. --json lists every finding.`,
		Flags: []cli.Flag{
			dbFlag(),
			&cli.BoolFlag{Name: "rebuild", Usage: "replay every branch's journal and compare with its live tree"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("verify takes no arguments")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			bar := newProgress(e.stderr)
			rep, err := db.Verify(c.Context, journal.VerifyOptions{Rebuild: c.Bool("rebuild"),
				Progress: func(done, total int) { bar.update("verify: %d/%d objects", done, total) }})
			bar.done()
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if err := writeJSON(e.stdout, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.stdout, "verified %d objects, %d events, %d branches, %d snapshots\n", rep.Objects, rep.Events, rep.Branches, rep.Snapshots)
				printProblems(e.stdout, rep.Problems, db.Path())
				for _, b := range rep.Rebuilt {
					fmt.Fprintf(e.stdout, "rebuilt the live tree of branch %s from its journal\n", termtext.Quote(b))
				}
			}
			if !rep.OK() {
				return &exitCoder{code: exitCorrupt, err: fmt.Errorf("store %s is damaged: %d problems", termtext.Quote(c.String("db")), len(rep.Problems))}
			}
			if !c.Bool("json") {
				fmt.Fprintln(e.stdout, "ok")
			}
			return nil
		},
	}
}

// printProblems prints verify's findings for people: one line per damaged
// pack, and one per cause for the rest (a count, the first few places and
// the paths they affect), so that any damage stays readable; --json has
// every finding.
func printProblems(w io.Writer, problems []journal.Problem, store string) {
	type group struct {
		first journal.Problem
		where []string
		n     int
		paths []string
		aff   int
	}
	var order []string
	groups := map[string]*group{}
	packs := false
	for _, p := range problems {
		if p.What == "pack" {
			packs = true
			fmt.Fprintf(w, "DAMAGED pack %s: %s (%s stored)%s\n", p.Object, termtext.Text(p.Detail), fmtBytes(p.Bytes), affects(p.Affected, p.States, p.Paths))
			continue
		}
		where := p.Object
		if where == "" {
			where = p.Branch
			if p.Seq != 0 {
				where += fmt.Sprintf("@%d", p.Seq)
			}
		}
		key := p.What + "\x00" + causeOf(p.Detail)
		g := groups[key]
		if g == nil {
			g = &group{first: p}
			groups[key] = g
			order = append(order, key)
		}
		g.n++
		if len(g.where) < 3 {
			g.where = append(g.where, where)
		}
		for _, path := range p.Paths {
			if len(g.paths) < 8 && !slices.Contains(g.paths, path) {
				g.paths = append(g.paths, path)
			}
		}
		g.aff += max(p.Affected, len(p.Paths))
	}
	for _, key := range order {
		g := groups[key]
		if g.n == 1 {
			fmt.Fprintf(w, "DAMAGED %s %s: %s\n", g.first.What, termtext.Text(g.where[0]), termtext.Text(g.first.Detail))
			for _, path := range g.first.Paths {
				fmt.Fprintf(w, "        affects %s\n", termtext.Quote(path))
			}
			if more := g.first.Affected - len(g.first.Paths); more > 0 {
				fmt.Fprintf(w, "        and %d more paths\n", more)
			}
			continue
		}
		more := ""
		if g.n > len(g.where) {
			more = ", ..."
		}
		short := make([]string, len(g.where))
		for i, wh := range g.where {
			short[i] = wh
			if len(wh) == 64 && hexRun().MatchString(wh) {
				short[i] = wh[:12]
			}
		}
		fmt.Fprintf(w, "DAMAGED %s %s%s (%d %ss): %s\n", g.first.What, termtext.Text(strings.Join(short, ", ")), more, g.n, g.first.What, termtext.Text(causeOf(g.first.Detail)))
		for _, path := range g.paths {
			fmt.Fprintf(w, "        affects %s\n", termtext.Quote(path))
		}
	}
	if len(groups) > 0 && len(problems) > len(groups) {
		fmt.Fprintln(w, "art verify --json lists every finding")
	}
	if packs {
		fmt.Fprintln(w, "hint: "+packsHint(store))
	}
}

// affects summarizes the places a damaged pack affects.
func affects(n int, states, paths []string) string {
	if n == 0 {
		return "; no recorded state uses it"
	}
	var names []string
	for _, p := range paths {
		_, path, _ := strings.Cut(p, ":")
		if q := termtext.Quote(path); !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	more := ""
	if n > len(paths) {
		more = ", ..."
	}
	return fmt.Sprintf("; affects %d paths in %s: %s%s", n, termtext.Text(strings.Join(states, ", ")), strings.Join(names, ", "), more)
}

// hexRun matches object ids and hashes in a finding's detail. Compiled on
// first use, not at package initialisation: only art verify needs it,
// and every art process would pay for its 64-fold repetition.
var hexRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b[0-9a-f]{64}\b`) })

// offsets matches the numbers a finding gives of one object's place.
var offsets = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b\d+\+\d+\b|\b\d+ bytes\b`) })

// causeOf is a finding's detail without what names one object: findings
// with the same cause group under one line.
func causeOf(detail string) string {
	return offsets().ReplaceAllString(hexRun().ReplaceAllString(detail, "ID"), "N")
}
