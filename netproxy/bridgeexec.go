package netproxy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/artrt/art/internal/errclass"
)

// ErrCommandNotFound: BridgeAndExec found no such command on PATH (the
// shell's exit 127).
var ErrCommandNotFound = errclass.New(errclass.CommandNotFound, "command not found")

// ServeBridge is the in-sandbox half's detached copy (art net-bridge
// --serve): it listens, says "ok" (or why not) on fd 3, and serves until
// killed. Its parent's death (the command's exit) kills it: the
// parent-death signal, and bwrap's pid-namespace init.
func ServeBridge(routes []Route) error {
	ready := os.NewFile(3, "ready")
	b, err := StartBridge(routes)
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

// BridgeAndExec is the in-sandbox half of --net allow (art net-bridge,
// the sandbox's command under session.NetBridgeArgv): it starts a detached copy of
// this binary (ServeBridge) that forwards routes' loopback ports to the
// proxy's sockets in dir, waits until that copy listens, then replaces
// this process with argv, the proxy variables set, so the command keeps
// the pid and exit status it would have had. A command not on PATH is
// ErrCommandNotFound.
func BridgeAndExec(routes []Route, dir string, argv []string) error {
	env := proxyEnv(os.Environ(), Env(routes[0].Listen, routes[1].Listen))
	path, err := lookPath(argv[0], env)
	if err != nil {
		return err
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
		"--dir", dir)
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
	return "", fmt.Errorf("%s: %w", file, ErrCommandNotFound)
}
