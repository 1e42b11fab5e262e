// Package hostcheck reports what this host offers art's sandbox and
// overlay, and what each missing piece disables (art doctor).
//
// Every check probes the real thing where it can be done cheaply and
// without side effects (open /dev/fuse, start bwrap with a user namespace,
// ask the kernel for its Landlock ABI) rather than inferring from
// configuration files, which lie on containers and hardened kernels. The
// package imports nothing of art.
package hostcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Status of one check.
type Status string

const (
	OK      Status = "ok"
	Missing Status = "missing" // the feature is not available; Disables says what stops working
	Limited Status = "limited" // works with a reduced guarantee; Detail says which
)

// Check is one line of the report. Field names are the stable JSON form.
type Check struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Disables string `json:"disables,omitempty"` // what does not work without it
	Fix      string `json:"fix,omitempty"`      // what a user can do
	// Essential checks stop every sandboxed run when missing.
	Essential bool `json:"essential,omitempty"`
}

// Run performs every check. It takes at most a few seconds (bwrap is
// started once, bounded by ctx and a 10 s limit).
func Run(ctx context.Context) []Check {
	bw := checkBwrap()
	checks := []Check{bw, checkUserNS(ctx, bw)}
	checks = append(checks, checkFUSE()...)
	checks = append(checks, checkPassthrough(), checkURing(), checkCgroups(), checkSeccomp(), checkLandlock(), checkPtrace())
	return checks
}

// Healthy reports whether no essential check is missing.
func Healthy(cs []Check) bool {
	for _, c := range cs {
		if c.Essential && c.Status == Missing {
			return false
		}
	}
	return true
}

func checkBwrap() Check {
	c := Check{Name: "bwrap", Essential: true}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		c.Status, c.Detail = Missing, "bwrap is not on PATH"
		c.Disables = "every art run and art exec"
		c.Fix = "apt-get install bubblewrap (make deps does it)"
		return c
	}
	out, _ := exec.Command(path, "--version").Output()
	c.Status, c.Detail = OK, strings.TrimSpace(path+" "+string(out))
	return c
}

// checkUserNS starts bwrap with a new user namespace, as the sandbox does
// (as root: as nobody, because art runs the sandbox as an unprivileged uid).
func checkUserNS(ctx context.Context, bw Check) Check {
	c := Check{Name: "user namespaces", Essential: true,
		Disables: "every art run and art exec (bwrap cannot make the sandbox)"}
	var hints []string
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "sysctl user.max_user_namespaces=0")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "sysctl kernel.unprivileged_userns_clone=0")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		hints = append(hints, "AppArmor restricts unprivileged user namespaces")
	}
	if bw.Status != OK {
		c.Status, c.Detail = Missing, "not tried: no bwrap"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bwrap", "--unshare-user", "--unshare-pid", "--unshare-net",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "/bin/true")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		c.Status = Missing
		c.Detail = strings.TrimSpace(fmt.Sprintf("bwrap --unshare-user: %v %s", err, firstLine(stderr.String())))
		if len(hints) > 0 {
			c.Detail += " (" + strings.Join(hints, "; ") + ")"
		}
		c.Fix = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0, or an AppArmor profile for bwrap)"
		return c
	}
	c.Status, c.Disables, c.Detail = OK, "", "bwrap made a user, pid and network namespace"
	return c
}

func checkFUSE() []Check {
	c := Check{Name: "FUSE", Disables: "art run -d, art exec, art mount (history needs the overlay); direct mode (no -d) still works"}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	switch {
	case err == nil:
		f.Close()
		c.Status = OK
		c.Detail = "/dev/fuse opens read-write"
	case errors.Is(err, os.ErrNotExist):
		c.Status, c.Detail = Missing, "/dev/fuse does not exist"
		c.Fix = "modprobe fuse (in a container: run it with --device /dev/fuse)"
	default:
		c.Status, c.Detail = Missing, "cannot open /dev/fuse: "+err.Error()
		c.Fix = "make /dev/fuse usable by this user: chmod 0666 /dev/fuse, or add the user to the group owning it"
	}
	out := []Check{c}
	if os.Geteuid() != 0 {
		// Without root, mounts go through the setuid fusermount3.
		fm := Check{Name: "fusermount3", Disables: c.Disables}
		p, err := exec.LookPath("fusermount3")
		if err != nil {
			p, err = exec.LookPath("fusermount")
		}
		var st unix.Stat_t
		switch {
		case err != nil:
			fm.Status, fm.Detail, fm.Fix = Missing, "not on PATH", "apt-get install fuse3"
		case unix.Stat(p, &st) != nil || st.Mode&unix.S_ISUID == 0 || st.Uid != 0:
			fm.Status, fm.Detail, fm.Fix = Missing, p+" is not setuid root", "chmod u+s "+p
		default:
			fm.Status, fm.Detail, fm.Disables = OK, p, ""
		}
		out = append(out, fm)
		ao := Check{Name: "user_allow_other", Disables: "art mount --allow-other as a non-root user"}
		if b, err := os.ReadFile("/etc/fuse.conf"); err == nil && hasLine(b, "user_allow_other") {
			ao.Status, ao.Disables = OK, ""
		} else {
			ao.Status, ao.Detail, ao.Fix = Limited, "/etc/fuse.conf lacks user_allow_other", "add user_allow_other to /etc/fuse.conf"
		}
		out = append(out, ao)
	}
	return out
}

func checkPassthrough() Check {
	c := Check{Name: "FUSE passthrough",
		Disables: "kernel-speed reads and writes of host files and private copies (they go through the daemon instead)"}
	var u unix.Utsname
	unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	major, minor := kernelVersion(rel)
	switch {
	case major < 6 || (major == 6 && minor < 9):
		c.Status, c.Detail, c.Fix = Missing, "kernel "+rel+" (needs 6.9 or later)", "a newer kernel"
	case os.Geteuid() != 0:
		c.Status, c.Detail, c.Fix = Missing, "kernel "+rel+" has it, but backing files need CAP_SYS_ADMIN", "run art as root (the sandbox itself still runs unprivileged)"
	default:
		c.Status, c.Detail, c.Disables = OK, "kernel "+rel+", root", ""
	}
	return c
}

// uringSwitch is the fuse module's switch for FUSE over io_uring; the
// file exists when the kernel has the transport (Linux 6.14 and later,
// built with it).
const uringSwitch = "/sys/module/fuse/parameters/enable_uring"

func checkURing() Check {
	c := Check{Name: "FUSE over io_uring",
		Disables: "requests answered over io_uring, a queue per CPU (the mount's round trips cost more through /dev/fuse)"}
	b, err := os.ReadFile(uringSwitch)
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = Missing, "the kernel has no FUSE over io_uring", "Linux 6.14 or later built with CONFIG_FUSE_IO_URING"
	case os.Getenv("ART_FUSE_URING") == "0":
		c.Status, c.Detail, c.Fix = Missing, "off: ART_FUSE_URING=0", "unset ART_FUSE_URING"
	case os.Geteuid() != 0:
		c.Status, c.Detail, c.Fix = Missing, "the kernel has it, but art uses it only for root's own direct mounts", "run art as root (the sandbox itself still runs unprivileged)"
	case strings.TrimSpace(string(b)) == "Y":
		c.Status, c.Detail, c.Disables = OK, "enable_uring=Y, root", ""
	default:
		c.Status, c.Detail, c.Disables = OK, "enable_uring=N: art switches it on at its first mount", ""
	}
	return c
}

func checkCgroups() Check {
	c := Check{Name: "cgroups",
		Disables: "whole-tree limits: --memory, --pids and --cpu fall back to per-process rlimits; a stray process can outlive --timeout"}
	self := ownCgroupV2()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir := filepath.Join("/sys/fs/cgroup", self)
		if unix.Access(dir, unix.W_OK) == nil {
			c.Status, c.Detail, c.Disables = OK, "cgroup v2, "+dir+" is writable (delegated)", ""
			return c
		}
		c.Status, c.Detail = Limited, "cgroup v2, but "+dir+" is not writable by this user"
		c.Fix = "delegate a cgroup to the user (systemd-run --user --scope -p Delegate=yes art ...)"
		return c
	}
	var ok []string
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		if unix.Access(filepath.Join("/sys/fs/cgroup", ctl), unix.W_OK) == nil {
			ok = append(ok, ctl)
		}
	}
	if len(ok) == 3 {
		c.Status, c.Detail, c.Disables = OK, "cgroup v1: memory, pids and cpu writable", ""
		return c
	}
	c.Status, c.Detail = Limited, fmt.Sprintf("cgroup v1, writable controllers: %v", ok)
	c.Fix = "run as root, or on a cgroup v2 host with delegation"
	return c
}

// ownCgroupV2 is this process's cgroup v2 path ("0::/path").
func ownCgroupV2() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return "/"
}

func checkSeccomp() Check {
	c := Check{Name: "seccomp", Essential: true,
		Disables: "the sandbox's syscall deny-list and art run --trace"}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil || !bytes.Contains(b, []byte("\nSeccomp:")) {
		c.Status, c.Detail, c.Fix = Missing, "the kernel has no seccomp (CONFIG_SECCOMP_FILTER)", "a kernel with seccomp filters"
		return c
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		c.Status, c.Detail = Missing, "prctl(PR_GET_SECCOMP): "+err.Error()
		return c
	}
	c.Status, c.Disables, c.Detail = OK, "", "seccomp filters"
	return c
}

func checkLandlock() Check {
	c := Check{Name: "Landlock",
		Disables: "the extra Landlock scope on traced runs (defence in depth; the sandbox does not depend on it)"}
	const createRulesetVersion = 1 // LANDLOCK_CREATE_RULESET_VERSION
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		c.Status, c.Detail = Missing, "landlock_create_ruleset: "+errno.Error()
		c.Fix = "a kernel with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot list"
		return c
	}
	c.Status, c.Disables, c.Detail = OK, "", "ABI version "+strconv.Itoa(int(abi))
	return c
}

func checkPtrace() Check {
	c := Check{Name: "ptrace", Disables: "art run --trace"}
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	scope := strings.TrimSpace(string(b))
	switch {
	case err != nil:
		c.Status, c.Detail, c.Disables = OK, "no Yama restrictions", ""
	case scope == "3":
		c.Status, c.Detail, c.Fix = Missing, "kernel.yama.ptrace_scope=3 forbids ptrace", "sysctl kernel.yama.ptrace_scope=1 (needs a reboot from 3)"
	case scope == "2" && os.Geteuid() != 0:
		c.Status, c.Detail, c.Fix = Missing, "kernel.yama.ptrace_scope=2 allows ptrace only with CAP_SYS_PTRACE", "run art as root or lower ptrace_scope"
	default:
		c.Status, c.Detail, c.Disables = OK, "kernel.yama.ptrace_scope="+scope, ""
	}
	return c
}

func kernelVersion(rel string) (int, int) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ := strconv.Atoi(parts[0])
	return major, leadingInt(parts[1])
}

// leadingInt is the number s starts with ("1rc2" -> 1).
func leadingInt(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

func hasLine(b []byte, want string) bool {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == want {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
