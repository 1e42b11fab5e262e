package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// artOnTTY runs the CLI in-process with stdout on a terminal (a PTY) and
// returns what reached the terminal.
func artOnTTY(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var got bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&got, ptmx); close(read) }()
	var errb bytes.Buffer
	code := run(context.Background(), append([]string{"art"}, args...), strings.NewReader(""), tty, &errb)
	tty.Close()
	<-read
	if code != 0 {
		t.Fatalf("art %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return strings.ReplaceAll(got.String(), "\r\n", "\n")
}

func TestPagerAndColor(t *testing.T) {
	ws, db := newWorkspace(t)
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	writeFile(t, filepath.Join(ws, "main.py"), "print('v2')\n")
	mustArt(t, "push", "-q", "-m", ws, "-d", db)
	// The pager: a script that marks every line it is given.
	pager := filepath.Join(t.TempDir(), "pager")
	if err := os.WriteFile(pager, []byte("#!/bin/sh\nsed 's/^/PAGED:/'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	red, green := sgrRed+"-print('hello')"+sgrReset, sgrGreen+"+print('v2')"+sgrReset

	out := artOnTTY(t, map[string]string{"ART_PAGER": pager, "NO_COLOR": "", "TERM": "xterm"}, "diff", "-d", db, "main~1", "main", "--patch")
	if !strings.Contains(out, "PAGED:") || !strings.Contains(out, red) || !strings.Contains(out, green) {
		t.Errorf("diff --patch on a terminal: want paged and colored output, got %q", out)
	}
	out = artOnTTY(t, map[string]string{"ART_PAGER": pager, "NO_COLOR": "1", "TERM": "xterm"}, "log", "-d", db)
	if !strings.Contains(out, "PAGED:op ") || strings.Contains(out, "\033[") {
		t.Errorf("log on a terminal with NO_COLOR: want paged, uncolored output, got %q", out)
	}
	out = artOnTTY(t, map[string]string{"ART_PAGER": pager, "NO_COLOR": "", "TERM": "xterm"}, "log", "-d", db, "--no-pager", "--color", "never")
	if strings.Contains(out, "PAGED:") || strings.Contains(out, "\033[") || !strings.Contains(out, "op ") {
		t.Errorf("log --no-pager --color never: got %q", out)
	}
	// Never on a pipe, unless color is asked for.
	t.Setenv("ART_PAGER", pager)
	if out := mustArt(t, "diff", "-d", db, "main~1", "main", "--patch"); strings.Contains(out, "PAGED:") || strings.Contains(out, "\033[") {
		t.Errorf("diff on a pipe was paged or colored: %q", out)
	}
	if out := mustArt(t, "diff", "-d", db, "main~1", "main", "--patch", "--color", "always"); !strings.Contains(out, red) || strings.Contains(out, "PAGED:") {
		t.Errorf("diff --color always on a pipe: %q", out)
	}
	if _, errs, code := art(t, "log", "-d", db, "--color", "sometimes"); code != exitUsage {
		t.Errorf("--color sometimes: exit %d, %s", code, errs)
	}
}
