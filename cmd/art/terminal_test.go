package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/creack/pty"
)

// A terminal is what answers termios: /dev/null is a character device
// but no terminal, and `art run ... </dev/null >/dev/null` must neither
// get a PTY nor leave the warm daemon's path for it.
func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]*os.File{"/dev/null": null, "a regular file": file, "a pipe": w} {
		if isTerminal(f) {
			t.Errorf("isTerminal(%s) = true", name)
		}
	}
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	defer tty.Close()
	if !isTerminal(tty) {
		t.Error("isTerminal(a pty's terminal) = false")
	}
}
