package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/seccomp"
)

// execSandbox runs exec requests in the sandbox over one mounted session:
// the overlay stays mounted between requests (warm exec), each request is
// a bwrap of its own, journaled under the request's op.
type execSandbox struct {
	s    *session
	base sandbox.Config // what every request shares: workspace, home, hiding, seccomp, uid
}

// newSandboxExecutor mounts o.Branch's overlay once and returns the
// executor art exec serves requests with, and the function that releases
// it (unmount, close the store) after the last response.
func newSandboxExecutor(ctx context.Context, e *env, o execOptions) (execapi.Executor, func() error, error) {
	ro := runOptions{db: o.DB, dir: o.Mount, durability: o.Durability, branch: o.Branch, branchSet: o.Branch != ""}
	if ro.branch == "" {
		ro.branch = journal.DefaultBranch
	}
	if ro.durability == "" {
		ro.durability = string(journal.DurabilityNormal)
	}
	abs, err := filepath.Abs(ro.dir)
	if err != nil {
		return nil, nil, err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, nil, usagef("workspace %s is not a directory", o.Mount)
	}
	ro.dir = abs
	if ro.uid, ro.gid, err = sandboxUser("", abs); err != nil {
		return nil, nil, err
	}
	name := filepath.Base(abs)
	fileBinds, err := readBindsFile(abs)
	if err != nil {
		return nil, nil, err
	}
	prog, err := (seccomp.Policy{}).Program()
	if err != nil {
		return nil, nil, err
	}
	x := &execSandbox{base: sandbox.Config{Name: name, Workspace: abs, PolicyDir: filepath.Join(abs, sandbox.ArtDir),
		Binds: fileBinds, UID: ro.uid, GID: ro.gid, Seccomp: prog}}
	// Requests' messages about the capture go to stderr; stdout carries
	// only responses.
	s, err := openSession(ctx, e, ro, &x.base, nil)
	if err != nil {
		if s.db != nil {
			s.db.Close()
		}
		return nil, nil, err
	}
	x.s = s
	release := func() error {
		err := s.close(context.WithoutCancel(ctx))
		if cerr := s.db.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return &journaledExecutor{db: s.db, branch: s.branch, run: x.run}, release, nil
}

// run executes one validated request, its file changes journaled under op.
func (x *execSandbox) run(ctx context.Context, req *execapi.Request, op *journal.Op) *execapi.Response {
	fsys := x.s.fsys
	if err := fsys.SetOp(op); err != nil {
		return execapi.Failed(execapi.Errorf(execapi.CodeStore, "journal under %s: %v", req.ExecutionID, err))
	}
	defer fsys.SetOp(nil)
	fsys.SetQuota(req.Resources.DiskBytes)
	defer fsys.SetQuota(0)

	cfg := x.base
	cfg.Command = req.Command
	cfg.Cwd = req.WorkingDirectory
	cfg.Net = sandbox.NetNone
	if req.Isolation.Network {
		cfg.Net = sandbox.NetHost
	}
	keys := make([]string, 0, len(req.Environment))
	for k := range req.Environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cfg.Env = append(cfg.Env, k+"="+req.Environment[k])
	}
	cfg.Binds = append([]sandbox.Bind(nil), x.base.Binds...)
	for _, b := range req.Isolation.BindMounts {
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: b.Source, Guest: b.Destination, ReadOnly: b.ReadOnly})
	}
	cfg.Limits = sandbox.Limits{MemoryBytes: req.Resources.MemoryBytes, Pids: req.Resources.MaxPids,
		CPUSeconds: (req.Resources.CPUMS + 999) / 1000}
	if e := lookCommand(&cfg); e != nil {
		return execapi.Failed(e)
	}

	stdout, stderr := execapi.NewCapture(req.OutputLimit()), execapi.NewCapture(req.OutputLimit())
	var stdin *strings.Reader
	stdio := sandbox.IO{Stdout: stdout, Stderr: stderr}
	if req.Stdin != "" {
		stdin = strings.NewReader(req.Stdin)
		stdio.Stdin = stdin
	}
	made := bindMountPoints(&cfg)
	started := time.Now()
	p, err := sandbox.Start(&cfg, stdio, nil)
	if err != nil {
		removeMountPoints(made)
		return execapi.Failed(execapi.Errorf(execapi.CodeSetup, "start the sandbox: %v", err))
	}
	timeout := time.Duration(req.Timeout()) * time.Millisecond
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	cancelled := false
	select {
	case <-p.Done():
	case <-timer.C:
		p.Stop(execapi.DefaultKillGrace, true)
	case <-ctx.Done():
		cancelled = true
		p.Stop(0, false)
	}
	res, werr := p.Wait()
	removeMountPoints(made)
	if werr != nil {
		return execapi.Failed(execapi.Errorf(execapi.CodeExecFailed, "%v", werr))
	}
	// Whatever the command left dirty (written through a mapping after
	// its last close) is journaled before the snapshot.
	if err := fsys.Flush(context.WithoutCancel(ctx)); err != nil {
		return execapi.Failed(execapi.Errorf(execapi.CodeStore, "journal the changes of %s: %v", req.ExecutionID, err))
	}
	out := execapi.Outcome{Started: started, Wall: res.Wall, User: res.UserTime, Kernel: res.SysTime,
		MaxMemory: res.MaxMemory, Signal: res.Signal, TimedOut: res.TimedOut, Timeout: timeout, Cancelled: cancelled}
	if res.Signal == 0 {
		out.ExitCode = res.ExitCode
	}
	switch {
	case res.OOMKilled:
		out.Limit = execapi.LimitError(execapi.CodeMemoryLimit, req)
	case res.Signal == syscall.SIGXCPU || (req.Resources.CPUMS > 0 && res.Signal == syscall.SIGKILL && res.UserTime+res.SysTime >= time.Duration(req.Resources.CPUMS)*time.Millisecond):
		out.Limit = execapi.LimitError(execapi.CodeCPULimit, req)
	case req.Resources.DiskBytes > 0 && fsys.Used() >= req.Resources.DiskBytes && res.ExitCode != 0:
		out.Limit = execapi.LimitError(execapi.CodeDiskLimit, req)
	}
	return out.Response(stdout, stderr)
}

// lookCommand checks that the request's command exists in the sandbox,
// so a missing one is E3001 rather than bwrap's exit 1.
func lookCommand(cfg *sandbox.Config) *execapi.Error {
	name := cfg.Command[0]
	path := sandbox.DefaultPath
	for _, kv := range cfg.Env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	cwd := cfg.Cwd
	if cwd == "" {
		cwd = sandbox.GuestHome + "/" + cfg.Name
	}
	var candidates []string
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(cwd, name)
		}
		candidates = []string{name}
	} else {
		for _, d := range filepath.SplitList(path) {
			candidates = append(candidates, filepath.Join(d, name))
		}
	}
	for _, c := range candidates {
		host := c
		for _, b := range cfg.Binds {
			if rel, ok := strings.CutPrefix(c, filepath.Clean(b.Guest)+"/"); ok {
				host = filepath.Join(b.Host, rel)
			}
		}
		if host != c {
			// reached through a bind
		} else if rel, ok := strings.CutPrefix(c, sandbox.GuestHome+"/"); ok {
			if cfg.Home != "" {
				host = filepath.Join(cfg.Home, rel)
			} else if wrel, ok := strings.CutPrefix(rel, cfg.Name+"/"); ok {
				host = filepath.Join(cfg.Workspace, wrel) // direct mode: the workspace bind
			} else {
				return nil // direct mode's /home/agent is a private tmpfs: let it try
			}
		} else if strings.HasPrefix(c, "/tmp/") || strings.HasPrefix(c, "/run/") || c == sandbox.GuestHome {
			return nil // private to the sandbox: let it try
		}
		if st, err := os.Stat(host); err == nil && !st.IsDir() {
			if st.Mode()&0o111 == 0 {
				return execapi.Errorf(execapi.CodeNoExec, "%s is not executable", c)
			}
			return nil
		}
	}
	return execapi.Errorf(execapi.CodeNotFound, "command not found: %s (PATH=%s)", cfg.Command[0], path)
}
