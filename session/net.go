package session

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/netproxy"
	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// Where --net allow's pieces live inside the sandbox. The proxy's socket
// directory is bound at NetSandboxDir; the bridge listens on the sandbox's
// own loopback.
const (
	NetSandboxDir = "/run/art-net"
	NetHTTPAddr   = "127.0.0.1:3128"
	NetSOCKSAddr  = "127.0.0.1:1080"
)

// EventRecorder appends an event that changes no file through the
// process's open journal.Batch: a *journal.Batch, or the *overlay.FS that
// owns the Batch in overlay mode.
type EventRecorder interface {
	Record(ctx context.Context, evs ...journal.Event) error
}

// netReporter returns the proxy's Report function: every attempt becomes
// one EvNet event.
func netReporter(ctx context.Context, rec EventRecorder) func(netpolicy.Attempt) error {
	return func(a netpolicy.Attempt) error {
		return rec.Record(ctx, NetEvent(a))
	}
}

// NetEvent encodes an attempt: Name allow|deny, Text host:port, PID, and
// the whole record as JSON in Value (docs/network.md).
func NetEvent(a netpolicy.Attempt) journal.Event {
	v, _ := json.Marshal(a) // plain fields: cannot fail
	name := "deny"
	if a.Allow {
		name = "allow"
	}
	return journal.Event{Kind: journal.EvNet, Name: name, Text: a.Target(), PID: int64(a.PID), Value: v}
}

// NetAllow is what a session hands to StartNetProxy.
type NetAllow struct {
	Policy   *netpolicy.Policy
	Lookup   netpolicy.Lookup // nil: the host's resolver
	Recorder EventRecorder    // the run's Batch (or overlay.FS)
	UID, GID int              // the sandbox's user (owns the socket directory); UID < 0: leave it
}

// StartNetProxy starts the host side of --net allow in dir (created here,
// private to the sandbox's user), each attempt recorded through
// n.Recorder. Bind dir read-only at NetSandboxDir (connecting to a socket
// needs no write access to its file system, and the agent must not
// replace or remove the sockets), run the command under NetBridgeArgv, and
// Close the proxy when the sandbox has exited, before the Recorder's
// Batch is committed for the last time.
func StartNetProxy(ctx context.Context, dir string, n NetAllow) (*netproxy.Proxy, error) {
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

// setupNetAllow prepares cfg for --net allow: the proxy in sessionDir/net,
// its sockets and art's own binary bound in, the command wrapped in the
// bridge. The caller closes the proxy when the sandbox has exited.
func setupNetAllow(ctx context.Context, sessionDir string, pol *netpolicy.Policy, rec EventRecorder, cfg *sandbox.Config) (*netproxy.Proxy, error) {
	dir := filepath.Join(sessionDir, "net")
	uid, gid := cfg.UID, cfg.GID
	if os.Geteuid() != 0 {
		uid = -1 // the sandbox runs as art's own user
	}
	p, err := StartNetProxy(ctx, dir, NetAllow{Policy: pol, Recorder: rec, UID: uid, GID: gid})
	if err != nil {
		return nil, err
	}
	bin, err := bridgeBinary(dir, uid, gid)
	if err != nil {
		p.Close()
		return nil, err
	}
	guestBin := NetSandboxDir + "/art"
	cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: dir, Guest: NetSandboxDir, ReadOnly: true})
	if filepath.Dir(bin) != dir {
		guestBin = "/run/art-bin"
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: bin, Guest: guestBin, ReadOnly: true})
	}
	cfg.Command = NetBridgeArgv(guestBin, cfg.Command)
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

// NetBridgeArgv wraps cmd so that it runs behind the in-sandbox bridge;
// art is the path of the art binary inside the sandbox.
func NetBridgeArgv(art string, cmd []string) []string {
	return append([]string{art, "net-bridge", "--http", NetHTTPAddr, "--socks", NetSOCKSAddr, "--dir", NetSandboxDir, "--"}, cmd...)
}
