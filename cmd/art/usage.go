package main

// Usage errors the way git reports them: one line on stderr naming the
// command and the help to read, nothing on stdout, exit status 2; an
// unknown first word gets git's "did you mean". And the front of the
// command line: global flags before the verb, and the original art's
// verb-less form (art [flags] [-- COMMAND...]).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

// usageError marks errors that are the caller's to fix (exit 2).
type usageError struct {
	msg  string
	help string // the help to read: "art log --help"; "" until the command is known
	more string // lines after the first (git's "The most similar command is")
	err  error  // the parse error, when there is one
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return e.err }

// ErrorClass is Usage, whatever the parse error it wraps says.
func (e *usageError) ErrorClass() errclass.Class { return errclass.Usage }

// line is the one line run prints: the message and the help to read.
func (e *usageError) line() string {
	msg := strings.ReplaceAll(e.msg, "\n", " ")
	switch e.help {
	case "-": // the message names its help itself
		return msg
	case "":
		return msg + " (see art help)"
	}
	return msg + " (see " + e.help + ")"
}

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// onUsageError is every command's OnUsageError: urfave/cli calls it with
// the flag package's parse error (unknown flag, missing or bad value)
// instead of printing the command's help on stdout.
func onUsageError(c *cli.Context, err error, _ bool) error {
	name := commandName(c)
	msg := flagMessage(err)
	if name == "" {
		return &usageError{msg: msg, help: "art --help", err: err}
	}
	return &usageError{msg: name + ": " + msg, help: "art " + name + " --help", err: err}
}

// commandName is the command's name below art: "log", "policy suggest".
func commandName(c *cli.Context) string {
	if c.Command == nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(c.Command.FullName(), "art"))
}

// flagMessage rewords the flag package's errors in art's terms: flags
// with their dashes as typed. It reads their text because there is
// nothing else to read: Go's flag package makes them with fmt.Errorf
// (FlagSet.failf; only ErrHelp is a sentinel) and urfave/cli passes them
// on unchanged. Only the wording depends on it: that a parse error is a
// usage error (exit 2) is structural, urfave calling OnUsageError, and
// an unrecognised text is printed as the flag package wrote it.
func flagMessage(err error) string {
	s := err.Error()
	dash := func(name string) string {
		name = strings.TrimLeft(name, "-")
		if len(name) == 1 {
			return "-" + name
		}
		return "--" + name
	}
	if name, ok := strings.CutPrefix(s, "flag provided but not defined: "); ok {
		return "unknown flag " + termtext.Text(dash(name))
	}
	if name, ok := strings.CutPrefix(s, "flag needs an argument: "); ok {
		return "flag " + termtext.Text(dash(name)) + " needs a value"
	}
	return termtext.Text(s)
}

// setUsage wires every command (and subcommand) for git-style usage
// errors: parse errors through onUsageError; a store flag that is
// required checked after parsing (urfave/cli prints the whole help with
// a missing required flag); an action's usage error told which help to
// read; a group of subcommands refusing an unknown one.
func setUsage(cmds []*cli.Command, parent string) {
	for _, cmd := range cmds {
		name := strings.TrimSpace(parent + " " + cmd.Name)
		cmd.OnUsageError = onUsageError
		var needDB bool
		for _, f := range cmd.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "db" && sf.Required {
				sf.Required, needDB = false, true
			}
		}
		if needDB {
			before := cmd.Before
			cmd.Before = func(c *cli.Context) error {
				if c.String("db") == "" {
					return &usageError{msg: name + " needs a store: -d FILE (or ART_DB)", help: "art " + name + " --help"}
				}
				if before != nil {
					return before(c)
				}
				return nil
			}
		}
		if cmd.Action == nil && len(cmd.Subcommands) > 0 {
			cmd.Action = func(c *cli.Context) error {
				if c.Args().Present() {
					return &usageError{msg: fmt.Sprintf("%s: unknown subcommand '%s'", name, termtext.Text(c.Args().First())),
						help: "art " + name + " --help"}
				}
				return cli.ShowSubcommandHelp(c)
			}
		}
		if action := cmd.Action; action != nil {
			cmd.Action = func(c *cli.Context) error {
				return withHelp(action(c), name)
			}
		}
		setUsage(cmd.Subcommands, name)
	}
}

// withHelp tells a usage error from command name's action which help to
// read; the session's usage errors become art's.
func withHelp(err error, name string) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.help == "" {
			ue.help = "art " + name + " --help"
		}
		return err
	}
	var sue *session.UsageError
	if errors.As(err, &sue) {
		return &usageError{msg: err.Error(), help: "art " + name + " --help", err: err}
	}
	return err
}

// unknownCommand is git's answer to a first word that is no verb.
func unknownCommand(app *cli.App, word string) error {
	e := &usageError{msg: fmt.Sprintf("'%s' is not an art command. See 'art help'.", termtext.Text(word)), help: "-"}
	if similar := similarVerbs(app, word); len(similar) == 1 {
		e.more = "\nThe most similar command is\n\t" + similar[0] + "\n"
	} else if len(similar) > 1 {
		e.more = "\nThe most similar commands are\n\t" + strings.Join(similar, "\n\t") + "\n"
	}
	return e
}

// similarVerbs are the visible verbs closest to word, as git's help.c
// picks them: within an edit distance that grows with the word (a
// transposition counts one), or starting with it.
func similarVerbs(app *cli.App, word string) []string {
	best, out := -1, []string(nil)
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			d := editDistance(word, n)
			if strings.HasPrefix(n, word) && len(word) >= 2 {
				d = min(d, 1)
			}
			if d > max(1, len(word)/3) {
				continue
			}
			switch {
			case best < 0 || d < best:
				best, out = d, []string{c.Name}
			case d == best && !contains(out, c.Name):
				out = append(out, c.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and adjacent transpositions cost one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// isProgram reports whether word names a program the sandbox could run:
// a path, or a name found on the host's PATH or the sandbox's.
func isProgram(word string) bool {
	if strings.Contains(word, "/") {
		return true
	}
	if _, err := exec.LookPath(word); err == nil {
		return true
	}
	for _, dir := range filepath.SplitList(sandbox.DefaultPath) {
		if st, err := os.Stat(filepath.Join(dir, word)); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// flagNames maps the names of flags to whether they take a value.
func flagNames(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			m[n] = !isBool
		}
	}
	return m
}

// leadingFlags returns the end of the flags at the front of args[1:]
// (read with known's value-taking flags) and whether known accepts all of
// them.
func leadingFlags(args []string, known map[string]bool) (int, bool) {
	i, all := 1, true
	for i < len(args) && len(args[i]) > 1 && strings.HasPrefix(args[i], "-") && args[i] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		takes, ok := known[name]
		all = all && ok
		if takes && !hasValue {
			i++
		}
		i++
	}
	return min(i, len(args)), all
}

// originalForm reads the front of the command line:
//
//	art VERB ...                  the verb
//	art FLAGS VERB ...            the verb, when it takes every one of FLAGS (art -d ws.db log)
//	art [FLAGS] [-- COMMAND...]   art run: the original art's form; bare art is your shell
//	art [FLAGS] PROGRAM ...       art run too, when PROGRAM is on PATH (art -m ws make)
//
// and a first word that is neither a verb nor a program is a usage error
// with the verbs it may have meant. After "--" a word is always the
// sandbox's command (art -m ws -- ls runs ls).
func originalForm(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return append(args, "run"), nil // bare art: the original's interactive session
	}
	switch args[1] {
	case "-h", "--help", "-help", "--version", "-v":
		return args, nil
	case "help", "h":
		if len(args) > 2 && app.Command(args[2]) == nil && !strings.HasPrefix(args[2], "-") {
			return nil, unknownCommand(app, args[2])
		}
		return args, nil
	}
	run := flagNames(runFlags())
	i, _ := leadingFlags(args, run)
	if i >= len(args) || args[i] == "--" {
		return append([]string{args[0], "run"}, args[1:]...), nil
	}
	word := args[i]
	cmd := app.Command(word)
	if cmd == nil {
		if !isProgram(word) {
			return nil, unknownCommand(app, word)
		}
		return asRun(args, i), nil
	}
	if i == 1 {
		return args, nil // art VERB ...
	}
	// art FLAGS VERB: global flags, if the verb takes them all.
	if j, all := leadingFlags(args, flagNames(cmd.Flags)); all && j < len(args) && args[j] == word {
		out := []string{args[0], word}
		out = append(out, args[1:j]...)
		return append(out, args[j+1:]...), nil
	}
	// Run's flags before a program named like a verb (art -m ws ls), as
	// the original art read it.
	if _, all := leadingFlags(args[:i], run); all && isProgram(word) {
		return asRun(args, i), nil
	}
	// A flag the verb does not take: its own usage error.
	for _, a := range args[1:i] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, ok := flagNames(cmd.Flags)[name]; !ok && strings.HasPrefix(a, "-") {
			return nil, &usageError{msg: fmt.Sprintf("%s: unknown flag %s", word, termtext.Text(a)), help: "art " + word + " --help"}
		}
	}
	return nil, &usageError{msg: fmt.Sprintf("%s: put its flags after the command: art %s FLAGS...", word, word), help: "art " + word + " --help"}
}

// asRun is art run with the flags before args[i] and, after "--", the
// program args[i:]: its own flags are not art's (art python3 -c 1).
func asRun(args []string, i int) []string {
	out := append([]string{args[0], "run"}, args[1:i]...)
	out = append(out, "--")
	return append(out, args[i:]...)
}
