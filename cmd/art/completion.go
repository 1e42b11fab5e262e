package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

// Shell completion. The scripts `art completion SHELL` prints are thin:
// they hand the words typed so far to the hidden `art __complete` and offer
// what it prints, one candidate a line, falling back to file names when it
// prints nothing. So bash, zsh and fish complete from the same definitions
// as the help text, and branch names and snapshot ids come from the store
// named by -d/--db on the line or ART_DB.

func newCompletionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		UsageText: "art completion bash|zsh|fish",
		Description: `Completes verbs, flags, branch names and snapshot ids (from the store given with
-d or ART_DB). Install, for example:

   art completion bash > /etc/bash_completion.d/art
   art completion zsh > "${fpath[1]}/_art"
   art completion fish > ~/.config/fish/completions/art.fish`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("art completion takes one shell: bash, zsh or fish")
			}
			script, ok := completionScripts[c.Args().First()]
			if !ok {
				return usagef("no completion for shell %q (bash, zsh or fish)", c.Args().First())
			}
			_, err := fmt.Fprint(e.stdout, script)
			return err
		},
	}
}

var completionScripts = map[string]string{
	"bash": `# bash completion for art (art completion bash)
_art() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local out
	out=$(art __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
	if [ -z "$out" ]; then
		compopt -o default
		COMPREPLY=()
		return 0
	fi
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$out" -- "$cur"))
}
complete -F _art art
`,
	"zsh": `#compdef art
# zsh completion for art (art completion zsh)
_art() {
	local -a opts
	opts=("${(@f)$(art __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if [[ -n "${opts[1]}" ]]; then
		compadd -a opts
	else
		_files
	fi
}
compdef _art art
`,
	"fish": `# fish completion for art (art completion fish)
function __art_complete
	set -l words (commandline -opc) (commandline -ct)
	art __complete $words[2..-1] 2>/dev/null
end
complete -c art -f -a '(__art_complete)'
complete -c art -n 'test -z (__art_complete | string collect)' -F
`,
}

func newCompleteCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:            "__complete",
		Hidden:          true,
		SkipFlagParsing: true,
		Usage:           "print completion candidates for the words typed so far (for the completion scripts)",
		UsageText:       "art __complete WORD...",
		Action: func(c *cli.Context) error {
			for _, s := range complete(c.Context, c.App, c.Args().Slice()) {
				if termtext.Safe(s) { // a store's branch name with control bytes is not offered
					fmt.Fprintln(e.stdout, s)
				}
			}
			return nil
		},
	}
}

// complete returns the candidates for the last of words (the words after
// "art", the last one being typed; it may be empty).
func complete(ctx context.Context, app *cli.App, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	var cmd *cli.Command
	flags := append(append([]cli.Flag{}, app.Flags...), runFlags()...) // bare art is art run
	positional := 0
	for i := 0; i < len(before); i++ {
		w := before[i]
		if w == "--" {
			return nil // the sandbox's command line: files
		}
		if strings.HasPrefix(w, "-") {
			if f := findFlag(flags, w); f != nil && takesValue(f) && !strings.Contains(w, "=") {
				i++
			}
			continue
		}
		var sub *cli.Command
		if cmd == nil {
			sub = app.Command(w)
		} else if positional == 0 {
			sub = cmd.Command(w)
		}
		if sub != nil && !sub.Hidden {
			cmd, flags, positional = sub, sub.Flags, 0
			continue
		}
		positional++
	}
	// A flag's value.
	if n := len(before); n > 0 && strings.HasPrefix(before[n-1], "-") && !strings.Contains(before[n-1], "=") {
		if f := findFlag(flags, before[n-1]); f != nil && takesValue(f) {
			switch f.Names()[0] {
			case "branch", "from":
				return match(storeNames(ctx, before, false), cur)
			case "at":
				return match(storeNames(ctx, before, true), cur)
			case "net":
				return match([]string{"host", "none", "allow"}, cur)
			case "durability":
				return match([]string{"normal", "full"}, cur)
			case "color":
				return match([]string{"auto", "always", "never"}, cur)
			}
			return nil // a file, a number: the shell's own completion
		}
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		for _, f := range flags {
			if bf, ok := f.(*cli.BoolFlag); ok && bf.Hidden {
				continue
			}
			for _, n := range f.Names() {
				if len(n) == 1 {
					out = append(out, "-"+n)
				} else {
					out = append(out, "--"+n)
				}
			}
		}
		return match(out, cur)
	}
	if cmd == nil {
		var out []string
		for _, c := range app.Commands {
			if !c.Hidden {
				out = append(out, c.Name)
			}
		}
		return match(out, cur)
	}
	if len(cmd.Subcommands) > 0 && positional == 0 {
		var out []string
		for _, c := range cmd.Subcommands {
			if !c.Hidden {
				out = append(out, c.Name)
			}
		}
		return match(out, cur)
	}
	switch cmd.Name {
	case "remote": // art remote add|list|remove: its first word is an action
		if positional == 0 {
			return match([]string{"add", "list", "remove"}, cur)
		}
	case "checkout", "diff", "ls", "cat", "blame", "snapshot", "merge":
		return match(storeNames(ctx, before, true), cur)
	case "branch":
		return match(storeNames(ctx, before, false), cur)
	}
	return nil
}

func findFlag(flags []cli.Flag, word string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}

func match(cands []string, prefix string) []string {
	var out []string
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// storeNames lists the branch names (and, with revs, the short ids of the
// newest snapshots) of the store named on the line or by ART_DB. Any
// failure completes nothing: a completion must never print an error.
func storeNames(ctx context.Context, words []string, revs bool) []string {
	path := os.Getenv("ART_DB")
	for i, w := range words {
		switch {
		case (w == "-d" || w == "--db") && i+1 < len(words):
			path = words[i+1]
		case strings.HasPrefix(w, "--db="):
			path = strings.TrimPrefix(w, "--db=")
		}
	}
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	db, err := journal.Open(ctx, path, journal.Options{Read: true, BusyTimeout: 500 * time.Millisecond})
	if err != nil {
		return nil
	}
	defer db.Close()
	var out []string
	bs, _ := db.Branches(ctx)
	for _, b := range bs {
		out = append(out, b.Name)
	}
	if revs {
		snaps, _ := db.Snapshots(ctx, "")
		// The newest first, a screenful at most.
		sort.Slice(snaps, func(i, j int) bool { return snaps[i].Seq > snaps[j].Seq })
		for i := 0; i < len(snaps) && i < 30; i++ {
			out = append(out, snaps[i].ID.Short())
		}
	}
	return out
}

// completeStatus is art __complete's exit status: 0 whatever happened, as
// a shell's completion must not print errors into the command line.
func completeStatus(error) int { return exitOK }
