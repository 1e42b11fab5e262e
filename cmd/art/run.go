package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/internal/units"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/retention"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/session"
	"github.com/artrt/art/workspace"
	"github.com/urfave/cli/v2"
)

const runDescription = `Runs COMMAND (default: your login shell) in a bubblewrap sandbox. The host root is
visible read-only; /tmp, /run, /home and /root are private tmpfs; /home/agent is the
agent's home, with the workspace (-m DIR, default .) at /home/agent/<basename of DIR>.

With -d FILE (overlay mode) /home/agent is a FUSE copy-on-write overlay of the store's
branch: the host workspace is captured first (an incremental push) and is never written;
every change is journaled, the session is recorded in art log and ends with a snapshot.
art pull -m DIR -d FILE writes a state back to the host. Without -d (direct mode) the
workspace is bound read-write and nothing is recorded.

The command's exit status passes through: 124 after --timeout, 128+N when it was
killed by signal N. A one-line summary goes to stderr at the end unless --quiet.
If the store cannot keep the sandbox's writes (a full disk), every later change in the
sandbox fails, art names the paths not kept (even with --quiet) and exits 1.

Several runs may use one store at once on different branches (parallel attempts):
   art run -d ws.db --branch try-a -- agent ...  &  art run -d ws.db --branch try-b -- agent ...

The sandbox: all capabilities dropped; as root, the command runs as an unprivileged uid
(--user; default $SUDO_UID, else the workspace's owner, else nobody) in a user
namespace; its own pid, ipc, uts and mount namespaces; no further user namespaces; a
seccomp deny-list; only fds 0-2; no environment but HOME, PATH, PWD, USER, SHELL (your login
shell, else /bin/sh), TERM and --env; the store and art's state hidden. Extra binds come from --bind and from the host
workspace's .art/config/binds.json ({"binds":[{"host":..,"guest":..,"readonly":..}]}),
which the sandbox sees as an empty read-only directory and pull never writes.

With --warm DURATION (and -d), the overlay is served by a detached art daemon that keeps
the branch locked and mounted for DURATION after the run; the next art run --warm of the
same store, branch and workspace reuses that mount, with the kernel's caches of the last
run still warm (git status, find, grep over a large tree). A warm mount is reused only
when the host workspace is unchanged since its capture and nothing else wrote the branch;
otherwise it is unmounted and a fresh one captures the host. Verbs that change the branch
(checkout, undo, merge, a run without --warm...) make an idle daemon let go first; while a
warm run is in progress they refuse as for any live session. Each run is recorded as
without --warm (a run op, its snapshot). --warm cannot be combined with --trace,
--trace-log, --net allow (the tracer and the proxy journal in this process) or --at.`

func runFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "mount", Aliases: []string{"m"}, Value: ".", Usage: "host workspace `DIR`, at /home/agent/<basename> (with -d, /, your home and the store's directory are captured only when named)"},
		&cli.StringFlag{Name: "db", Aliases: []string{"d"}, Usage: "store `FILE` (plus FILE.packs/ beside it): overlay mode with history (without it the workspace is bound read-write, no history)"},
		durabilityFlag(),
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Value: true, Usage: "give the command a PTY when stdin and stdout are terminals (-i=false: plain pipes always)"},
		&cli.StringFlag{Name: "branch", Aliases: []string{"b"}, Usage: "branch to run on, created from main's head if new (default main)"},
		&cli.StringFlag{Name: "at", Usage: "start from the state at `REV` on a new branch (--branch names it)"},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set `KEY=VALUE` inside (repeatable); nothing else comes from the host environment"},
		&cli.StringSliceFlag{Name: "bind", Usage: "bind `HOST:GUEST[:ro|rw]` (repeatable; default rw)"},
		&cli.StringFlag{Name: "net", Value: "host", Usage: "network: `host` (shared), none (own namespace, loopback only) or allow (only --allow targets, through art's proxy; needs -d)"},
		&cli.DurationFlag{Name: "timeout", Usage: "stop the command after `DURATION` (SIGTERM, 5s grace, SIGKILL of the whole tree; exit 124)"},
		&cli.StringFlag{Name: "memory", Usage: "memory limit of the whole tree, `SIZE` (e.g. 512M, 2G)"},
		&cli.Int64Flag{Name: "pids", Usage: "limit on processes and threads, `N`"},
		&cli.Float64Flag{Name: "cpu", Usage: "CPU limit in `CORES` (e.g. 0.5, 2)"},
		&cli.StringFlag{Name: "disk-quota", Usage: "cap on bytes written to the overlay, `SIZE` (ENOSPC past it; statfs agrees); needs -d"},
		&cli.StringFlag{Name: "tmp-size", Usage: "size of each private tmpfs (/tmp, /run...), `SIZE`"},
		&cli.StringFlag{Name: "user", Usage: "as root: host `UID[:GID]` the command runs as (never 0)"},
		&cli.BoolFlag{Name: "journal-writes", Usage: "forensic mode: journal every write request with its range (slower)"},
		&cli.BoolFlag{Name: "trace", Usage: "trace the sandbox's syscalls into the journal (ptrace, filtered by seccomp)"},
		&cli.StringFlag{Name: "trace-log", Usage: "also write trace records as text to `FILE` (- for stderr)"},
		&cli.StringFlag{Name: "trace-syscalls", Usage: "comma-separated `LIST` of syscalls to trace, or all (default: execve, execveat, connect, opens for writing)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no summary line at the end"},
		&cli.DurationFlag{Name: "warm", Usage: "keep the branch's overlay mounted for `DURATION` after the run (a detached daemon), so the next --warm run of the branch starts with the kernel's caches warm; needs -d; not with --trace, --trace-log, --net allow or --at (0: a mount of the run's own)"},
	}
	return append(flags, netFlags()...)
}

func newRunCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "run",
		Usage:       "run a command (default: your shell) in the sandbox, journaling every change",
		UsageText:   "art run [-m DIR] [-d FILE] [--branch B | --at REV] [flags] [-- COMMAND [ARG...]]",
		Description: runDescription,
		Flags:       runFlags(),
		Action:      func(c *cli.Context) error { return runAction(c, e) },
	}
}

// runOptions is everything art run needs, parsed and checked: the
// session's store, branch and workspace, and the command.
type runOptions struct {
	session.Options
	session.Command
	interactive bool
	retention   retention.Auto // from the host config; applied after the session
}

// procInputs is what art run reads from its process besides its flags:
// its environment, working directory and whether its stdout is a
// terminal. The client passes its own (ownInputs); a warm daemon serving
// a raw run (warmexec.go) the client's, so that both compute one run.
type procInputs struct {
	getenv    func(string) string
	cwd       string
	stdoutTTY bool
}

// ownInputs are this process's inputs.
func ownInputs() (procInputs, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return procInputs{}, err
	}
	return procInputs{getenv: os.Getenv, cwd: cwd, stdoutTTY: isTerminal(os.Stdout)}, nil
}

// abs is p made absolute against the inputs' working directory, as
// filepath.Abs does against the process's.
func (in procInputs) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(in.cwd, p)
}

func runAction(c *cli.Context, e *env) error {
	endParse := phase.Start("parse options")
	in, err := ownInputs()
	if err != nil {
		return err
	}
	o, err := parseRunOptions(c, in)
	endParse()
	if err != nil {
		return err
	}
	o.Warn, o.Stdin, o.Stdout, o.Stderr = e.stderr, e.stdin, e.stdout, e.stderr
	o.OwnsTTY = o.interactive && e.stdin == os.Stdin && isTerminal(os.Stdin) && isTerminal(e.stdout)
	o.Progress = captureProgress(e, o.Workspace)
	if p := os.Getenv("ART_CPUPROFILE"); p != "" { // measurement aid: the session's daemon included
		stop, err := startCPUProfile(p)
		if err != nil {
			return err
		}
		defer stop()
	}
	if p := os.Getenv("ART_RUSAGE"); p != "" { // measurement aid: the daemon's context switches (mount.go)
		defer writeRusage(p)
	}
	res, err := session.Run(c.Context, o.Options, o.Command)
	return finishRun(c, e, o, res, err)
}

// finishRun reports a run that ended with res or err on e's stderr and
// returns art's error for it, as the client and a warm daemon serving a
// raw run (warmexec.go) both do.
func finishRun(c *cli.Context, e *env, o runOptions, res session.Result, err error) error {
	var failed *session.FailedError
	if errors.As(err, &failed) {
		return reportFailedRun(e, res, failed, err)
	}
	if err != nil {
		return err
	}
	if !o.Quiet {
		wall := res.Wall.Round(time.Millisecond)
		if res.Direct {
			fmt.Fprintf(e.stderr, "art: %s in %s (direct mode: no history)\n", session.DescribeExit(res.Result), wall)
		} else {
			fmt.Fprintf(e.stderr, "art: %s in %s; %d paths changed%s; snapshot %s on branch %s\n",
				session.DescribeExit(res.Result), wall, res.Changed, conflictNote(res.Capture), res.Snapshot.ID.Short(), termtext.Quote(res.Branch))
		}
	}
	if !res.Direct && o.retention.Enabled() {
		if err := applyRetention(c, e, o); err != nil {
			return err
		}
	}
	if res.ExitCode != 0 {
		return &silentExit{res.ExitCode}
	}
	return nil
}

// applyRetention runs the host's automatic retention policy on the store
// once the session is over (see package retention).
func applyRetention(c *cli.Context, e *env, o runOptions) error {
	db, err := journal.Open(c.Context, o.Store, journal.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := o.retention.Apply(c.Context, db, who())
	if err != nil {
		return err
	}
	if res.Applied() && !o.Quiet {
		n, ev := 0, int64(0)
		for _, b := range res.Forget.Branches {
			n += len(b.Forget)
			ev += b.Events
		}
		fmt.Fprintf(e.stderr, "art: store %s over retention.max_store_size %s: forgot %d snapshots (%d events), gc removed %s; now %s\n",
			fmtBytes(res.StoreBytes), fmtBytes(o.retention.MaxBytes), n, ev, fmtBytes(res.GC.RemovedBytes), fmtBytes(res.GC.FileAfter))
	}
	return nil
}

// conflictNote describes, for a summary line, the paths a capture found
// changed on both the host and the branch and which version it kept.
func conflictNote(st workspace.ImportStats) string {
	if st.Conflicts == 0 {
		return ""
	}
	var host, branch []string
	for _, c := range st.ConflictList {
		if c.Kept == "host" {
			host = append(host, termtext.Quote(c.Path))
		} else {
			branch = append(branch, termtext.Quote(c.Path))
		}
	}
	list := func(ps []string) string {
		if len(ps) > 5 {
			return strings.Join(ps[:5], ", ") + fmt.Sprintf(" and %d more", len(ps)-5)
		}
		return strings.Join(ps, ", ")
	}
	s := fmt.Sprintf("; the capture found %d paths changed on both the host and the branch", st.Conflicts)
	if len(host) > 0 {
		s += " (took the host's: " + list(host) + ")"
	}
	if len(branch) > 0 {
		s += " (kept the branch's: " + list(branch) + ")"
	}
	return s
}

// captureProgress draws the workspace capture's progress on a terminal.
func captureProgress(e *env, dir string) session.Progress {
	bar := newProgress(e.stderr)
	return func(s workspace.ImportStats, done bool) {
		if done {
			bar.done()
			return
		}
		bar.update("capturing %s: %d files, %s read", dir, s.Files, fmtBytes(s.BytesRead))
	}
}

// silentExit ends art with the sandboxed command's own status; the
// command already said what went wrong.
type silentExit struct{ code int }

func (e *silentExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// parseRunOptions turns art run's flags into runOptions, in named steps
// whose order is the order in which their errors are reported.
func parseRunOptions(c *cli.Context, in procInputs) (runOptions, error) {
	o := runOptions{interactive: c.Bool("interactive")}
	o.Options = session.Options{Store: c.String("db"), Durability: c.String("durability"), Workspace: c.String("mount"),
		Branch: c.String("branch"), NamedBranch: c.IsSet("branch"), At: c.String("at"), JournalWrites: c.Bool("journal-writes")}
	o.Command = session.Command{Argv: c.Args().Slice(), Timeout: c.Duration("timeout"), Quiet: c.Bool("quiet")}
	o.Warm = c.Duration("warm")
	if o.Warm < 0 {
		return o, usagef("--warm must be positive (0: no warm mount)")
	}
	o.Trace = session.TraceOptions{Trace: c.Bool("trace"), Log: c.String("trace-log"), Syscalls: c.String("trace-syscalls")}
	if o.Trace.Enabled() {
		if _, err := session.TracePolicy(o.Trace.Syscalls); err != nil {
			return o, err
		}
	}
	if o.Store == "" {
		for _, f := range []string{"branch", "at", "disk-quota", "journal-writes", "warm"} {
			if c.IsSet(f) {
				return o, usagef("--%s needs a store (-d FILE): without one nothing is recorded", f)
			}
		}
	}
	if err := checkCaptureDir(c, o.Workspace, o.Store, in); err != nil {
		return o, err
	}
	o.Branch = branchName(o.Branch)
	for _, step := range []func(*cli.Context, *runOptions, procInputs) error{
		parseRunWorkspace, parseRunEnv, parseRunNet, parseRunLimits,
	} {
		if err := step(c, &o, in); err != nil {
			return o, err
		}
	}
	if o.Warm > 0 && (o.Trace.Enabled() || o.Net == sandbox.NetAllow || o.At != "") {
		// The tracer and the allow-list proxy journal through the mount's
		// recorder, which would be the daemon's.
		return o, usagef("--warm cannot be used with --trace, --trace-log, --net allow or --at")
	}
	var err error
	o.UID, o.GID, err = sandboxUser(c.String("user"), o.Workspace, in.getenv)
	if err != nil {
		return o, err
	}
	if len(o.Argv) == 0 {
		o.Argv = []string{loginShell(in.getenv), "-l"}
	}
	return o, nil
}

// parseRunWorkspace makes the workspace absolute and checks it is a
// directory.
func parseRunWorkspace(c *cli.Context, o *runOptions, in procInputs) error {
	abs := in.abs(o.Workspace)
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return usagef("workspace %s is not a directory", o.Workspace)
	}
	o.Workspace = abs
	return nil
}

// parseRunEnv reads --env (with $SHELL and, on a terminal, $TERM filled
// in) and --bind.
func parseRunEnv(c *cli.Context, o *runOptions, in procInputs) error {
	for _, kv := range c.StringSlice("env") {
		if err := sandbox.ValidEnv(kv); err != nil {
			return usagef("--env: %v", errors.Unwrap(err))
		}
		o.Env = append(o.Env, kv)
	}
	if !slices.ContainsFunc(o.Env, func(kv string) bool { return strings.HasPrefix(kv, "SHELL=") }) {
		o.Env = append([]string{"SHELL=" + loginShell(in.getenv)}, o.Env...)
	}
	if in.stdoutTTY {
		if t := in.getenv("TERM"); t != "" {
			o.Env = append([]string{"TERM=" + t}, o.Env...)
		}
	}
	for _, s := range c.StringSlice("bind") {
		b, err := parseBind(s, in)
		if err != nil {
			return err
		}
		o.Binds = append(o.Binds, b)
	}
	return nil
}

// parseRunNet reads the retention and network policy: defaults from the
// host user's config file, never the workspace's, then --net, --allow and
// --deny.
func parseRunNet(c *cli.Context, o *runOptions, in procInputs) error {
	hc, err := loadHostConfigIn(in)
	if err != nil {
		return err
	}
	if o.Store != "" {
		if o.retention, err = hc.Retention(); err != nil {
			return err
		}
	}
	pol, mode, err := netPolicy(hc, c.StringSlice("allow"), c.StringSlice("deny"))
	if err != nil {
		return err
	}
	if c.IsSet("net") || mode == "" {
		mode = c.String("net")
	}
	switch n := sandbox.Net(mode); n {
	case sandbox.NetHost, sandbox.NetNone:
		o.Net = n
	case sandbox.NetAllow:
		o.Net, o.NetPolicy = n, pol
		if o.Store == "" {
			return usagef("--net allow needs a store (-d FILE): every connection attempt is journaled")
		}
	default:
		return usagef("--net %q: want host, none or allow", n)
	}
	if o.Net != sandbox.NetAllow && (c.IsSet("allow") || c.IsSet("deny")) {
		return usagef("--allow and --deny need --net allow")
	}
	return nil
}

// parseRunLimits reads the resource limits: --memory, --disk-quota,
// --tmp-size, --pids, --cpu and --timeout.
func parseRunLimits(c *cli.Context, o *runOptions, _ procInputs) error {
	sizes := map[string]*int64{"memory": &o.Limits.MemoryBytes, "disk-quota": &o.DiskQuota, "tmp-size": &o.TmpSize}
	for name, dst := range sizes {
		if !c.IsSet(name) {
			continue
		}
		n, err := parseSize(c.String(name))
		if err != nil || n <= 0 {
			return usagef("--%s %q: want a positive size such as 512M or 2G", name, c.String(name))
		}
		*dst = n
	}
	if o.Limits.Pids = c.Int64("pids"); o.Limits.Pids < 0 {
		return usagef("--pids must be positive")
	}
	if o.Limits.CPU = c.Float64("cpu"); o.Limits.CPU < 0 {
		return usagef("--cpu must be positive")
	}
	if o.Timeout < 0 {
		return usagef("--timeout must be positive")
	}
	return nil
}

// parseBind reads HOST:GUEST[:ro|rw]; HOST may be relative to the
// current directory.
func parseBind(s string, in procInputs) (sandbox.Bind, error) {
	parts := strings.Split(s, ":")
	b := sandbox.Bind{}
	switch {
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		b.ReadOnly = parts[2] == "ro"
	case len(parts) == 2:
	default:
		return b, usagef("--bind %q: want HOST:GUEST[:ro|rw]", s)
	}
	host := in.abs(parts[0])
	b.Host, b.Guest = host, parts[1]
	if err := sandbox.ValidateBind(b); err != nil {
		return b, usagef("--bind %s: %v", s, errors.Unwrap(err))
	}
	if _, err := os.Stat(host); err != nil {
		return b, usagef("--bind %s: %v", s, err)
	}
	return b, nil
}

// sandboxUser picks the host uid and gid the command runs as: --user, or
// session.DefaultUser. Only root has a choice; everyone else runs the
// sandbox as themselves.
func sandboxUser(flag, ws string, getenv func(string) string) (int, int, error) {
	if os.Geteuid() != 0 && flag != "" {
		return 0, 0, usagef("--user needs art to run as root")
	}
	if flag != "" {
		u, g, ok := strings.Cut(flag, ":")
		uid, err := strconv.Atoi(u)
		gid := uid
		if err == nil && ok {
			gid, err = strconv.Atoi(g)
		}
		if err != nil || uid <= 0 || gid <= 0 {
			return 0, 0, usagef("--user %q: want UID[:GID], both above 0 (the sandbox never runs as root)", flag)
		}
		return uid, gid, nil
	}
	uid, gid := session.DefaultUserEnv(ws, getenv)
	return uid, gid, nil
}

// loginShell is the invoking user's shell from /etc/passwd when the
// sandbox can run it (it exists, outside the directories the sandbox
// replaces with a private tmpfs), else /bin/sh.
func loginShell(getenv func(string) string) string {
	data, _ := os.ReadFile("/etc/passwd")
	uid := strconv.Itoa(os.Getuid())
	if u, _, ok := session.SudoUserEnv(getenv); ok {
		uid = strconv.Itoa(u)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == uid && f[6] != "" {
			if _, err := os.Stat(f[6]); err == nil && !sandbox.HiddenInside(f[6]) {
				return f[6]
			}
		}
	}
	return "/bin/sh"
}

// parseSize reads 1024, 64K, 512M, 2G, 1T (see units.ParseSize).
func parseSize(s string) (int64, error) { return units.ParseSize(s) }
