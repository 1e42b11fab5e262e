package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroup is the sandbox's control group: v2 (one directory) or v1 (one
// directory per controller). It bounds the tree's resources, lists every
// process of it (so a kill misses none) and reports peak memory.
//
// Joining it costs. Moving a process into a cgroup (a write of its pid to
// cgroup.procs) takes the kernel's global threadgroup lock for writing,
// which waits for an RCU grace period: 10-25 ms on these machines, most
// of art run's start-up. A thread that moves only itself (a write of "0"
// to a v1 hierarchy's tasks file) does not take that lock. So on v1 the
// thread that forks bwrap joins the cgroup (joinThread), forks - bwrap is
// born in it, and its child too - and leaves again before the command is
// released; confine checks that bwrap and its child are in (holds) and
// moves them the slow way only when they are not (a custom Starter, v2).
type cgroup struct {
	version int               // 1 or 2
	dirs    map[string]string // controller ("" for v2) -> directory
	pidsMax int64             // written by applyPidsMax once art's thread has left (0: none)
}

const cgroupRoot = "/sys/fs/cgroup"

// newCgroup makes a cgroup for one sandbox, named name, with lim applied.
// It returns nil and the reason when this machine does not let art make
// one (not root, no delegation): the caller falls back to rlimits.
// own is this process's cgroups (readOwnCgroups), read once for both.
func newCgroup(name string, lim Limits, own ownCgroups) (*cgroup, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil {
		return nil, fmt.Errorf("no cgroup filesystem: %w", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return newCgroupV2(filepath.Join(cgroupRoot, own.of("")), name, lim)
	}
	return newCgroupV1(name, lim, own)
}

// ownCgroups is this process's cgroup path in each hierarchy, by
// controller (v1; a hierarchy of several controllers under each of them)
// and "" for the unified hierarchy: /proc/self/cgroup, read once a
// sandbox start (it was read five times, once per use).
type ownCgroups map[string]string

func readOwnCgroups() ownCgroups {
	own := ownCgroups{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return own
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if _, dup := own[c]; !dup {
				own[c] = parts[2] // the first line naming c, as before
			}
		}
	}
	return own
}

// of is the path in the hierarchy with the controller (v1) or the
// unified hierarchy (""); "/" when unknown.
func (own ownCgroups) of(controller string) string {
	if p, ok := own[controller]; ok {
		return p
	}
	return "/"
}

func newCgroupV2(base, name string, lim Limits) (*cgroup, error) {
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	cg := &cgroup{version: 2, dirs: map[string]string{"": dir}}
	need := map[string]bool{"memory.max": lim.MemoryBytes > 0, "pids.max": lim.Pids > 0, "cpu.max": lim.CPU > 0}
	for file, needed := range need {
		if needed && !exists(filepath.Join(dir, file)) {
			cg.remove()
			return nil, fmt.Errorf("cgroup v2: controller for %s not delegated to %s", file, base)
		}
	}
	var errs []error
	if lim.MemoryBytes > 0 {
		errs = append(errs, writeFile(dir, "memory.max", lim.MemoryBytes), writeFile(dir, "memory.swap.max", 0))
	}
	cg.pidsMax = lim.Pids
	if lim.CPU > 0 {
		errs = append(errs, writeFile(dir, "cpu.max", fmt.Sprintf("%d 100000", int64(lim.CPU*100000))))
	}
	if err := errors.Join(errs...); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

func newCgroupV1(name string, lim Limits, own ownCgroups) (*cgroup, error) {
	cg := &cgroup{version: 1, dirs: map[string]string{}}
	// memory and pids always (peak memory, the process list); cpu when a
	// limit asks for it.
	for _, c := range []string{"memory", "pids", "cpu"} {
		if c == "cpu" && lim.CPU == 0 {
			continue
		}
		root := filepath.Join(cgroupRoot, c)
		if !exists(filepath.Join(root, "cgroup.procs")) {
			cg.remove()
			return nil, fmt.Errorf("cgroup v1: no %s controller", c)
		}
		dir := filepath.Join(root, own.of(c), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup v1: %w", err)
		}
		cg.dirs[c] = dir
	}
	var errs []error
	if lim.MemoryBytes > 0 {
		errs = append(errs, writeFile(cg.dirs["memory"], "memory.limit_in_bytes", lim.MemoryBytes))
		if exists(filepath.Join(cg.dirs["memory"], "memory.memsw.limit_in_bytes")) {
			errs = append(errs, writeFile(cg.dirs["memory"], "memory.memsw.limit_in_bytes", lim.MemoryBytes))
		}
		// No swap for the tree, so the limit is a limit.
		errs = append(errs, writeFile(cg.dirs["memory"], "memory.swappiness", 0))
	}
	cg.pidsMax = lim.Pids
	if lim.CPU > 0 {
		errs = append(errs, writeFile(cg.dirs["cpu"], "cpu.cfs_period_us", 100000),
			writeFile(cg.dirs["cpu"], "cpu.cfs_quota_us", int64(lim.CPU*100000)))
	}
	if err := errors.Join(errs...); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

func writeFile(dir, file string, v any) error {
	p := filepath.Join(dir, file)
	if err := os.WriteFile(p, []byte(fmt.Sprint(v)), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err) // the PathError names p
	}
	return nil
}

// String names the mechanism for the user.
func (cg *cgroup) String() string { return fmt.Sprintf("cgroup v%d", cg.version) }

// applyPidsMax writes the process limit. It waits until the tree is in
// and art's forking thread has left (confine): that thread, while in,
// counts as one of the cgroup's tasks, and bwrap may fork its child
// before the thread is out.
func (cg *cgroup) applyPidsMax() error {
	if cg.pidsMax <= 0 {
		return nil
	}
	dir := cg.dirs[""]
	if cg.version == 1 {
		dir = cg.dirs["pids"]
	}
	return writeFile(dir, "pids.max", cg.pidsMax)
}

// joinThread moves the calling thread, which must be locked to its
// goroutine, into the cgroup (v1: "0" written to each hierarchy's tasks
// file moves the writer alone, without the kernel's global lock); leave
// moves it back to the cgroups it came from. What it forks meanwhile is
// born in the cgroup. On v2 (no per-thread placement outside threaded
// cgroups) it returns an error and changes nothing.
func (cg *cgroup) joinThread() (leave func() error, err error) {
	if cg.version != 1 {
		return nil, errors.New("cgroup v2: no per-thread placement")
	}
	var joined []string
	leave = func() error {
		var errs []error
		for _, dir := range joined {
			// The thread's cgroup before it joined: the sandbox's
			// parent, art's own cgroup when the sandbox's was made.
			errs = append(errs, writeFile(filepath.Dir(dir), "tasks", 0))
		}
		joined = nil
		return errors.Join(errs...)
	}
	for _, dir := range cg.dirs {
		if err := writeFile(dir, "tasks", 0); err != nil {
			return nil, errors.Join(err, leave())
		}
		joined = append(joined, dir)
	}
	return leave, nil
}

// holds reports whether process pid is in the cgroup in every hierarchy
// (read from /proc/PID/cgroup; false when it cannot be read).
func (cg *cgroup) holds(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for c, dir := range cg.dirs {
		want := strings.TrimPrefix(dir, filepath.Join(cgroupRoot, c))
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || parts[2] != want {
				continue
			}
			if cg.version == 2 && parts[0] == "0" && parts[1] == "" {
				found = true
			}
			if cg.version == 1 && slices.Contains(strings.Split(parts[1], ","), c) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// add moves pids into the cgroup (every controller).
func (cg *cgroup) add(pids ...int) error {
	for _, dir := range cg.dirs {
		for _, pid := range pids {
			if err := writeFile(dir, "cgroup.procs", pid); err != nil {
				return err
			}
		}
	}
	return nil
}

// procs lists the processes in the cgroup.
func (cg *cgroup) procs() []int {
	dir := cg.dirs[""]
	if cg.version == 1 {
		dir = cg.dirs["pids"]
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		// Never art itself: its forking thread is in the cgroup for a
		// moment (joinThread), and a thread that could not leave stays.
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

// killAll SIGKILLs every process in the cgroup until it is empty (a fork
// racing with the kill lands in the cgroup and is caught next round).
func (cg *cgroup) killAll() {
	for i := 0; i < 100; i++ {
		pids := cg.procs()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// peakMemory is the tree's peak memory use in bytes (0 if unknown).
func (cg *cgroup) peakMemory() int64 {
	dir, file := cg.dirs["memory"], "memory.max_usage_in_bytes"
	if cg.version == 2 {
		dir, file = cg.dirs[""], "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// oomKills counts processes the kernel killed for the memory limit.
func (cg *cgroup) oomKills() int64 {
	dir, file := cg.dirs["memory"], "memory.oom_control"
	if cg.version == 2 {
		dir, file = cg.dirs[""], "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// remove kills what is left and removes the directories.
func (cg *cgroup) remove() {
	if len(cg.procs()) > 0 {
		cg.killAll()
	}
	for _, dir := range cg.dirs {
		// Exiting tasks leave the cgroup asynchronously: retry briefly,
		// quickly at first (usually they are gone within a millisecond).
		for wait := 200 * time.Microsecond; wait < time.Second; wait *= 2 {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(wait)
		}
	}
}

// cleanStaleCgroups removes the cgroups that an art killed with SIGKILL
// left behind (its deferred remove never ran): art-PID-N whose PID is
// gone, in every controller art uses. Only empty ones go - rmdir refuses
// the others - and nothing in them is killed: a killed art's sandbox died
// with it (--die-with-parent, the pid namespace), so a cgroup with
// processes belongs to a live art in another pid namespace, whose PID
// this one cannot see.
//
// It never touches this process's own cgroups (art-PID-N of its PID), so
// a sandbox start runs it beside its own (chooseLimits).
func cleanStaleCgroups(own ownCgroups) {
	var st unix.Statfs_t
	if unix.Statfs(cgroupRoot, &st) != nil {
		return
	}
	var parents []string
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		parents = []string{filepath.Join(cgroupRoot, own.of(""))}
	} else {
		for _, c := range []string{"memory", "pids", "cpu"} {
			parents = append(parents, filepath.Join(cgroupRoot, c, own.of(c)))
		}
	}
	for _, parent := range parents {
		dirs, _ := filepath.Glob(filepath.Join(parent, "art-*-*"))
		for _, d := range dirs {
			f := strings.Split(filepath.Base(d), "-")
			if len(f) != 3 {
				continue
			}
			pid, err := strconv.Atoi(f[1])
			if err != nil || pid <= 0 || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
				continue
			}
			os.Remove(d)
		}
	}
}
