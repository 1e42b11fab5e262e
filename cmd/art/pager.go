package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"
)

// Output a person reads: `art log` and `art diff` page and color like git
// when stdout is a terminal, and never on a pipe. The pager is ART_PAGER,
// else PAGER, else less (with LESS=FRX when LESS is unset: quit when the
// output fits one screen, pass colors through, leave the screen alone);
// an empty value or "cat" means no pager. Color follows --color
// (auto|always|never); auto means a terminal and no NO_COLOR.

func pagerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-pager", Usage: "do not pipe the output through a pager (ART_PAGER, PAGER, less) on a terminal"},
		&cli.StringFlag{Name: "color", Value: "auto", Usage: "color the output: `WHEN` is auto (a terminal and NO_COLOR unset), always or never"},
	}
}

// humanOutput decides color and starts the pager for a verb's output. It
// replaces e.stdout with the pager's input until done is called; done
// waits for the pager to exit (the user reading) and restores e.stdout.
// With --json, nothing is paged or colored.
func humanOutput(c *cli.Context, e *env) (color bool, done func(), err error) {
	done = func() {}
	if c.Bool("json") {
		return false, done, nil
	}
	tty := isTerminal(e.stdout)
	switch w := c.String("color"); w {
	case "always":
		color = true
	case "never":
		color = false
	case "auto", "":
		color = tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	default:
		return false, done, usagef("--color is auto, always or never, not %q", w)
	}
	if !tty || c.Bool("no-pager") {
		return color, done, nil
	}
	pager, ok := os.LookupEnv("ART_PAGER")
	if !ok {
		if pager, ok = os.LookupEnv("PAGER"); !ok {
			pager = "less"
		}
	}
	if p := strings.TrimSpace(pager); p == "" || p == "cat" {
		return color, done, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return color, done, nil // no pager is not worth failing the verb
	}
	cmd := exec.Command("/bin/sh", "-c", pager)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, e.stdout, e.stderr
	cmd.Env = os.Environ()
	if _, set := os.LookupEnv("LESS"); !set {
		cmd.Env = append(cmd.Env, "LESS=FRX")
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return color, done, nil
	}
	r.Close()
	orig := e.stdout
	e.stdout = w
	return color, func() {
		w.Close()
		cmd.Wait()
		e.stdout = orig
	}, nil
}

// ANSI SGR sequences art uses, as git does for the same things.
const (
	sgrReset  = "\033[m"
	sgrBold   = "\033[1m"
	sgrRed    = "\033[31m"
	sgrGreen  = "\033[32m"
	sgrYellow = "\033[33m"
	sgrCyan   = "\033[36m"
)

// paint wraps s in an SGR sequence when color is on.
func paint(color bool, sgr, s string) string {
	if !color || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// patchColorWriter colors a unified diff line by line as it passes:
// headers bold, hunks cyan, removed lines red, added lines green.
type patchColorWriter struct {
	w       io.Writer
	partial []byte
}

func (p *patchColorWriter) Write(b []byte) (int, error) {
	n := len(b)
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return n, nil
		}
		line := string(p.partial[:i])
		p.partial = p.partial[i+1:]
		if _, err := io.WriteString(p.w, colorPatchLine(line)+"\n"); err != nil {
			return n, err
		}
	}
}

// Flush writes a last line without a newline, if any.
func (p *patchColorWriter) Flush() error {
	if len(p.partial) == 0 {
		return nil
	}
	_, err := io.WriteString(p.w, colorPatchLine(string(p.partial)))
	p.partial = nil
	return err
}

func colorPatchLine(l string) string {
	switch {
	case strings.HasPrefix(l, "diff --art "), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "):
		return paint(true, sgrBold, l)
	case strings.HasPrefix(l, "@@"):
		return paint(true, sgrCyan, l)
	case strings.HasPrefix(l, "+"):
		return paint(true, sgrGreen, l)
	case strings.HasPrefix(l, "-"):
		return paint(true, sgrRed, l)
	}
	return l
}
