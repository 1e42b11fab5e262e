package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/netproxy"
	"github.com/artrt/art/sandbox"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// Where --net allow's pieces live inside the sandbox. The proxy's socket
// directory is bound at netSandboxDir; the bridge listens on the sandbox's
// own loopback.
const (
	netSandboxDir = "/run/art-net"
	netHTTPAddr   = "127.0.0.1:3128"
	netSOCKSAddr  = "127.0.0.1:1080"
)

// netFlags are the rule flags of --net allow (art run adds them).
func netFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "allow", Usage: "with --net allow: let the sandbox reach `HOST[:PORT]` (a name, *.domain, an IP or CIDR; repeatable)"},
		&cli.StringSliceFlag{Name: "deny", Usage: "with --net allow: never reach `HOST[:PORT]`, whatever --allow says (repeatable)"},
	}
}

// loadNetPolicy builds the policy of a run: the host user's config file
// (configPath; "" = ~/.config/art/config.json), then --allow and --deny.
// It also returns the config's default --net mode ("" when unset). The
// file is the invoking user's on the host, never the workspace's.
func loadNetPolicy(configPath string, allow, deny []string) (*netpolicy.Policy, string, error) {
	if configPath == "" {
		var err error
		if configPath, err = netpolicy.DefaultConfigPath(); err != nil {
			return nil, "", err
		}
	}
	cfg, err := netpolicy.LoadConfig(configPath)
	if err != nil {
		return nil, "", err
	}
	fromFile, err := cfg.Policy(configPath)
	if err != nil {
		return nil, "", err
	}
	fromFlags, err := netpolicy.Parse(allow, deny, "")
	if err != nil {
		return nil, "", &usageError{err.Error()}
	}
	return fromFile.Merge(fromFlags), cfg.Mode, nil
}

// eventRecorder appends an event that changes no file through the
// process's open journal.Batch: a *journal.Batch, or the *overlay.FS that
// owns the Batch in overlay mode.
type eventRecorder interface {
	Record(ctx context.Context, evs ...journal.Event) error
}

// netReporter returns the proxy's Report function: every attempt becomes
// one EvNet event.
func netReporter(ctx context.Context, rec eventRecorder) func(netpolicy.Attempt) error {
	return func(a netpolicy.Attempt) error {
		return rec.Record(ctx, netEvent(a))
	}
}

// netEvent encodes an attempt: Name allow|deny, Text host:port, PID, and
// the whole record as JSON in Value (docs/network.md).
func netEvent(a netpolicy.Attempt) journal.Event {
	v, _ := json.Marshal(a) // plain fields: cannot fail
	name := "deny"
	if a.Allow {
		name = "allow"
	}
	return journal.Event{Kind: journal.EvNet, Name: name, Text: a.Target(), PID: int64(a.PID), Value: v}
}

// attemptOf decodes an EvNet event.
func attemptOf(ev *journal.Event) (netpolicy.Attempt, error) {
	var a netpolicy.Attempt
	if err := json.Unmarshal(ev.Value, &a); err != nil {
		return a, fmt.Errorf("net event @%d: %w", ev.Seq, err)
	}
	return a, nil
}

// netAllow is what art run hands to startNetProxy.
type netAllow struct {
	Policy   *netpolicy.Policy
	Lookup   netpolicy.Lookup // nil: the host's resolver
	Recorder eventRecorder    // the run's Batch (or overlay.FS)
	UID, GID int              // the sandbox's user (owns the socket directory); UID < 0: leave it
}

// startNetProxy starts the host side of --net allow in dir (created here,
// private to the sandbox's user), each attempt recorded through
// n.Recorder. Bind dir read-only at netSandboxDir (connecting to a socket
// needs no write access to its file system, and the agent must not
// replace or remove the sockets), run the command under netBridgeArgv, and
// Close the proxy when the sandbox has exited, before the Recorder's
// Batch is committed for the last time.
func startNetProxy(ctx context.Context, dir string, n netAllow) (*netproxy.Proxy, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("net socket dir: %w", err)
	}
	if n.UID >= 0 {
		if err := os.Chown(dir, n.UID, n.GID); err != nil {
			return nil, fmt.Errorf("net socket dir: %w", err)
		}
	}
	return netproxy.Start(dir, netproxy.Options{Policy: n.Policy, Lookup: n.Lookup, Report: netReporter(ctx, n.Recorder),
		Forwards: n.Policy.LoopbackForwards()})
}

// setupNetAllow prepares cfg for --net allow: the proxy in session/net,
// its sockets and art's own binary bound in, the command wrapped in the
// bridge. The caller closes the proxy when the sandbox has exited.
func setupNetAllow(ctx context.Context, session string, pol *netpolicy.Policy, rec eventRecorder, cfg *sandbox.Config) (*netproxy.Proxy, error) {
	dir := filepath.Join(session, "net")
	uid, gid := cfg.UID, cfg.GID
	if os.Geteuid() != 0 {
		uid = -1 // the sandbox runs as art's own user
	}
	p, err := startNetProxy(ctx, dir, netAllow{Policy: pol, Recorder: rec, UID: uid, GID: gid})
	if err != nil {
		return nil, err
	}
	bin, err := bridgeBinary(dir, uid, gid)
	if err != nil {
		p.Close()
		return nil, err
	}
	guestBin := netSandboxDir + "/art"
	cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: dir, Guest: netSandboxDir, ReadOnly: true})
	if filepath.Dir(bin) != dir {
		guestBin = "/run/art-bin"
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: bin, Guest: guestBin, ReadOnly: true})
	}
	cfg.Command = netBridgeArgv(guestBin, cfg.Command)
	return p, nil
}

// bridgeBinary returns a host path of art's own binary that bwrap, running
// as uid:gid, can reach to bind: the binary itself when every directory
// above it lets uid through, else a copy in dir (a root-only build
// directory, as in tests).
func bridgeBinary(dir string, uid, gid int) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find art's binary: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", fmt.Errorf("find art's binary: %w", err)
	}
	if uid < 0 || reachable(self, uid, gid) {
		return self, nil
	}
	src, err := os.Open(self)
	if err != nil {
		return "", fmt.Errorf("copy art's binary: %w", err)
	}
	defer src.Close()
	dst := filepath.Join(dir, "art")
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", fmt.Errorf("copy art's binary: %w", err)
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return "", fmt.Errorf("copy art's binary: %w", err)
	}
	return dst, f.Close()
}

// reachable reports whether uid:gid (no supplementary groups, as in the
// sandbox) may search every directory above path and execute it.
func reachable(path string, uid, gid int) bool {
	may := func(p string) bool {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			return false
		}
		m := st.Mode
		switch {
		case int(st.Uid) == uid:
			return m&0o100 != 0
		case int(st.Gid) == gid:
			return m&0o010 != 0
		}
		return m&0o001 != 0
	}
	for p := filepath.Dir(path); p != "/"; p = filepath.Dir(p) {
		if !may(p) {
			return false
		}
	}
	return may(path)
}

// netBridgeArgv wraps cmd so that it runs behind the in-sandbox bridge;
// art is the path of the art binary inside the sandbox.
func netBridgeArgv(art string, cmd []string) []string {
	return append([]string{art, "net-bridge", "--http", netHTTPAddr, "--socks", netSOCKSAddr, "--dir", netSandboxDir, "--"}, cmd...)
}

// formatNet prints one EvNet event for art log --net.
func formatNet(ev *journal.Event, branch string, a netpolicy.Attempt) string {
	var b strings.Builder
	decision := "deny "
	if a.Allow {
		decision = "allow"
	}
	fmt.Fprintf(&b, "@%-6d %s  %-8s %s  %-7s %s", ev.Seq, fmtTime(a.Time.UnixNano()), branch, decision, a.Proto, a.Target())
	switch {
	case a.Allow && a.Error != "":
		fmt.Fprintf(&b, "  rule %q  connect failed: %s", a.Rule, a.Error)
	case a.Allow:
		fmt.Fprintf(&b, "  rule %q", a.Rule)
	case a.Rule != "":
		fmt.Fprintf(&b, "  %s %q", a.Reason, a.Rule)
	default:
		fmt.Fprintf(&b, "  %s", a.Reason)
	}
	if a.PID != 0 {
		fmt.Fprintf(&b, "  pid %d", a.PID)
	}
	return b.String()
}

// netLogJSON is the stable JSON form of art log --net.
type netLogJSON struct {
	Seq    int64  `json:"seq"`
	Branch string `json:"branch"`
	Op     int64  `json:"op"`
	netpolicy.Attempt
}
