package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/artrt/art/hostconfig"
	"github.com/artrt/art/internal/termtext"
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

// loadHostConfigIn reads the host user's config file, found through the
// inputs' environment (hostconfig.DefaultPathEnv) and made absolute
// against the inputs' working directory: a relative $HOME names a file
// under the client's directory, also when a warm daemon (whose own
// directory is another) parses the client's run.
func loadHostConfigIn(in procInputs) (hostconfig.Config, error) {
	p, err := hostconfig.DefaultPathEnv(in.getenv)
	if err != nil {
		return hostconfig.Config{}, err
	}
	return hostconfig.Load(in.abs(p))
}

// loadHostConfig reads the host user's config file (configPath; "" =
// ~/.config/art/config.json): the invoking user's on the host, never the
// workspace's.
func loadHostConfig(configPath string) (hostconfig.Config, error) {
	if configPath == "" {
		var err error
		if configPath, err = hostconfig.DefaultPath(); err != nil {
			return hostconfig.Config{}, err
		}
	}
	return hostconfig.Load(configPath)
}

// loadNetPolicy builds the policy of a run from the config file at
// configPath ("" = the host user's): see netPolicy.
func loadNetPolicy(configPath string, allow, deny []string) (*netpolicy.Policy, string, error) {
	cfg, err := loadHostConfig(configPath)
	if err != nil {
		return nil, "", err
	}
	return netPolicy(cfg, allow, deny)
}

// netPolicy builds the policy of a run: the config file's rules, then
// --allow and --deny. It also returns the config's default --net mode (""
// when unset).
func netPolicy(cfg hostconfig.Config, allow, deny []string) (*netpolicy.Policy, string, error) {
	fromFile, err := cfg.Net.Policy(cfg.Path)
	if err != nil {
		return nil, "", err
	}
	fromFlags, err := netpolicy.Parse(allow, deny, "")
	if err != nil {
		return nil, "", &usageError{msg: err.Error(), err: err}
	}
	return fromFile.Merge(fromFlags), cfg.Net.Mode, nil
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
	// The host is as the sandboxed client asked for it: anything.
	fmt.Fprintf(&b, "@%-6d %s  %-8s %s  %-7s %s", ev.Seq, fmtTime(a.Time.UnixNano()), termtext.Quote(branch), decision,
		termtext.Text(a.Proto), termtext.Quote(a.Target()))
	switch {
	case a.Allow && a.Error != "":
		fmt.Fprintf(&b, "  rule %s  connect failed: %s", termtext.Quoted(a.Rule), termtext.Text(a.Error))
	case a.Allow:
		fmt.Fprintf(&b, "  rule %s", termtext.Quoted(a.Rule))
	case a.Rule != "":
		fmt.Fprintf(&b, "  %s %s", termtext.Text(a.Reason), termtext.Quoted(a.Rule))
	default:
		fmt.Fprintf(&b, "  %s", termtext.Text(a.Reason))
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
