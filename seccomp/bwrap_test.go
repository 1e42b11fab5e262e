package seccomp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"golang.org/x/sys/unix"
)

// probeEnv makes the test binary act as the probe program: it runs each
// system call named in the variable and prints "name errno" per line.
const probeEnv = "ART_SECCOMP_PROBE"

func TestMain(m *testing.M) {
	if list, ok := os.LookupEnv(probeEnv); ok {
		probe(strings.Split(list, ","))
		os.Exit(0)
	}
	testutil.Main(m)
}

// probes are the calls the probe program can make. Arguments are chosen so
// that, without a filter, the call fails cheaply with an errno other than
// EPERM where the kernel allows it (bad pointers, bad fds).
var probes = map[string]func() syscall.Errno{
	"getpid":          func() syscall.Errno { return raw(unix.SYS_GETPID) },
	"keyctl":          func() syscall.Errno { return raw(unix.SYS_KEYCTL, 9999) },
	"add_key":         func() syscall.Errno { return raw(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0) },
	"request_key":     func() syscall.Errno { return raw(unix.SYS_REQUEST_KEY, 0, 0, 0, 0) },
	"perf_event_open": func() syscall.Errno { return raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) },
	// TIOCSTI goes to /dev/null: without the filter the kernel answers
	// ENOTTY (on a tty that is not the controlling one it would say EPERM
	// itself, hiding whether the filter worked); the filter answers first.
	"ioctl_TIOCSTI":      func() syscall.Errno { return tiocsti(unix.TIOCSTI) },
	"ioctl_TIOCSTI_high": func() syscall.Errno { return tiocsti(1<<32 | unix.TIOCSTI) },
	"ioctl_TIOCLINUX": func() syscall.Errno {
		c := byte(0)
		return raw(unix.SYS_IOCTL, 0, unix.TIOCLINUX, ptr(&c))
	},
	"ioctl_TIOCGWINSZ": func() syscall.Errno {
		var ws unix.Winsize
		return raw(unix.SYS_IOCTL, 0, unix.TIOCGWINSZ, ptr(&ws))
	},
	"open_read": func() syscall.Errno {
		fd, err := unix.Open("/etc/hostname", unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errno(err)
	},
	"open_write": func() syscall.Errno {
		fd, err := unix.Open("/dev/null", unix.O_WRONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errno(err)
	},
	"getppid": func() syscall.Errno { return raw(unix.SYS_GETPPID) },
	// x32 ABI (amd64 only): the number with __X32_SYSCALL_BIT.
	"x32_getpid": func() syscall.Errno { return raw(0x40000000 | unix.SYS_GETPID) },
}

func init() {
	// The rest of the deny-list: only their errno under the filter matters
	// (without it, most fail with EPERM anyway for lack of capabilities).
	for _, name := range Denied {
		if _, ok := probes[name]; ok {
			continue
		}
		n, _ := Lookup(name)
		probes[name] = func() syscall.Errno { return raw(uintptr(n), ^uintptr(0), 0, 0, 0, 0) }
	}
}

func tiocsti(cmd uintptr) syscall.Errno {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(fd)
	c := byte('x')
	return raw(unix.SYS_IOCTL, uintptr(fd), cmd, ptr(&c))
}

func raw(nr uintptr, args ...uintptr) syscall.Errno {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	return e
}

func errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

func probe(names []string) {
	for _, n := range names {
		f, ok := probes[n]
		if !ok {
			fmt.Printf("%s unknown\n", n)
			continue
		}
		fmt.Printf("%s %d\n", n, int(f()))
	}
}

// runProbes runs the probe program under bwrap, with prog as its seccomp
// filter when prog is not nil, and returns each probe's errno. Stdin is a
// fresh pty's follower so the terminal ioctls reach a real tty.
func runProbes(t *testing.T, prog []byte, names ...string) (map[string]syscall.Errno, error) {
	t.Helper()
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--unshare-pid", "--cap-drop", "ALL", "--new-session", "--die-with-parent"}
	var extra []*os.File
	if prog != nil {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() { w.Write(prog); w.Close() }()
		extra = append(extra, r)
		args = append(args, "--seccomp", "3")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--", exe)
	cmd := exec.Command("bwrap", args...)
	cmd.Env = append(os.Environ(), probeEnv+"="+strings.Join(names, ","))
	cmd.ExtraFiles = extra
	pty, tty, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer pty.Close()
	defer tty.Close()
	cmd.Stdin = tty
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w (stderr: %s)", err, stderr.String())
	}
	got := map[string]syscall.Errno{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("probe output %q", sc.Text())
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("probe %s: %s", f[0], f[1])
		}
		got[f[0]] = syscall.Errno(n)
	}
	return got, nil
}

func openPTY() (pty, tty *os.File, err error) {
	pty, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(pty.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		pty.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(int(pty.Fd()), unix.TIOCGPTN)
	if err != nil {
		pty.Close()
		return nil, nil, err
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		pty.Close()
		return nil, nil, err
	}
	return pty, tty, nil
}

func TestBwrapDenyList(t *testing.T) {
	testutil.Require(t, "bwrap")
	prog, err := Policy{}.Program()
	if err != nil {
		t.Fatal(err)
	}
	names := append([]string{"getpid", "ioctl_TIOCSTI", "ioctl_TIOCSTI_high", "ioctl_TIOCLINUX",
		"ioctl_TIOCGWINSZ", "open_read", "open_write"}, Denied...)
	got, err := runProbes(t, prog, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append([]string{"ioctl_TIOCSTI", "ioctl_TIOCSTI_high", "ioctl_TIOCLINUX"}, Denied...) {
		if got[n] != unix.EPERM {
			t.Errorf("%s under the filter: errno %d (%v), want EPERM", n, got[n], got[n])
		}
	}
	for _, n := range []string{"getpid", "ioctl_TIOCGWINSZ", "open_read", "open_write"} {
		if e, ok := got[n]; !ok || e != 0 {
			t.Errorf("%s under the filter: errno %v (reported %v), want success", n, e, ok)
		}
	}
}

// TestBwrapWithoutFilter is the control: the probes that the filter must
// turn into EPERM fail differently without it, so the test above can fail.
func TestBwrapWithoutFilter(t *testing.T) {
	testutil.Require(t, "bwrap")
	got, err := runProbes(t, nil, "ioctl_TIOCSTI", "ioctl_TIOCSTI_high", "ioctl_TIOCLINUX", "keyctl", "add_key",
		"request_key", "perf_event_open")
	if err != nil {
		t.Fatal(err)
	}
	for n, e := range got {
		if e == unix.EPERM {
			t.Errorf("%s without a filter: EPERM; the probe cannot tell the filter's work", n)
		}
	}
	if len(got) != 7 {
		t.Errorf("got %d results, want 7: %v", len(got), got)
	}
}

// TestBwrapTraceWithoutTracer: a traced call with no tracer attached fails
// with ENOSYS, which shows exactly which calls the filter stops.
func TestBwrapTraceWithoutTracer(t *testing.T) {
	testutil.Require(t, "bwrap")
	prog, err := Policy{Trace: []string{"getppid"}, WriteOpens: true}.Program()
	if err != nil {
		t.Fatal(err)
	}
	got, err := runProbes(t, prog, "getpid", "getppid", "open_read", "open_write")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]syscall.Errno{"getpid": 0, "getppid": unix.ENOSYS, "open_read": 0, "open_write": unix.ENOSYS}
	for n, w := range want {
		if g, ok := got[n]; !ok || g != w {
			t.Errorf("%s: errno %v, want %v", n, g, w)
		}
	}
}

// TestBwrapX32Killed: on amd64 an x32-ABI call kills the process.
func TestBwrapX32Killed(t *testing.T) {
	testutil.Require(t, "bwrap")
	if Native() != AMD64 {
		t.Skip("x32 exists only on amd64")
	}
	prog, err := Policy{}.Program()
	if err != nil {
		t.Fatal(err)
	}
	_, err = runProbes(t, prog, "getpid", "x32_getpid")
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("got %v, want the probe killed", err)
	}
	// bwrap reports a child killed by signal N as exit 128+N.
	if got, want := ee.ExitCode(), 128+int(unix.SIGSYS); got != want {
		t.Fatalf("exit code %d, want %d (SIGSYS); %v", got, want, err)
	}
}
