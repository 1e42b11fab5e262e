package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// daemon is a FUSE server the overlay section started in the background:
// art mount or go-fuse's loopback example. stop ends it; the section
// defers stop, so a failure or an interrupt never leaves a mount behind.
type daemon struct {
	name string
	mnt  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited

	mu    sync.Mutex
	lines []string // stderr, the last lines, for errors and notes
	ready string   // the first stderr line starting with the ready prefix
	err   error    // the exit status, after done

	stopOnce sync.Once
	stopErr  error
}

// startDaemon runs argv and waits until mnt shows up in /proc/self/mountinfo
// and, when prefix is set, a stderr line starts with prefix (art prints
// "serving ..." once Mount returned). The process gets its own process
// group, so a Ctrl-C at the terminal reaches only the harness, which then
// stops it in order; and SIGTERM if the harness dies first.
func (b *bench) startDaemon(name, mnt, prefix string, timeout time.Duration, argv ...string) (*daemon, error) {
	d := &daemon{name: name, mnt: mnt, done: make(chan struct{})}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			if prefix != "" && d.ready == "" && strings.HasPrefix(line, prefix) {
				d.ready = line
			}
			d.lines = append(d.lines, line)
			if len(d.lines) > 50 {
				d.lines = d.lines[len(d.lines)-50:]
			}
			d.mu.Unlock()
		}
		err := d.cmd.Wait() // after the pipe is drained, as Wait requires
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
		close(d.done)
	}()
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		ready := prefix == "" || d.ready != ""
		d.mu.Unlock()
		if ready && mounted(mnt) {
			return d, nil
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("%s exited before mounting %s: %v\n%s", name, mnt, d.exitErr(), d.stderr())
		case <-b.ctx.Done():
			d.stop()
			return nil, b.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("%s did not mount %s within %s\n%s", name, mnt, timeout, d.stderr())
		}
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) exitErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *daemon) stderr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// readyLine is the stderr line that announced the mount.
func (d *daemon) readyLine() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ready
}

// stop sends SIGTERM, waits for the process to exit (art journals what is
// left and unmounts) and detaches the mount if it is still there. It
// reports a non-zero exit or a mount left behind. Safe to call twice.
func (d *daemon) stop() error {
	d.stopOnce.Do(func() {
		select {
		case <-d.done:
		default:
			d.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-d.done:
		case <-time.After(3 * time.Minute):
			d.cmd.Process.Kill()
			<-d.done
			d.stopErr = fmt.Errorf("%s did not exit within 3 minutes of SIGTERM; killed", d.name)
		}
		if err := d.exitErr(); err != nil && d.stopErr == nil {
			d.stopErr = fmt.Errorf("%s: %w\n%s", d.name, err, d.stderr())
		}
		if mounted(d.mnt) {
			if err := unix.Unmount(d.mnt, unix.MNT_DETACH); err != nil {
				d.stopErr = errors.Join(d.stopErr, fmt.Errorf("detach %s: %w", d.mnt, err))
			} else if d.stopErr == nil {
				d.stopErr = fmt.Errorf("%s left %s mounted (detached it)", d.name, d.mnt)
			}
		}
	})
	return d.stopErr
}

// cpu is the CPU time (user + system) the daemon has used so far.
func (d *daemon) cpu() time.Duration {
	return procCPU(d.pid())
}

// hwm is the daemon's peak resident set so far (VmHWM), 0 if unknown.
func (d *daemon) hwm() int64 { return procHWM(d.pid()) }

// procHWM reads VmHWM (kB) from /proc/PID/status, in bytes.
func procHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU reads utime and stime from /proc/PID/stat (clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// mounted reports whether path is a mount point in this process's
// namespace.
func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mountPoint(line) == path {
			return true
		}
	}
	return false
}

// mountPoint is field 5 of a mountinfo line, with the kernel's octal
// escapes (\040 for a space) undone.
func mountPoint(line string) string {
	f := strings.Fields(line)
	if len(f) < 5 {
		return ""
	}
	p := f[4]
	if !strings.Contains(p, `\`) {
		return p
	}
	var out strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) {
			if n, err := strconv.ParseUint(p[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		out.WriteByte(p[i])
	}
	return out.String()
}

// dropCaches writes back dirty pages and empties the page cache and the
// dentry and inode caches (FUSE nodes included), for cold reads.
func dropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("drop caches: %w", err)
	}
	return nil
}

// fuseProbe says why the overlay section cannot run here, or "".
func fuseProbe() string {
	if os.Geteuid() != 0 {
		return "needs root (FUSE passthrough, direct mounts and drop_caches)"
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return "cannot open /dev/fuse: " + err.Error()
	}
	f.Close()
	if err := unix.Access("/proc/sys/vm/drop_caches", unix.W_OK); err != nil {
		return "cannot write /proc/sys/vm/drop_caches: " + err.Error()
	}
	return ""
}
