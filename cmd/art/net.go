package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/urfave/cli/v2"
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
		return nil, "", &usageError{msg: err.Error(), err: err}
	}
	return fromFile.Merge(fromFlags), cfg.Mode, nil
}

// attemptOf decodes an EvNet event.
func attemptOf(ev *journal.Event) (netpolicy.Attempt, error) {
	var a netpolicy.Attempt
	if err := json.Unmarshal(ev.Value, &a); err != nil {
		return a, fmt.Errorf("net event @%d: %w", ev.Seq, err)
	}
	return a, nil
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
