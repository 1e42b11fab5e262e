package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/urfave/cli/v2"
)

// checkCaptureDir refuses to capture dir into store when -m was not given
// (it defaults to the current directory, as in the original art) and dir
// is a directory nobody means to hand to an agent by accident: the root
// directory, the user's home directory (and, under sudo, the invoking
// user's), or one that holds the store itself. Naming the directory with
// -m captures it all the same.
func checkCaptureDir(c *cli.Context, dir, store string, in procInputs) error {
	if c.IsSet("mount") || store == "" {
		return nil
	}
	why := captureRisk(dir, store, in)
	if why == "" {
		return nil
	}
	abs := in.abs(dir)
	hint := "name the workspace with -m DIR"
	if abs != "/" {
		hint += "; -m " + termtext.Word(abs) + " captures this directory all the same"
	}
	return withHint(usagef("not capturing %s (%s): -m defaults to the current directory", termtext.Quote(abs), why), hint)
}

// captureRisk says why capturing dir is refused by default, or "".
func captureRisk(dir, store string, in procInputs) string {
	d := canonical(in.abs(dir))
	if d == "" {
		return ""
	}
	if d == "/" {
		return "the root directory"
	}
	for _, h := range homeDirs(in.getenv) {
		if d == canonical(in.abs(h)) {
			return "a home directory"
		}
	}
	s := canonical(in.abs(store))
	if s == "" {
		// Not created yet: its directory decides.
		if p := canonical(filepath.Dir(in.abs(store))); p != "" {
			s = filepath.Join(p, filepath.Base(store))
		}
	}
	for _, f := range []string{s, cas.PacksDir(s)} {
		if f != "" && (f == d || strings.HasPrefix(f, d+"/")) {
			return "it holds the store " + termtext.Quote(store)
		}
	}
	return ""
}

// homeDirs are the home directories of the user art runs as ($HOME, and
// the account's) and, under sudo, of the user who ran sudo.
func homeDirs(getenv func(string) string) []string {
	var out []string
	if h := getenv("HOME"); h != "" {
		out = append(out, h)
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		out = append(out, u.HomeDir)
	}
	if name := getenv("SUDO_USER"); name != "" {
		if u, err := user.Lookup(name); err == nil && u.HomeDir != "" {
			out = append(out, u.HomeDir)
		}
	}
	return out
}

// procOwn are this process's inputs (ownInputs) for the verbs that read
// no more of them than checkCaptureDir and sandboxUser: a working
// directory that cannot be read leaves relative paths relative.
func procOwn() procInputs {
	in, err := ownInputs()
	if err != nil {
		in = procInputs{getenv: os.Getenv, stdoutTTY: isTerminal(os.Stdout)}
	}
	return in
}

// canonical is p absolute with symlinks resolved, or "" if it does not
// exist.
func canonical(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return ""
	}
	return r
}
