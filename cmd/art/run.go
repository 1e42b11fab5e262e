package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/netproxy"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/workspace"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
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

Several runs may use one store at once on different branches (parallel attempts):
   art run -d ws.db --branch try-a -- agent ...  &  art run -d ws.db --branch try-b -- agent ...

The sandbox: all capabilities dropped; as root, the command runs as an unprivileged uid
(--user; default $SUDO_UID, else the workspace's owner, else nobody) in a user
namespace; its own pid, ipc, uts and mount namespaces; no further user namespaces; a
seccomp deny-list; only fds 0-2; no environment but HOME, PATH, PWD, USER, TERM and
--env; the store and art's state hidden. Extra binds come from --bind and from the host
workspace's .art/config/binds.json ({"binds":[{"host":..,"guest":..,"readonly":..}]}),
which the sandbox sees as an empty read-only directory and pull never writes.`

func runFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "mount", Aliases: []string{"m"}, Value: ".", Usage: "host workspace `DIR`, at /home/agent/<basename>"},
		&cli.StringFlag{Name: "db", Aliases: []string{"d"}, Usage: "store `FILE`: overlay mode with history (without it the workspace is bound read-write, no history)"},
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

// runOptions is everything art run needs, parsed and checked.
type runOptions struct {
	dir, db, durability string
	interactive         bool
	branch, at          string
	branchSet           bool
	env                 []string
	binds               []sandbox.Bind
	net                 sandbox.Net
	netPolicy           *netpolicy.Policy // --net allow
	timeout             time.Duration
	limits              sandbox.Limits
	diskQuota, tmpSize  int64
	uid, gid            int
	journalWrites       bool
	trace               traceOptions
	quiet               bool
	command             []string
}

func runAction(c *cli.Context, e *env) error {
	o, err := parseRunOptions(c)
	if err != nil {
		return err
	}
	code, err := runSession(c.Context, e, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return &silentExit{code}
	}
	return nil
}

// silentExit ends art with the sandboxed command's own status; the
// command already said what went wrong.
type silentExit struct{ code int }

func (e *silentExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func parseRunOptions(c *cli.Context) (runOptions, error) {
	o := runOptions{dir: c.String("mount"), db: c.String("db"), durability: c.String("durability"),
		interactive: c.Bool("interactive"), branch: c.String("branch"), branchSet: c.IsSet("branch"), at: c.String("at"),
		timeout: c.Duration("timeout"), journalWrites: c.Bool("journal-writes"), quiet: c.Bool("quiet"),
		command: c.Args().Slice()}
	o.trace = traceOptions{Trace: c.Bool("trace"), Log: c.String("trace-log"), Syscalls: c.String("trace-syscalls")}
	if o.trace.enabled() {
		if _, err := tracePolicy(o.trace.Syscalls); err != nil {
			return o, err
		}
	}
	if o.db == "" {
		for _, f := range []string{"branch", "at", "disk-quota", "journal-writes"} {
			if c.IsSet(f) {
				return o, usagef("--%s needs a store (-d FILE): without one nothing is recorded", f)
			}
		}
	}
	if o.branch == "" {
		o.branch = journal.DefaultBranch
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		return o, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return o, fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return o, usagef("workspace %s is not a directory", o.dir)
	}
	o.dir = abs
	for _, kv := range c.StringSlice("env") {
		if err := sandbox.ValidEnv(kv); err != nil {
			return o, usagef("--env: %v", errors.Unwrap(err))
		}
		o.env = append(o.env, kv)
	}
	if isTerminal(os.Stdout) {
		if t := os.Getenv("TERM"); t != "" {
			o.env = append([]string{"TERM=" + t}, o.env...)
		}
	}
	for _, s := range c.StringSlice("bind") {
		b, err := parseBind(s)
		if err != nil {
			return o, err
		}
		o.binds = append(o.binds, b)
	}
	// Network defaults come from the host user's config file, never the
	// workspace's.
	pol, mode, err := loadNetPolicy("", c.StringSlice("allow"), c.StringSlice("deny"))
	if err != nil {
		return o, err
	}
	if c.IsSet("net") || mode == "" {
		mode = c.String("net")
	}
	switch n := sandbox.Net(mode); n {
	case sandbox.NetHost, sandbox.NetNone:
		o.net = n
	case sandbox.NetAllow:
		o.net, o.netPolicy = n, pol
		if o.db == "" {
			return o, usagef("--net allow needs a store (-d FILE): every connection attempt is journaled")
		}
	default:
		return o, usagef("--net %q: want host, none or allow", n)
	}
	if o.net != sandbox.NetAllow && (c.IsSet("allow") || c.IsSet("deny")) {
		return o, usagef("--allow and --deny need --net allow")
	}
	sizes := map[string]*int64{"memory": &o.limits.MemoryBytes, "disk-quota": &o.diskQuota, "tmp-size": &o.tmpSize}
	for name, dst := range sizes {
		if !c.IsSet(name) {
			continue
		}
		n, err := parseSize(c.String(name))
		if err != nil || n <= 0 {
			return o, usagef("--%s %q: want a positive size such as 512M or 2G", name, c.String(name))
		}
		*dst = n
	}
	if o.limits.Pids = c.Int64("pids"); o.limits.Pids < 0 {
		return o, usagef("--pids must be positive")
	}
	if o.limits.CPU = c.Float64("cpu"); o.limits.CPU < 0 {
		return o, usagef("--cpu must be positive")
	}
	if o.timeout < 0 {
		return o, usagef("--timeout must be positive")
	}
	o.uid, o.gid, err = sandboxUser(c.String("user"), abs)
	if err != nil {
		return o, err
	}
	if len(o.command) == 0 {
		o.command = []string{loginShell(), "-l"}
	}
	return o, nil
}

// parseBind reads HOST:GUEST[:ro|rw]; HOST may be relative to the
// current directory.
func parseBind(s string) (sandbox.Bind, error) {
	parts := strings.Split(s, ":")
	b := sandbox.Bind{}
	switch {
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		b.ReadOnly = parts[2] == "ro"
	case len(parts) == 2:
	default:
		return b, usagef("--bind %q: want HOST:GUEST[:ro|rw]", s)
	}
	host, err := filepath.Abs(parts[0])
	if err != nil {
		return b, err
	}
	b.Host, b.Guest = host, parts[1]
	if err := sandbox.ValidateBind(b); err != nil {
		return b, usagef("--bind %s: %v", s, errors.Unwrap(err))
	}
	if _, err := os.Stat(host); err != nil {
		return b, usagef("--bind %s: %v", s, err)
	}
	return b, nil
}

// readBindsFile reads the host workspace's .art/config/binds.json. Only
// the host file counts: the agent can never write it.
func readBindsFile(ws string) ([]sandbox.Bind, error) {
	p := filepath.Join(ws, sandbox.PolicyRel, "binds.json")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Binds []sandbox.Bind `json:"binds"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, usagef("%s: %v", p, err)
	}
	for i, b := range doc.Binds {
		if b.Host != "" && !filepath.IsAbs(b.Host) {
			doc.Binds[i].Host = filepath.Join(ws, b.Host)
		}
		if err := sandbox.ValidateBind(doc.Binds[i]); err != nil {
			return nil, usagef("%s: %v", p, errors.Unwrap(err))
		}
		if _, err := os.Stat(doc.Binds[i].Host); err != nil {
			return nil, usagef("%s: bind source: %v", p, err)
		}
	}
	return doc.Binds, nil
}

// sandboxUser picks the host uid and gid the command runs as. Only root
// has a choice; everyone else runs the sandbox as themselves.
func sandboxUser(flag, ws string) (int, int, error) {
	if os.Geteuid() != 0 {
		if flag != "" {
			return 0, 0, usagef("--user needs art to run as root")
		}
		return os.Getuid(), os.Getgid(), nil
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
	if u, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && u > 0 {
		g, err := strconv.Atoi(os.Getenv("SUDO_GID"))
		if err != nil || g <= 0 {
			g = u
		}
		return u, g, nil
	}
	var st unix.Stat_t
	if unix.Stat(ws, &st) == nil && st.Uid > 0 && st.Gid > 0 {
		return int(st.Uid), int(st.Gid), nil
	}
	return 65534, 65534, nil // nobody
}

// loginShell is the invoking user's shell from /etc/passwd, else /bin/sh.
func loginShell() string {
	data, _ := os.ReadFile("/etc/passwd")
	uid := strconv.Itoa(os.Getuid())
	if s := os.Getenv("SUDO_UID"); s != "" {
		uid = s
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == uid && f[6] != "" {
			if _, err := os.Stat(f[6]); err == nil {
				return f[6]
			}
		}
	}
	return "/bin/sh"
}

// parseSize reads 1024, 64K, 512M, 2G, 1T (powers of 1024; a trailing B
// or iB is allowed).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "IB"), "B")
	mult := int64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGT", s[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(v * float64(mult)), nil
}

// stateDir is where art keeps a session's mountpoint and private copies:
// under /run (root) or the user's runtime dir - both covered by the
// sandbox's private /run, so never visible inside.
func stateDir() (string, error) {
	base := "/run/art"
	if os.Geteuid() != 0 {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			base = filepath.Join(x, "art")
		} else {
			base = filepath.Join(os.TempDir(), fmt.Sprintf("art-%d", os.Getuid()))
		}
	}
	// 0711: the sandbox's uid must reach the mountpoint to bind it, but
	// may not list the sessions.
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return base, nil
}

// branchLock holds an exclusive lock on (store, branch) for a run: two
// mounts of one branch would interleave their changes.
func branchLock(base, db, branch string) (*os.File, error) {
	abs, _ := filepath.Abs(db)
	sum := sha256.Sum256([]byte(abs + "\x00" + branch))
	p := filepath.Join(base, "lock-"+hex.EncodeToString(sum[:8]))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, withHint(fmt.Errorf("branch %s of %s is in use by another art run", branch, db),
			"run on another branch: art run --branch NAME")
	}
	return f, nil
}

// runSession runs one sandboxed command and returns its exit status.
func runSession(ctx context.Context, e *env, o runOptions) (int, error) {
	name, err := workspace.Name(o.dir)
	if err != nil {
		return 0, err
	}
	fileBinds, err := readBindsFile(o.dir)
	if err != nil {
		return 0, err
	}
	cfg := &sandbox.Config{
		Command: o.command, Env: o.env, Name: name, Workspace: o.dir,
		PolicyDir: filepath.Join(o.dir, sandbox.ArtDir),
		Binds:     append(fileBinds, o.binds...), Net: o.net,
		UID: o.uid, GID: o.gid, TmpSize: o.tmpSize, Limits: o.limits,
		OwnsTTY: o.interactive && e.stdin == os.Stdin && isTerminal(os.Stdin) && isTerminal(e.stdout),
	}
	// Where the sandbox can write the host workspace (direct mode, or a
	// read-write bind of a directory above it), an .art of the host's own
	// must exist, to be covered read-only inside: otherwise the agent
	// could create one and plant a binds.json for the next run.
	if err := protectPolicy(o, cfg); err != nil {
		return 0, err
	}
	// The deny-list (TIOCSTI, keyctl, bpf, the new mount API...) always;
	// with --trace, also the calls that stop for the tracer.
	if cfg.Seccomp, err = o.trace.seccompProgram(); err != nil {
		return 0, err
	}
	if o.db == "" {
		return runDirect(ctx, e, o, cfg)
	}
	return runOverlay(ctx, e, o, cfg)
}

func runDirect(ctx context.Context, e *env, o runOptions, cfg *sandbox.Config) (int, error) {
	if o.trace.enabled() && o.trace.Log == "" {
		o.trace.Log = "-" // no store to journal to: the original art's default, stderr
	}
	res, err := supervise(ctx, e, o, cfg, nil)
	if err != nil {
		return 0, err
	}
	if !o.quiet {
		fmt.Fprintf(e.stderr, "art: %s in %s (direct mode: no history)\n", describeExit(res), res.Wall.Round(time.Millisecond))
	}
	return res.ExitCode, nil
}

func runOverlay(ctx context.Context, e *env, o runOptions, cfg *sandbox.Config) (code int, err error) {
	// The store is written after the command ends, whatever signal ended
	// it: cleanup must not see a cancelled context.
	bg := context.WithoutCancel(ctx)
	desc := strings.Join(o.command, " ")
	var op *journal.Op
	status := -1
	s, err := openSession(ctx, e, o, cfg, func(db *journal.DB, branch string) (*journal.Op, error) {
		var err error
		if op, err = db.BeginOp(ctx, branch, "run", desc); err != nil {
			return nil, err
		}
		err = op.Update(ctx, func(tx *journal.Tx) error {
			return tx.Record(journal.Event{Kind: journal.EvBegin, PID: int64(os.Getpid()), Text: desc})
		})
		return op, err
	})
	defer func() {
		if op != nil { // an early failure: close the op so the log is true
			op.End(bg, &status)
		}
		if s.db != nil {
			s.db.Close()
		}
	}()
	if err != nil {
		return 0, err
	}
	var proxy *netproxy.Proxy
	if o.net == sandbox.NetAllow {
		if proxy, err = setupNetAllow(bg, s.dir, o.netPolicy, s.fsys, cfg); err != nil {
			return 0, errors.Join(err, s.close(bg))
		}
	}
	made := bindMountPoints(cfg)
	res, runErr := supervise(ctx, e, o, cfg, s.fsys.Record)
	removeMountPoints(made)
	if proxy != nil {
		// Before the unmount commits the run's Batch for the last time:
		// the proxy records through it.
		proxy.Close()
	}
	uerr := s.close(bg)
	if runErr != nil {
		return 0, errors.Join(runErr, uerr)
	}
	if uerr != nil {
		return 0, uerr
	}
	status = res.ExitCode
	var snap journal.Snapshot
	if err := op.Update(bg, func(tx *journal.Tx) error {
		if err := tx.Record(journal.Event{Kind: journal.EvEnd, Status: int64(res.ExitCode), Text: describeExit(res)}); err != nil {
			return err
		}
		var err error
		snap, err = tx.Snapshot("run " + desc)
		return err
	}); err != nil {
		return 0, err
	}
	if err := op.End(bg, &status); err != nil {
		return 0, err
	}
	op = nil
	if !o.quiet {
		changed := 0
		journal.Diff(bg, s.db.Objects(), s.before.Root, snap.Root, func(journal.Change) error { changed++; return nil })
		fmt.Fprintf(e.stderr, "art: %s in %s; %d paths changed; snapshot %s on branch %s\n",
			describeExit(res), res.Wall.Round(time.Millisecond), changed, snap.ID.Short(), s.branch)
	}
	return res.ExitCode, nil
}

// prepareBranch resolves --branch and --at to the branch the run uses,
// creating it when new.
func prepareBranch(ctx context.Context, e *env, db *journal.DB, o runOptions) (string, error) {
	if o.at != "" {
		st, err := db.Resolve(ctx, o.at, journal.DefaultBranch)
		if err != nil {
			return "", err
		}
		name := o.branch
		if !o.branchSet {
			name = fmt.Sprintf("at-%s-%d", o.at, time.Now().Unix())
			name = strings.NewReplacer("~", "-", "@", "seq", "/", "-").Replace(name)
		}
		if _, err := db.Branch(ctx, name); err == nil {
			return "", usagef("--at starts a new branch, and %s exists (name a new one with --branch)", name)
		}
		if _, err := db.CreateBranch(ctx, name, st); err != nil {
			return "", err
		}
		if err := db.InheritImportCache(ctx, name, st.Branch); err != nil {
			return "", err
		}
		fmt.Fprintf(e.stderr, "art: new branch %s from %s\n", name, o.at)
		return name, nil
	}
	if _, err := db.Branch(ctx, o.branch); errors.Is(err, journal.ErrBranchNotFound) {
		if err := journal.ValidBranchName(o.branch); err != nil {
			return "", usagef("%v", err)
		}
		head, err := db.Head(ctx, journal.DefaultBranch)
		if err != nil {
			return "", err
		}
		if _, err := db.CreateBranch(ctx, o.branch, head); err != nil {
			return "", err
		}
		if err := db.InheritImportCache(ctx, o.branch, journal.DefaultBranch); err != nil {
			return "", err
		}
		fmt.Fprintf(e.stderr, "art: new branch %s from %s\n", o.branch, journal.DefaultBranch)
	} else if err != nil {
		return "", err
	}
	return o.branch, nil
}

// supervise starts the sandbox and waits for it, forwarding signals and
// enforcing the timeout.
// record journals trace records (nil: direct mode, nothing to journal to).
func supervise(ctx context.Context, e *env, o runOptions, cfg *sandbox.Config,
	record func(context.Context, ...journal.Event) error) (sandbox.Result, error) {
	// A missing command is the shell's 127 (126: not executable), not
	// bwrap's 1, with art's own message.
	if le := lookCommand(cfg); le != nil {
		fmt.Fprintf(e.stderr, "art: %s\n", le.Message)
		code := 127
		if le.Code == execapi.CodeNoExec {
			code = 126
		}
		return sandbox.Result{ExitCode: code}, nil
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	var start sandbox.Starter
	if o.trace.enabled() {
		if record == nil {
			record = func(context.Context, ...journal.Event) error { return nil }
		}
		start = func(cmd *exec.Cmd) (func() (syscall.WaitStatus, *syscall.Rusage, error), error) {
			tr, finish, err := o.trace.start(cmd, record, e.stderr)
			if err != nil {
				return nil, err
			}
			return func() (syscall.WaitStatus, *syscall.Rusage, error) {
				ws, err := tr.Wait()
				if ferr := finish(); err == nil {
					err = ferr
				}
				return ws, nil, err
			}, nil
		}
	}
	p, err := sandbox.Start(cfg, sandbox.IO{Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr}, start)
	if err != nil {
		return sandbox.Result{}, err
	}
	if o.limits != (sandbox.Limits{}) && !o.quiet {
		fmt.Fprintf(e.stderr, "art: limits enforced by %s\n", p.LimitedBy())
	}
	var timeout <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		timeout = t.C
	}
	const grace = 5 * time.Second
	cancelled := ctx.Done()
	for {
		select {
		case <-p.Done():
			return p.Wait()
		case <-timeout:
			go p.Stop(grace, true)
			timeout = nil
		case s := <-sigs:
			switch s {
			case syscall.SIGINT, syscall.SIGQUIT:
				// A terminal's Ctrl-C reaches a PTY sandbox as a byte;
				// this one was sent to art: pass it on.
				p.Signal(s.(syscall.Signal))
			default: // SIGTERM, SIGHUP: the run is over
				go p.Stop(grace, false)
			}
		case <-cancelled:
			// main's context also watches SIGINT and SIGTERM; the
			// signal itself is handled above.
			cancelled = nil
		}
	}
}

func describeExit(r sandbox.Result) string {
	switch {
	case r.TimedOut:
		return "timed out (exit 124)"
	case r.OOMKilled && r.Signal == syscall.SIGKILL:
		return fmt.Sprintf("killed: out of memory (exit %d)", r.ExitCode)
	case r.Signal != 0:
		return fmt.Sprintf("killed by %s (exit %d)", unix.SignalName(r.Signal), r.ExitCode)
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}

// cleanStaleSessions removes what runs killed with SIGKILL left in the
// state dir: their FUSE mounts (detached) and session directories. A
// session is stale when nobody holds its lock.
func cleanStaleSessions(e *env, base string) {
	// Their private copies of the agent's open files too.
	for _, parent := range []string{"/var/tmp", ""} {
		if _, err := overlay.CleanStaleUppers(parent); err != nil {
			fmt.Fprintf(e.stderr, "art: warning: cannot remove a killed session's private copies: %v\n", err)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(base, "session-*"))
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, "lock"))
		if err != nil {
			continue // being created, or not ours
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			continue // alive
		}
		home := filepath.Join(d, "home")
		err = overlay.CleanStale(home)
		if err == nil {
			// Fails while anything is still mounted there: then the
			// directory stays, lock included, for a later try.
			err = os.Remove(home)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(e.stderr, "art: warning: cannot clean up killed session %s: %v\n", filepath.Base(d), err)
		} else {
			fmt.Fprintf(e.stderr, "art: cleaned up after a killed session (%s)\n", filepath.Base(d))
			removeTree(d) // never through a mount
		}
		f.Close()
	}
}

// bindMountPoints lists, deepest last, the directories bwrap will create
// in the overlay as mount points for binds below /home/agent: they are
// scaffolding, not the agent's work (removeMountPoints takes them out
// again, so they never reach the branch's snapshot or the host).
func bindMountPoints(cfg *sandbox.Config) []string {
	var made []string
	for _, b := range cfg.Binds {
		rel, ok := strings.CutPrefix(filepath.Clean(b.Guest), sandbox.GuestHome+"/")
		if !ok {
			continue
		}
		p := cfg.Home
		for _, part := range strings.Split(rel, "/") {
			p = filepath.Join(p, part)
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) && !slices.Contains(made, p) {
				made = append(made, p)
			}
		}
	}
	return made
}

// removeMountPoints removes the scaffolding directories, deepest first;
// one the agent put something in stays.
func removeMountPoints(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		os.Remove(made[i])
	}
}

// protectPolicy creates the host workspace's .art when the sandbox could
// otherwise create it.
func protectPolicy(o runOptions, cfg *sandbox.Config) error {
	writable := o.db == ""
	for _, b := range cfg.Binds {
		if rel, err := filepath.Rel(b.Host, o.dir); err == nil && !b.ReadOnly && rel != ".." && !strings.HasPrefix(rel, "../") {
			writable = true
		}
	}
	if !writable {
		return nil
	}
	if err := os.Mkdir(cfg.PolicyDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("protect sandbox policy: %w", err)
	}
	return nil
}
