package execapi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// DefaultPath is the PATH of a command whose request does not set one.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// ProcessCommand prepares requests as plain host processes: no sandbox.
// It exists for tests of the engine and as the shape of the sandboxed
// PrepareFunc. dir is the working directory when the request has none;
// env is the base environment (PATH defaults to DefaultPath), which the
// request's environment overrides. Nothing else comes from art's own
// environment.
//
// It refuses (CodeUnsupported) what only a sandbox can honour: memory,
// pids, cpu and disk limits, bind mounts, branch and at. isolation.network
// false (the default) is honoured with a new network namespace when art
// runs as root and refused otherwise.
func ProcessCommand(dir string, env []string) PrepareFunc {
	return func(ctx context.Context, req *Request) (*Launch, error) {
		res := req.Resources
		switch {
		case res.MemoryBytes != 0, res.MaxPids != 0, res.CPUMS != 0, res.DiskBytes != 0:
			return nil, Errorf(CodeUnsupported, "resources other than max_output_bytes need the sandbox executor")
		case len(req.Isolation.BindMounts) > 0:
			return nil, Errorf(CodeUnsupported, "isolation.bind_mounts needs the sandbox executor")
		case req.Branch != "" || req.At != "":
			return nil, Errorf(CodeUnsupported, "branch and at need a store (the sandbox executor)")
		case !req.Isolation.Network && os.Geteuid() != 0:
			return nil, Errorf(CodeUnsupported, "isolation.network false needs root or the sandbox executor")
		}
		path, err := lookPath(req.Command[0], req.Environment, env)
		if err != nil {
			return nil, startError(req.Command[0], err)
		}
		cmd := &exec.Cmd{Path: path, Args: req.Command, Dir: dir, Env: mergeEnv(env, req.Environment)}
		if req.WorkingDirectory != "" {
			cmd.Dir = req.WorkingDirectory
		}
		// Pdeathsig: if art dies the command does too (its goroutine is
		// not locked to a thread, and Go does not end unlocked threads).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if !req.Isolation.Network {
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
		}
		return &Launch{Cmd: cmd}, nil
	}
}

// lookPath resolves name in the PATH the command will see (exec.LookPath
// would use art's own PATH).
func lookPath(name string, reqEnv map[string]string, base []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, ok := reqEnv["PATH"]
	if !ok {
		path = DefaultPath
		for _, kv := range base {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func mergeEnv(base []string, req map[string]string) []string {
	m := map[string]string{"PATH": DefaultPath}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	for k, v := range req {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
