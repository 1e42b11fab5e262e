package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/artrt/art/internal/envkey"
)

// GuestHome is the agent's home inside the sandbox.
const GuestHome = "/home/agent"

// DefaultPath is PATH inside the sandbox.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// DefaultShell is SHELL inside unless Config.Env sets it.
const DefaultShell = "/bin/sh"

// Net is the network a sandbox gets.
type Net string

const (
	NetHost Net = "host" // the host's network namespace (the original art's behaviour)
	NetNone Net = "none" // a namespace of its own with only loopback
	// NetAllow is NetNone's namespace; the caller binds art's proxy
	// sockets in and wraps the command in the bridge (docs/network.md).
	NetAllow Net = "allow"
)

// Bind is an extra host path made visible in the sandbox.
type Bind struct {
	Host     string `json:"host"`
	Guest    string `json:"guest"`
	ReadOnly bool   `json:"readonly"`
}

// Config describes one sandbox. Paths are host paths unless named Guest.
// The zero value of every optional field is the safe choice.
type Config struct {
	// Bwrap is the bubblewrap binary; "" finds bwrap on PATH.
	Bwrap string
	// Command is the argv run inside; it must not be empty.
	Command []string
	// Env is the whole environment inside, as K=V, besides HOME, PATH
	// (unless given), PWD, USER and TERM. Nothing else is inherited.
	Env []string

	// Name is the workspace's name: it appears at /home/agent/<Name>.
	Name string
	// Home, when set, is bound read-write at /home/agent (the overlay's
	// mountpoint); the workspace is part of it. When empty, /home/agent is
	// a tmpfs and Workspace is bound read-write at /home/agent/<Name>
	// (direct mode: no history).
	Home string
	// Workspace is the host workspace (direct mode's bind source).
	Workspace string
	// PolicyDir is the host workspace's art directory (.art, which holds
	// the sandbox policy .art/config/binds.json). When it exists it is
	// covered inside by an empty read-only tmpfs at the same relative path
	// under /home/agent/<Name>: hidden, unwritable, and - being a mount
	// point - impossible to rename away and replace. In direct mode the
	// caller creates it first (Config.Args does not touch the host), so an
	// agent can never plant a policy the next run would read.
	PolicyDir string
	// Cwd is the working directory inside; default /home/agent/<Name>.
	Cwd string

	Binds []Bind
	Net   Net
	// Hide lists host files and directories (the store, its -wal and -shm,
	// art's state) that must not be visible inside. Those not under a path
	// the sandbox replaces with a tmpfs anyway are covered explicitly.
	Hide []string

	// UID and GID are the host ids the command runs as when art runs as
	// root (never 0: Validate refuses it). Ignored otherwise: an
	// unprivileged art runs the sandbox as itself.
	UID, GID int

	// TmpSize caps each private tmpfs (/tmp, /run...) in bytes; 0 = the
	// kernel's default (half of RAM).
	TmpSize int64
	// Seccomp is a classic-BPF program (struct sock_filter array) loaded
	// with bwrap --seccomp; nil loads none.
	Seccomp []byte
	// OwnsTTY says art gives the sandbox a PTY of its own; otherwise the
	// sandbox gets a new session so it cannot reach the caller's terminal.
	OwnsTTY bool
	// Limits applied to the whole process tree.
	Limits Limits
}

// Limits on a sandbox's process tree. Zero means unlimited.
type Limits struct {
	MemoryBytes int64   // resident memory + swap of the whole tree
	Pids        int64   // processes and threads
	CPU         float64 // CPUs' worth of time (1.5 = one and a half cores)
	// CPUSeconds caps each process's CPU time (RLIMIT_CPU: SIGXCPU at
	// the limit, SIGKILL a second later). Per process, not per tree.
	CPUSeconds int64
}

// ValidEnv checks one K=V entry.
func ValidEnv(kv string) error {
	k, _, ok := strings.Cut(kv, "=")
	if !ok {
		return invalidf("environment entry %q: want KEY=VALUE", kv)
	}
	if !envkey.Valid(k) {
		return invalidf("environment key %q: want [A-Za-z_][A-Za-z0-9_]*", k)
	}
	if strings.ContainsRune(kv, 0) {
		return invalidf("environment entry %s: contains a NUL byte", k)
	}
	return nil
}

// forbiddenGuest are guest paths a bind may not cover or sit under:
// they belong to the kernel interfaces bwrap sets up, or to art.
var forbiddenGuest = []string{"/proc", "/sys", "/dev", GuestHome}

// ValidateBind checks one bind against the sandbox's rules: absolute
// guest paths, nothing onto /proc, /sys, /dev or /home/agent itself (a
// bind below /home/agent is allowed), never the root.
func ValidateBind(b Bind) error {
	if b.Host == "" || b.Guest == "" {
		return invalidf("bind %q:%q: host and guest paths are both required", b.Host, b.Guest)
	}
	if !filepath.IsAbs(b.Host) {
		return invalidf("bind host path %q is not absolute", b.Host)
	}
	if !filepath.IsAbs(b.Guest) {
		return invalidf("bind guest path %q is not absolute", b.Guest)
	}
	if strings.ContainsRune(b.Host+b.Guest, 0) {
		return invalidf("bind %q: contains a NUL byte", b.Guest)
	}
	g := filepath.Clean(b.Guest)
	if g == "/" {
		return invalidf("bind onto / would replace the whole sandbox")
	}
	for _, f := range forbiddenGuest {
		if g == f || (f != GuestHome && strings.HasPrefix(g, f+"/")) {
			return invalidf("bind onto %s is not allowed (%s is the sandbox's own)", g, f)
		}
	}
	return nil
}

// Validate checks c before anything starts.
func (c *Config) Validate() error {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return invalidf("no command")
	}
	for _, a := range c.Command {
		if strings.ContainsRune(a, 0) {
			return invalidf("command argument contains a NUL byte")
		}
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\x00") || c.Name == "." || c.Name == ".." {
		return invalidf("workspace name %q", c.Name)
	}
	if c.Home == "" && c.Workspace == "" {
		return invalidf("neither a home (overlay) nor a workspace (direct mode) to bind")
	}
	for _, p := range []string{c.Home, c.Workspace, c.PolicyDir} {
		if p != "" && !filepath.IsAbs(p) {
			return invalidf("path %q is not absolute", p)
		}
	}
	for _, kv := range c.Env {
		if err := ValidEnv(kv); err != nil {
			return err
		}
	}
	for _, b := range c.Binds {
		if err := ValidateBind(b); err != nil {
			return err
		}
	}
	switch c.Net {
	case "", NetHost, NetNone, NetAllow:
	default:
		return invalidf("network %q: want host, none or allow", c.Net)
	}
	if c.UID == 0 || c.GID == 0 {
		return invalidf("the sandbox never runs as uid or gid 0")
	}
	if c.Limits.MemoryBytes < 0 || c.Limits.Pids < 0 || c.Limits.CPU < 0 || c.Limits.CPUSeconds < 0 || c.TmpSize < 0 {
		return invalidf("negative limit")
	}
	return nil
}

func (c *Config) guestWorkspace() string { return GuestHome + "/" + c.Name }

func (c *Config) cwd() string {
	if c.Cwd != "" {
		return c.Cwd
	}
	return c.guestWorkspace()
}

// environ is the complete environment inside, sorted as given.
func (c *Config) environ() []string {
	env := []string{"HOME=" + GuestHome, "PWD=" + c.cwd(), "USER=agent", "LOGNAME=agent"}
	hasPath, hasShell := false, false
	for _, kv := range c.Env {
		hasPath = hasPath || strings.HasPrefix(kv, "PATH=")
		hasShell = hasShell || strings.HasPrefix(kv, "SHELL=")
	}
	if !hasPath {
		env = append(env, "PATH="+DefaultPath)
	}
	if !hasShell {
		// Tools that spawn $SHELL fall back to the passwd entry of the
		// sandbox's uid otherwise, often nologin (nobody's).
		env = append(env, "SHELL="+DefaultShell)
	}
	return append(env, c.Env...)
}

// Args returns bwrap's arguments (without the program name). seccompFD is
// the child's fd number of the seccomp program, or -1. Bind sources are
// named by their host paths; Start stages them first when art is root
// (stage_linux.go).
func (c *Config) Args(seccompFD int) []string { return c.args(seccompFD, nil) }

// args is Args with the bind sources of stage replaced by their staged
// paths (the direct-mode workspace, a Bind's Host).
func (c *Config) args(seccompFD int, stage *stagePlan) []string {
	bind := func(a []string, ro bool, host, guest string) []string {
		op := "--bind"
		if ro {
			op = "--ro-bind"
		}
		if p, ok := stage.path(host); ok {
			host = p
		}
		return append(a, op, host, guest)
	}
	a := []string{
		// Namespaces: everything, then the network back if asked for.
		"--unshare-all",
		"--unshare-user", // explicit: --disable-userns needs it
		"--die-with-parent",
		"--cap-drop", "ALL",
		"--disable-userns",
		"--clearenv",
	}
	if c.Net != NetNone && c.Net != NetAllow {
		a = append(a, "--share-net")
	}
	if !c.OwnsTTY {
		a = append(a, "--new-session")
	}
	a = append(a,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	)
	a = c.scratchArgs(a)
	if c.Home != "" {
		a = append(a, "--bind", c.Home, GuestHome)
	} else {
		a = append(a, "--dir", GuestHome)
		a = bind(a, false, c.Workspace, c.guestWorkspace())
	}
	policyAt := c.policyGuests()
	for _, b := range c.Binds {
		a = bind(a, b.ReadOnly, b.Host, filepath.Clean(b.Guest))
	}
	// After the binds, so a bind of the workspace's parent is covered too.
	for _, g := range policyAt {
		a = append(a, "--tmpfs", g, "--remount-ro", g)
	}
	// The policy shows through any read-write bind of a directory that
	// holds the workspace (--bind ~/src:/home/agent/src): cover it there
	// too, or the agent plants a binds.json the next run obeys.
	if c.PolicyDir != "" && exists(c.PolicyDir) {
		for _, b := range c.Binds {
			if rel, ok := within(b.Host, c.PolicyDir); ok && !b.ReadOnly {
				g := filepath.Join(filepath.Clean(b.Guest), rel)
				a = append(a, "--tmpfs", g, "--remount-ro", g)
			}
		}
	}
	a = c.hideArgs(a)
	if seccompFD >= 0 {
		a = append(a, "--seccomp", fmt.Sprint(seccompFD))
	}
	a = append(a, "--uid", fmt.Sprint(c.UID), "--gid", fmt.Sprint(c.GID),
		"--hostname", "art", "--chdir", c.cwd())
	for _, kv := range c.environ() {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a, "--")
	return append(a, c.Command...)
}

// scratchArgs appends the private scratch space: a tmpfs on each of /tmp,
// /run, /var/tmp, /home and /root (the host's sockets and homes out of
// sight), and on /var/run where it is a directory of its own.
func (c *Config) scratchArgs(a []string) []string {
	tmpfs := func(dst string) {
		if c.TmpSize > 0 {
			a = append(a, "--size", fmt.Sprint(c.TmpSize))
		}
		a = append(a, "--tmpfs", dst)
	}
	for _, d := range []string{"/tmp", "/run", "/var/tmp", "/home", "/root"} {
		tmpfs(d)
	}
	// /var/run is a symlink to /run on Debian; where it is a directory of
	// its own it gets a tmpfs too.
	if !isSymlink("/var/run") {
		tmpfs("/var/run")
	}
	return a
}

// policyGuests returns the guest paths at which the sandbox policy
// directory shows, to cover read-only: in the workspace, and through any
// bind of a directory above it. None when there is no policy directory.
func (c *Config) policyGuests() []string {
	if c.PolicyDir == "" || !exists(c.PolicyDir) {
		return nil
	}
	guests := []string{c.guestWorkspace() + "/" + filepath.Base(c.PolicyDir)}
	for _, b := range c.Binds {
		if rel, ok := within(b.Host, c.PolicyDir); ok {
			guests = append(guests, filepath.Join(filepath.Clean(b.Guest), rel))
		}
	}
	return guests
}

// hideArgs appends a cover for each existing path of c.Hide wherever it
// shows inside the sandbox: an empty read-only tmpfs on a directory,
// /dev/null on a file.
func (c *Config) hideArgs(a []string) []string {
	for _, h := range c.Hide {
		if !exists(h) {
			continue
		}
		for _, g := range c.guestPaths(h) {
			// As root, the command runs as c.UID, which cannot reach a
			// file under a directory closed to it (a store in a 0700
			// directory): nothing to hide there, and bwrap, setting up as
			// that user, could not place the cover either ("Can't create
			// file at ..."). Only the directories this guest path passes
			// through count: a bind's source skips those above it.
			if os.Geteuid() == 0 && c.UID != 0 && !searchableBy(c.hostRoot(h, g), h, c.UID, c.GID) {
				continue
			}
			if isDir(h) {
				a = append(a, "--tmpfs", g, "--remount-ro", g)
			} else {
				a = append(a, "--ro-bind", "/dev/null", g)
			}
		}
	}
	return a
}

// ArtDir is the workspace-relative directory of art's files, and
// PolicyRel that of sandbox policy within it.
const (
	ArtDir    = ".art"
	PolicyRel = ArtDir + "/config"
)

// HiddenInside reports whether host path p is covered inside the sandbox
// by one of its private tmpfs mounts (/tmp, /run, /home...).
func HiddenInside(p string) bool { return underTmpfs(filepath.Clean(p)) }

// underTmpfs reports whether host path p is already hidden by one of the
// sandbox's private tmpfs mounts.
func underTmpfs(p string) bool {
	for _, d := range []string{"/tmp", "/run", "/var/tmp", "/home", "/root", "/var/run"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// guestPaths lists where host path p is visible inside: at its own path
// (unless a private tmpfs covers it), and through the workspace bind and
// every extra bind whose source contains it.
// hostRoot is the host directory where guest path g (one of
// guestPaths(p)) enters the host's tree: / for p itself, else the
// workspace or the bind whose source holds p.
func (c *Config) hostRoot(p, g string) string {
	if g == p {
		return "/"
	}
	if c.Home == "" {
		if rel, ok := within(c.Workspace, p); ok && g == filepath.Join(c.guestWorkspace(), rel) {
			return c.Workspace
		}
	}
	for _, b := range c.Binds {
		if rel, ok := within(b.Host, p); ok && g == filepath.Join(filepath.Clean(b.Guest), rel) {
			return b.Host
		}
	}
	return "/"
}

func (c *Config) guestPaths(p string) []string {
	var out []string
	if !underTmpfs(p) {
		out = append(out, p)
	}
	if c.Home == "" {
		if rel, ok := within(c.Workspace, p); ok {
			out = append(out, filepath.Join(c.guestWorkspace(), rel))
		}
	}
	for _, b := range c.Binds {
		if rel, ok := within(b.Host, p); ok {
			out = append(out, filepath.Join(filepath.Clean(b.Guest), rel))
		}
	}
	return out
}

// within reports whether p is dir or below it, and the relative path.
func within(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}
