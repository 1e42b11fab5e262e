package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/artrt/art/netproxy"
	"github.com/urfave/cli/v2"
)

// newNetBridgeCommand is the in-sandbox half of --net allow. art run
// makes it the sandbox's command: it starts a detached copy of itself that
// forwards loopback ports to the proxy's sockets, waits until that copy
// listens, then execs the real command with the proxy variables set, so
// the command keeps the pid and exit status it would have had.
func newNetBridgeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "net-bridge",
		Hidden:    true,
		Usage:     "(inside the sandbox) bridge loopback ports to art's proxy, then run a command",
		UsageText: "art net-bridge [--http ADDR] [--socks ADDR] [--dir DIR] -- CMD [ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Value: netHTTPAddr, Usage: "serve the HTTP proxy on `ADDR`"},
			&cli.StringFlag{Name: "socks", Value: netSOCKSAddr, Usage: "serve the SOCKS5 proxy on `ADDR`"},
			&cli.StringFlag{Name: "dir", Value: netSandboxDir, Usage: "the proxy's socket directory `DIR`"},
			&cli.BoolFlag{Name: "serve", Hidden: true, Usage: "be the bridge (fd 3 reports readiness)"},
		},
		Action: func(c *cli.Context) error {
			routes := netproxy.Routes(c.String("http"), c.String("socks"), c.String("dir"))
			// Host loopback services an allow rule names, at their own address.
			routes = append(routes, netproxy.ForwardRoutes(c.String("dir"))...)
			if c.Bool("serve") {
				return serveBridge(routes)
			}
			if c.NArg() == 0 {
				return usagef("net-bridge needs a command after --")
			}
			return bridgeAndExec(c, routes, c.Args().Slice())
		},
	}
}

// serveBridge is the detached copy: it listens, says "ok" (or why not) on
// fd 3, and serves until killed. Its parent's death (the command's exit)
// kills it: the parent-death signal, and bwrap's pid-namespace init.
func serveBridge(routes []netproxy.Route) error {
	ready := os.NewFile(3, "ready")
	b, err := netproxy.StartBridge(routes)
	if err != nil {
		fmt.Fprintln(ready, err)
		ready.Close()
		return err
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGHUP)
	<-sig
	return b.Close()
}

// bridgeAndExec starts the bridge and replaces this process with argv.
func bridgeAndExec(c *cli.Context, routes []netproxy.Route, argv []string) error {
	env := proxyEnv(os.Environ(), netproxy.Env(routes[0].Listen, routes[1].Listen))
	path, err := lookPath(argv[0], env)
	if err != nil {
		return &exitCoder{code: 127, err: err}
	}
	// The parent-death signal follows the thread that forked, and exec
	// from another thread would end that one: fork and exec on one thread.
	runtime.LockOSThread()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv := exec.Command(self, "net-bridge", "--serve", "--http", routes[0].Listen, "--socks", routes[1].Listen,
		"--dir", c.String("dir"))
	srv.ExtraFiles = []*os.File{w}
	srv.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true, // not in the terminal's foreground group: Ctrl-C is for the command
		Pdeathsig: syscall.SIGKILL,
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start net bridge: %w", err)
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if line = strings.TrimSpace(line); line != "ok" {
		srv.Process.Kill()
		srv.Wait()
		if line == "" {
			line = "exited before listening"
		}
		return fmt.Errorf("net bridge: %s", line)
	}
	err = syscall.Exec(path, argv, env)
	srv.Process.Kill()
	return fmt.Errorf("exec %s: %w", argv[0], err)
}

// proxyEnv replaces any proxy variables in env with proxy.
func proxyEnv(env, proxy []string) []string {
	out := make([]string, 0, len(env)+len(proxy))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return append(out, proxy...)
}

// lookPath finds file on env's PATH (the command's, not art's).
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", file, errors.New("command not found"))
}
