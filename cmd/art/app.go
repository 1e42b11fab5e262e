package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

// Exit codes. A sandboxed command's own status passes through unchanged
// (art run); these are art's own.
const (
	exitOK       = 0
	exitFailure  = 1 // anything else: I/O, a refused operation
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // no such store, branch, revision or path
	exitCorrupt  = 4 // the store failed verification
)

const exitCodesHelp = `EXIT STATUS:
   0   success
   1   failure (I/O error, refused operation)
   2   usage error (bad flags or arguments)
   3   not found (store, branch, revision or path)
   4   corrupt store (a hash did not match; run art verify)
   130 interrupted (128+N for signal N: 130 Ctrl-C, 143 SIGTERM); one line says what was recorded
`

// env is what a command needs from the process; tests supply their own.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// hinted adds a hint the user can act on to an error.
type hinted struct {
	err  error
	hint string
}

func (e *hinted) Error() string { return e.err.Error() }
func (e *hinted) Unwrap() error { return e.err }

func withHint(err error, hint string) error { return &hinted{err: err, hint: hint} }

// exitCoder lets a command choose its exit status (verify with damage).
type exitCoder struct {
	code int
	err  error
}

func (e *exitCoder) Error() string { return e.err.Error() }
func (e *exitCoder) Unwrap() error { return e.err }

func newApp(e *env) *cli.App {
	app := &cli.App{
		Name:      "art",
		Usage:     "run AI agents in a sandbox with a full, rewindable history",
		UsageText: "art [run flags] [-- COMMAND...]   (same as art run; also art [run flags] PROGRAM [ARGS...])\n   art [command flags] command [command flags] [arguments...]",
		Description: `art keeps every change an agent makes in a store (-d FILE.db): content-addressed,
hash-chained, snapshotted. A store is the SQLite file FILE.db plus the directory
FILE.db.packs/ beside it, which holds the bytes of large contents: cp FILE.db alone
copies a store whose large files are missing. art backup -d FILE.db NEW.db copies a
store, history included, consistently even while it is in use. States are named by
revisions:

   NAME      the head of branch NAME (the default branch is main)
   HEX       a snapshot id or a unique prefix of it (4+ hex digits)
   @SEQ      the state right after journal event SEQ
   REV~N     N snapshots before REV (main~1: the snapshot before the latest)`,
		Writer:                    e.stdout,
		ErrWriter:                 e.stderr,
		Reader:                    e.stdin,
		HideHelpCommand:           false,
		UseShortOptionHandling:    true,
		ExitErrHandler:            func(*cli.Context, error) {}, // run maps errors to codes
		CustomAppHelpTemplate:     cli.AppHelpTemplate + "\n" + exitCodesHelp,
		DisableSliceFlagSeparator: true, // --env K=a,b is one entry
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print art's version and exit (art version --json for programs)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				return printVersion(e, false)
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			newRunCommand(e),
			newPushCommand(e),
			newPullCommand(e),
			newLogCommand(e),
			newStatusCommand(e),
			newDuCommand(e),
			newSnapshotCommand(e),
			newBranchCommand(e),
			newCheckoutCommand(e),
			newUndoCommand(e),
			newMergeCommand(e),
			newDiffCommand(e),
			newLsCommand(e),
			newCatCommand(e),
			newVerifyCommand(e),
			newBackupCommand(e),
			newForgetCommand(e),
			newGCCommand(e),
			newMountCommand(e),
			newExecCommand(e),
			newMCPCommand(e),
			newPolicyCommand(e),
			newNetBridgeCommand(e),
			newBlameCommand(e),
			newRemoteCommand(e),
			newVersionCommand(e),
			newDoctorCommand(e),
			newCompletionCommand(e),
			newCompleteCommand(e),
			newWarmDaemonCommand(e),
			newManCommand(e),
		},
		OnUsageError: onUsageError,
	}
	setUsage(app.Commands, "")
	return app
}

// run executes art with args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	app := newApp(e)
	if len(args) > 1 && args[1] == "__complete" {
		// The words being completed are data, not this command's flags.
		return completeStatus(app.RunContext(ctx, args))
	}
	args, err := originalForm(app, args)
	if err == nil {
		err = app.RunContext(ctx, permuteArgs(app, args))
		if len(args) > 1 && args[1] != session.WarmDaemonCommand && yieldedWarm(err) {
			// Refused only because an idle warm daemon held the branch:
			// it has let go, and the verb runs again (the lock is checked
			// in the transaction that would have changed the branch, so
			// the refused attempt changed nothing).
			err = newApp(e).RunContext(ctx, permuteArgs(app, args))
		}
	}
	return exitStatus(ctx, err, stderr)
}

// exitStatus is art's exit status for a verb that ended with err (nil:
// success), its message written to stderr; ctx is the verb's, cancelled
// by the signal that interrupted it if one did.
func exitStatus(ctx context.Context, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var se *silentExit
	if errors.As(err, &se) {
		return se.code
	}
	if sig, ok := interruptedBy(ctx); ok {
		// A signal ended the verb: 128+N, and one line on what was kept.
		code, line := interruptedLine(sig, err)
		fmt.Fprintln(stderr, line)
		return code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		// git's way: one line (and, for an unknown verb, the similar
		// ones), no help text.
		line := "art: " + ue.line()
		if h := (*hinted)(nil); errors.As(err, &h) {
			line += " (hint: " + h.hint + ")"
		}
		fmt.Fprintln(stderr, line)
		fmt.Fprint(stderr, ue.more)
		return exitUsage
	}
	code, msg, hint := classify(err)
	var h *hinted
	if errors.As(err, &h) {
		hint = h.hint
	}
	// Errors quote the names they carry (termtext); an error from below
	// that did not is escaped here, so no message can drive the terminal.
	line := "art: " + termtext.Text(strings.ReplaceAll(msg, "\n", " "))
	if hint != "" {
		line += " (hint: " + hint + ")"
	}
	fmt.Fprintln(stderr, line)
	return code
}

// exitCodes is the CLI's table over the error classes (package
// internal/errclass, where every sentinel says its class): an error's exit
// status is its class's.
var exitCodes = map[errclass.Class]int{
	errclass.Failure:         exitFailure,
	errclass.CommandNotFound: 127, // the shell's status for it (art net-bridge)
	errclass.Usage:           exitUsage,
	errclass.Conflict:        exitFailure,
	errclass.Corrupt:         exitCorrupt,
	errclass.Unavailable:     exitFailure,
	errclass.Permission:      exitFailure,
	errclass.NotFound:        exitNotFound,
	errclass.Invalid:         exitFailure,
}

// classHints are the default hints: the first row of the error's class
// whose test matches it gives the hint (a command's own withHint wins).
var classHints = []struct {
	class errclass.Class
	is    func(error) bool
	hint  string
}{
	{errclass.Usage, isUsage, "see art help"},
	{errclass.Conflict, isBranchInUse, "end that session first (art status lists them), or work on another branch: art run --branch NAME"},
	{errclass.Corrupt, always, "the store is damaged; art verify shows what is affected"},
	{errclass.Unavailable, is(overlay.ErrNoFUSE), "make /dev/fuse usable by this user (chmod 0666 /dev/fuse, or join the group owning it); art doctor checks this host; without -d, art run works in direct mode (no history)"},
	{errclass.Permission, journal.IsReadOnly, "this user cannot write the file or its directory, or the file system is read-only; read verbs (log, status, ls, cat, diff, verify) still work"},
	{errclass.NotFound, is(journal.ErrNotStore), "-d names the store file art push -m DIR -d FILE made"},
	{errclass.NotFound, is(journal.ErrBranchNotFound), "art branch lists the branches"},
	{errclass.NotFound, is(journal.ErrRevNotFound, journal.ErrAmbiguous), "art log lists snapshots, art branch lists branches"},
	{errclass.Usage, is(journal.ErrBadRev), "REV is NAME, HEX, @SEQ or REV~N"},
	{errclass.NotFound, is(journal.ErrRemoteNotFound), "art remote list shows the remotes"},
	{errclass.Unavailable, journal.DiskFull, "the file system is full: free space there (art gc -d FILE gives back what no state needs)"},
}

func is(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

func always(error) bool { return true }

func isUsage(err error) bool {
	var ue *usageError
	var sue *session.UsageError
	return errors.As(err, &ue) || errors.As(err, &sue)
}

// yieldedWarm says whether err is a verb refused for a branch lock held
// by an idle warm daemon (art run --warm) that, asked, has now given the
// branch up (session.YieldWarm). This is the one place every verb's
// lock conflict passes through; a daemon in the middle of a run is a live
// session and keeps the branch (the verb's error stands).
func yieldedWarm(err error) bool {
	var inUse *session.BranchInUseError
	if !errors.As(err, &inUse) || inUse.Store == "" {
		return false
	}
	ok, _ := session.YieldWarm(inUse.Store, inUse.Branch, inUse.PID)
	return ok
}

func isBranchInUse(err error) bool {
	var inUse *session.BranchInUseError
	return errors.As(err, &inUse)
}

// classify maps an error to an exit status, its message and a default
// hint the user can act on: a command's own status (exitCoder), else
// its class's (exitCodes, classHints).
func classify(err error) (code int, msg, hint string) {
	msg = err.Error()
	var ec *exitCoder
	if errors.As(err, &ec) {
		return ec.code, msg, ""
	}
	class := errclass.Of(err)
	for _, h := range classHints {
		if h.class == class && h.is(err) {
			hint = h.hint
			break
		}
	}
	return exitCodes[class], msg, hint
}

// permuteArgs moves a subcommand's flags in front of its positional
// arguments, so `art branch try --from main~1` works: urfave/cli v2 stops
// parsing flags at the first positional argument. Everything after "--" is
// left alone.
func permuteArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	i := 1
	// Global flags before the command name.
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "--" {
		out = append(out, args[i])
		i++
	}
	if i >= len(args) {
		return out
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return append(out, args[i:]...)
	}
	out = append(out, args[i])
	i++
	for i < len(args) && cmd.Command(args[i]) != nil { // art policy suggest
		cmd = cmd.Command(args[i])
		out = append(out, args[i])
		i++
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, pos []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i:]...)
			break
		}
		if len(a) > 1 && strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	out = append(out, flags...)
	if len(pos) > 0 && pos[0] != "--" {
		out = append(out, "--")
	}
	return append(out, pos...)
}
