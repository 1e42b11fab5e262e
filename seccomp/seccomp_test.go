package seccomp

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets prog (the subset of cBPF the package emits) against one
// seccomp_data, so each arch's program can be checked on any machine.
func run(t *testing.T, prog []byte, arch, nr uint32, args [6]uint64) uint32 {
	t.Helper()
	var data [64]byte
	binary.LittleEndian.PutUint32(data[offNr:], nr)
	binary.LittleEndian.PutUint32(data[offArch:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[offArgs+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog)/8; pc++ {
		in := prog[8*pc:]
		code, jt, jf, k := binary.LittleEndian.Uint16(in), in[2], in[3], binary.LittleEndian.Uint32(in[4:])
		jump := func(cond bool) {
			if cond {
				pc += int(jt)
			} else {
				pc += int(jf)
			}
		}
		switch code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[k:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			jump(acc == k)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			jump(acc >= k)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			jump(acc&k != 0)
		case unix.BPF_RET | unix.BPF_K:
			return k
		default:
			t.Fatalf("pc %d: unexpected opcode %#x", pc, code)
		}
	}
	t.Fatalf("program fell off its end")
	return 0
}

type decision struct {
	what string
	arch uint32
	nr   uint32
	args [6]uint64
	want uint32
}

func nr(t *testing.T, a *Arch, name string) uint32 {
	t.Helper()
	n, ok := a.Lookup(name)
	if !ok {
		t.Fatalf("%s: no syscall %q", a.GOARCH, name)
	}
	return n
}

func TestProgramDecisions(t *testing.T) {
	for _, a := range []*Arch{AMD64, ARM64} {
		t.Run(a.GOARCH, func(t *testing.T) {
			prog, err := DefaultTrace().ProgramFor(a)
			if err != nil {
				t.Fatal(err)
			}
			cases := []decision{
				{"getpid", a.audit, nr(t, a, "getpid"), [6]uint64{}, retAllow},
				{"other arch", a.audit ^ 1, nr(t, a, "getpid"), [6]uint64{}, retKill},
				{"keyctl", a.audit, nr(t, a, "keyctl"), [6]uint64{}, retEPERM},
				{"bpf", a.audit, nr(t, a, "bpf"), [6]uint64{}, retEPERM},
				{"move_mount", a.audit, nr(t, a, "move_mount"), [6]uint64{}, retEPERM},
				{"ioctl TIOCSTI", a.audit, nr(t, a, "ioctl"), [6]uint64{0, unix.TIOCSTI}, retEPERM},
				{"ioctl TIOCSTI high bits", a.audit, nr(t, a, "ioctl"), [6]uint64{0, 1<<32 | unix.TIOCSTI}, retEPERM},
				{"ioctl TIOCLINUX", a.audit, nr(t, a, "ioctl"), [6]uint64{0, unix.TIOCLINUX}, retEPERM},
				{"ioctl TIOCGWINSZ", a.audit, nr(t, a, "ioctl"), [6]uint64{0, unix.TIOCGWINSZ}, retAllow},
				{"execve", a.audit, nr(t, a, "execve"), [6]uint64{}, retTrace},
				{"connect", a.audit, nr(t, a, "connect"), [6]uint64{}, retTrace},
				{"openat read", a.audit, nr(t, a, "openat"), [6]uint64{0, 0, unix.O_RDONLY | unix.O_CLOEXEC}, retAllow},
				{"openat write", a.audit, nr(t, a, "openat"), [6]uint64{0, 0, unix.O_WRONLY}, retTrace},
				{"openat creat", a.audit, nr(t, a, "openat"), [6]uint64{0, 0, unix.O_CREAT | unix.O_RDONLY}, retTrace},
				{"openat2", a.audit, nr(t, a, "openat2"), [6]uint64{}, retTrace},
			}
			if a == AMD64 {
				cases = append(cases,
					decision{"x32 getpid", a.audit, 0x40000000 | nr(t, a, "getpid"), [6]uint64{}, retKill},
					decision{"open trunc", a.audit, nr(t, a, "open"), [6]uint64{0, unix.O_TRUNC}, retTrace},
					decision{"open read", a.audit, nr(t, a, "open"), [6]uint64{0, unix.O_RDONLY}, retAllow},
				)
			}
			for _, c := range cases {
				if got := run(t, prog, c.arch, c.nr, c.args); got != c.want {
					t.Errorf("%s: got %#x, want %#x", c.what, got, c.want)
				}
			}
		})
	}
}

func TestTraceAllStillDenies(t *testing.T) {
	a := AMD64
	prog, err := Policy{TraceAll: true}.ProgramFor(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, prog, a.audit, nr(t, a, "read"), [6]uint64{}); got != retTrace {
		t.Errorf("read under TraceAll: got %#x, want trace", got)
	}
	if got := run(t, prog, a.audit, nr(t, a, "ioctl"), [6]uint64{0, unix.TIOCGWINSZ}); got != retTrace {
		t.Errorf("allowed ioctl under TraceAll: got %#x, want trace", got)
	}
	if got := run(t, prog, a.audit, nr(t, a, "kexec_load"), [6]uint64{}); got != retEPERM {
		t.Errorf("kexec_load under TraceAll: got %#x, want EPERM", got)
	}
}

func TestZeroPolicyTracesNothing(t *testing.T) {
	a := AMD64
	prog, err := Policy{}.ProgramFor(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range a.Syscalls() {
		want := uint32(retAllow)
		for _, d := range Denied {
			if d == name {
				want = retEPERM
			}
		}
		if got := run(t, prog, a.audit, nr(t, a, name), [6]uint64{0, 0, unix.O_WRONLY}); got != want {
			t.Errorf("%s: got %#x, want %#x", name, got, want)
		}
	}
}

func TestUnknownSyscallNamed(t *testing.T) {
	_, err := Policy{Trace: []string{"execve", "opne"}}.ProgramFor(AMD64)
	if !errors.Is(err, ErrUnknownSyscall) || !strings.Contains(err.Error(), `"opne"`) {
		t.Fatalf("got %v, want ErrUnknownSyscall naming \"opne\"", err)
	}
	// open exists on x86_64 but not on aarch64.
	if _, err := (Policy{Trace: []string{"open"}}).ProgramFor(ARM64); !errors.Is(err, ErrUnknownSyscall) {
		t.Fatalf("open on arm64: got %v, want ErrUnknownSyscall", err)
	}
}

func TestNames(t *testing.T) {
	if got, want := AMD64.Name(59), "execve"; got != want {
		t.Errorf("amd64 59: got %q, want %q", got, want)
	}
	if got, want := ARM64.Name(221), "execve"; got != want {
		t.Errorf("arm64 221: got %q, want %q", got, want)
	}
	if got, want := AMD64.Name(99999), "syscall_99999"; got != want {
		t.Errorf("unknown: got %q, want %q", got, want)
	}
	for _, a := range []*Arch{AMD64, ARM64} {
		for _, d := range Denied {
			if _, ok := a.Lookup(d); !ok {
				t.Errorf("%s lacks denied syscall %s", a.GOARCH, d)
			}
		}
	}
}
