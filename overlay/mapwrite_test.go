package overlay_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Writing through a shared mapping of the mount, out of process.
//
// A page fault on the mount is a FUSE request that this process's own
// daemon serves. In process, a stop-the-world that begins while the
// faulting goroutine waits in the fault (not a system call, so it cannot
// be stopped) would wait for the daemon goroutines it stopped: -race runs
// hung so. A child process maps and writes instead.

const mapWriteEnv = "ART_TEST_MAPWRITE"

func init() {
	if spec, ok := os.LookupEnv(mapWriteEnv); ok {
		os.Exit(mapWriteChild(spec))
	}
}

// mapWrite maps the first size bytes of fd (shared, read-write) in a child
// process, copies data at off, msyncs (MS_SYNC) and unmaps, and returns
// the error of each step by name ("mmap", "msync", "munmap"), or an error
// of the child itself.
func mapWrite(fd, size, off int, data string) (map[string]error, error) {
	dup, err := unix.Dup(fd) // the *os.File below closes its own
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "mapped")
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d:%s", mapWriteEnv, size, off, data))
	cmd.ExtraFiles = []*os.File{f} // the child's fd 3
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("map-write child: %w", err)
	}
	errs := map[string]error{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		step, errno, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("map-write child said %q", out)
		}
		n, _ := strconv.Atoi(errno)
		errs[step] = nil
		if n != 0 {
			errs[step] = syscall.Errno(n)
		}
	}
	return errs, nil
}

func mapWriteChild(spec string) int {
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 {
		return 2
	}
	size, _ := strconv.Atoi(parts[0])
	off, _ := strconv.Atoi(parts[1])
	say := func(step string, err error) {
		n := 0
		if e, ok := err.(syscall.Errno); ok {
			n = int(e)
		} else if err != nil {
			n = int(syscall.EIO)
		}
		fmt.Printf("%s=%d\n", step, n)
	}
	m, err := unix.Mmap(3, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	say("mmap", err)
	if err != nil {
		return 0
	}
	copy(m[off:], parts[2])
	say("msync", unix.Msync(m, unix.MS_SYNC))
	say("munmap", unix.Munmap(m))
	return 0
}
