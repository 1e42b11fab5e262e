package main

import (
	"github.com/artrt/art/netproxy"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
)

// newNetBridgeCommand is the in-sandbox half of --net allow: a session
// makes it the sandbox's command (session.NetBridgeArgv), and it runs
// netproxy.BridgeAndExec (its detached copy, --serve, netproxy.ServeBridge).
func newNetBridgeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "net-bridge",
		Hidden:    true,
		Usage:     "(inside the sandbox) bridge loopback ports to art's proxy, then run a command",
		UsageText: "art net-bridge [--http ADDR] [--socks ADDR] [--dir DIR] -- CMD [ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Value: session.NetHTTPAddr, Usage: "serve the HTTP proxy on `ADDR`"},
			&cli.StringFlag{Name: "socks", Value: session.NetSOCKSAddr, Usage: "serve the SOCKS5 proxy on `ADDR`"},
			&cli.StringFlag{Name: "dir", Value: session.NetSandboxDir, Usage: "the proxy's socket directory `DIR`"},
			&cli.BoolFlag{Name: "serve", Hidden: true, Usage: "be the bridge (fd 3 reports readiness)"},
		},
		Action: func(c *cli.Context) error {
			routes := netproxy.Routes(c.String("http"), c.String("socks"), c.String("dir"))
			// Host loopback services an allow rule names, at their own address.
			routes = append(routes, netproxy.ForwardRoutes(c.String("dir"))...)
			if c.Bool("serve") {
				return netproxy.ServeBridge(routes)
			}
			if c.NArg() == 0 {
				return usagef("net-bridge needs a command after --")
			}
			return netproxy.BridgeAndExec(routes, c.String("dir"), c.Args().Slice())
		},
	}
}
