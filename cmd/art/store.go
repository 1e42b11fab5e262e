package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/internal/units"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// Flags shared by the store verbs.
func dbFlag() cli.Flag {
	return &cli.StringFlag{Name: "db", Aliases: []string{"d"}, Usage: "store `FILE`: the SQLite file, plus FILE.packs/ beside it for large contents (copy both, or use art backup)", EnvVars: []string{"ART_DB"}, Required: true}
}

func durabilityFlag() cli.Flag {
	return &cli.StringFlag{Name: "durability", Value: "normal",
		Usage: "`normal` (survives a crash of art) or full (also survives power loss; an fsync per commit)"}
}

func branchFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "branch", Aliases: []string{"b"}, Value: journal.DefaultBranch, Usage: usage}
}

// branchName is the branch a command or request that names none works on:
// the default branch. It is filled in here, at the edge (flags, exec and
// MCP requests), once; session below requires a name.
func branchName(b string) string {
	if b == "" {
		return journal.DefaultBranch
	}
	return b
}

// branchScope is the branch a read verb shows: --branch, or "" (every
// branch) with --all.
func branchScope(c *cli.Context) string {
	if c.Bool("all") {
		return ""
	}
	return c.String("branch")
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON on stdout"}
}

// openStore opens the -d store for a verb that writes it; create makes it
// when missing.
func openStore(c *cli.Context, create bool) (*journal.DB, error) {
	return openStoreOpts(c, journal.Options{Create: create})
}

// openStoreRead opens the -d store for a read verb: never created,
// migrated or converted, and read-only (SQLite mode=ro) when this user
// cannot write it (journal.Options.Read).
func openStoreRead(c *cli.Context) (*journal.DB, error) {
	return openStoreOpts(c, journal.Options{Read: true})
}

func openStoreOpts(c *cli.Context, opts journal.Options) (*journal.DB, error) {
	path := c.String("db")
	if path == "" {
		return nil, usagef("-d FILE is required")
	}
	create := opts.Create
	opts.Durability = journal.Durability(c.String("durability"))
	if c.String("durability") == "" {
		opts.Durability = journal.DurabilityNormal
	}
	db, err := journal.Open(c.Context, path, opts)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, withHint(err, "create a store with: art push -m DIR -d "+path)
	}
	if err == nil {
		db.Recovered().Report(c.App.ErrWriter)
	}
	return db, err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).Local().Format("2006-01-02 15:04:05")
}

// fmtBytes prints a byte count for people (IEC units).
func fmtBytes(n int64) string { return units.FormatSize(n) }

// isTerminal reports whether w is a terminal (progress bars, the pager
// and a run's PTY only there). A terminal is what answers the termios
// request: a character device need not be one (/dev/null is one, and a
// run with </dev/null >/dev/null is no interactive run).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn() // not Fd: it would make the file blocking
	if err != nil {
		return false
	}
	tty := false
	rc.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		tty = err == nil
	})
	return tty
}

// progress draws a one-line progress indicator on a terminal.
type progress struct {
	w    io.Writer
	on   bool
	last time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, on: isTerminal(w)} }

func (p *progress) update(format string, a ...any) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprint(p.w, "\r\033[K"+termtext.Text(fmt.Sprintf(format, a...))) // a line may name a directory
}

func (p *progress) done() {
	if p.on && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
