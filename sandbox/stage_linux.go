package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Bind sources the sandbox's uid cannot reach.
//
// As root, art starts bwrap as the sandbox's unprivileged uid, and bwrap
// resolves every bind source (realpath) as that uid: a workspace under
// /root, or under any 0700 directory, fails with "Can't find source path:
// Permission denied" (bwrap 0.8 resolves --bind-fd's /proc/self/fd path
// the same way, so a descriptor does not help). So when art is root,
// every bind source is first bind-mounted by art itself at
// StageRoot/<n>, in a mount namespace private to the thread that forks
// bwrap (PrepareThread), and bwrap binds those paths. StageRoot is an
// empty directory on the host; the staged mounts exist only in that
// thread's namespace and bwrap's copy of it, so nothing on the host
// exposes a private directory, and nothing is left to clean up when art
// is killed.

// StageRoot is where staged bind sources appear to bwrap (an empty,
// root-owned directory on the host).
const StageRoot = "/run/art-stage"

// stagePlan lists the host paths to stage, StageRoot/<i> for source i.
type stagePlan struct {
	sources []string
}

func (p *stagePlan) path(host string) (string, bool) {
	if p == nil {
		return "", false
	}
	for i, s := range p.sources {
		if s == host {
			return filepath.Join(StageRoot, strconv.Itoa(i)), true
		}
	}
	return "", false
}

// newStagePlan returns the plan for c, or nil when nothing needs staging
// (art is not root: bwrap then runs as art's own user, who can reach
// what it names).
func newStagePlan(c *Config) *stagePlan {
	if os.Geteuid() != 0 {
		return nil
	}
	p := &stagePlan{}
	add := func(host string) {
		if _, dup := p.path(host); !dup {
			p.sources = append(p.sources, host)
		}
	}
	if c.Home == "" {
		add(c.Workspace)
	}
	for _, b := range c.Binds {
		add(b.Host)
	}
	if len(p.sources) == 0 {
		return nil
	}
	return p
}

// apply makes the calling thread's private mount namespace with the
// staged sources. The thread must be locked and must never run other
// goroutines again (it exits with its goroutine).
func (p *stagePlan) apply() error {
	if p == nil {
		return nil
	}
	// The directory itself is on the host (a mount point needs one); it
	// stays empty there.
	if err := os.Mkdir(StageRoot, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("stage binds: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("stage binds: unshare mount namespace: %w", err)
	}
	// Slave: unmounts on the host (the overlay's, at the end) still reach
	// this namespace; nothing made here reaches the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("stage binds: %w", err)
	}
	if err := unix.Mount("art-stage", StageRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("stage binds: tmpfs: %w", err)
	}
	for i, src := range p.sources {
		dst := filepath.Join(StageRoot, strconv.Itoa(i))
		var st unix.Stat_t
		if err := unix.Stat(src, &st); err != nil {
			return fmt.Errorf("bind source %s: %w", src, err)
		}
		var err error
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = os.Mkdir(dst, 0o755)
		} else {
			err = os.WriteFile(dst, nil, 0o644)
		}
		if err != nil {
			return fmt.Errorf("stage bind %s: %w", src, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("stage bind %s: %w", src, err)
		}
	}
	return nil
}

// plans holds each started command's stage plan until its thread has
// applied it (PrepareThread): a Starter gets only the *exec.Cmd.
var plans sync.Map // *exec.Cmd -> *stagePlan

// PrepareThread readies the calling thread, which must be locked to its
// goroutine and must fork cmd (a command made by Start) next: it stages
// the bind sources (see StageRoot) and enters the Landlock scope
// (ScopeThread). StartLocked calls it; a custom Starter must.
func PrepareThread(cmd *exec.Cmd) error {
	if v, ok := plans.Load(cmd); ok {
		if err := v.(*stagePlan).apply(); err != nil {
			return err
		}
	}
	_, err := ScopeThread(cmd.Path)
	return err
}
