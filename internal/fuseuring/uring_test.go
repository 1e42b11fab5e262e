package fuseuring

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/artrt/art/internal/fusectl"
	"github.com/artrt/art/internal/procs"
	"github.com/artrt/art/internal/testutil"
)

// requireURing skips (or, with fuse in ART_TEST_REQUIRE, fails) unless
// this process can serve a FUSE mount over io_uring: root, /dev/fuse and
// a kernel with the transport, switched on as art switches it on.
func requireURing(t *testing.T) {
	t.Helper()
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (a direct mount)")
	}
	testutil.Require(t, "fuse-uring")
	if !SwitchOn() {
		t.Fatalf("%s stays off", EnabledPath)
	}
}

// mountLoop serves go-fuse's loopback node over dir at a new mount
// point, its requests over rings of threads threads a queue, and
// returns the mount point, the rings and a stop that unmounts and
// returns the rings' Wait.
func mountLoop(t *testing.T, dir string, threads int) (string, *Rings, func() error) {
	t.Helper()
	mnt, rings, stop, err := mountLoopPayload(t, dir, threads, 1<<20)
	if err != nil {
		t.Fatalf("serve rings: %v", err)
	}
	return mnt, rings, stop
}

// mountLoopPayload is mountLoop with rings of the given payload size,
// and Serve's error returned with the mount still served.
func mountLoopPayload(t *testing.T, dir string, threads, payload int) (string, *Rings, func() error, error) {
	t.Helper()
	mnt := t.TempDir()
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Hour
	opts := &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NegativeTimeout: &sec, MountOptions: fuse.MountOptions{
		FsName: "fuseuring-test", Name: "fuseuringtest", MaxWrite: 1 << 20, AllowOther: true,
		Options: []string{"default_permissions"},
	}}
	server, rings, serveErr := MountServe(fs.NewNodeFS(root, opts), mnt, opts.MountOptions, Options{Threads: threads, Entries: 1, MaxPayload: payload})
	if server == nil {
		t.Fatalf("mount: %v", serveErr)
	}
	if rings == nil {
		unix.Unmount(mnt, unix.MNT_DETACH)
		server.Wait()
		t.Fatal("the kernel did not offer io_uring at INIT with enable_uring on")
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		// Opened while the mount is surely this test's (see fusectl).
		var ctl *fusectl.Conn
		if _, conn := fusectl.MountID(mnt); conn != "" {
			ctl = fusectl.Open(conn)
		}
		if ctl != nil {
			defer ctl.Close()
		}
		if err := unix.Unmount(mnt, 0); err != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
			return fmt.Errorf("unmount: %w", err)
		}
		done := make(chan error, 1)
		go func() { server.Wait(); done <- rings.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Second):
		}
		// A mount namespace made meanwhile by another package's test (a
		// bwrap sandbox) holds a copy of the mount and so the connection:
		// end it as art's unmount does (overlay/unmount.go). The rings'
		// teardown is the kernel's same path (fuse_abort_conn) either way.
		if ctl == nil {
			t.Logf("no FUSE control file system here: waiting for the kernel")
		} else if _, alive := ctl.Waiting(); alive {
			t.Logf("the connection outlived the unmount (another mount namespace holds a copy): aborted")
			if err := ctl.Abort(); err != nil {
				return err
			}
		}
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return fmt.Errorf("serving did not end 10 s after the unmount")
		}
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return mnt, rings, stop, serveErr
}

// sh runs script in dir in a child process: the test's own process never
// touches the mount it serves (a page fault on it under the garbage
// collector's stop deadlocks).
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	// Bounded: a request left unanswered must fail the test, not hang it.
	cmd := exec.Command("timeout", "20", "sh", "-ec", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// TestRingsServeReadsWritesAndNames drives a mount whose requests go over
// the rings with ordinary tools: names, attributes, listings, a file of
// several full payloads written and read back, renames and removals, and
// checks each against the directory served and the rings' count.
func TestRingsServeReadsWritesAndNames(t *testing.T) {
	requireURing(t)
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprintf("threads%d", threads), func(t *testing.T) {
			dir := t.TempDir()
			src := t.TempDir()
			big := make([]byte, 3<<20+12345)
			rand.Read(big)
			if err := os.WriteFile(filepath.Join(src, "big"), big, 0o644); err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Join(dir, "a/b"), 0o755)
			os.WriteFile(filepath.Join(dir, "a/b/f"), []byte("hello\n"), 0o644)
			mnt, rings, stop := mountLoop(t, dir, threads)
			before := rings.Served.Load()

			if got := sh(t, mnt, "cat a/b/f; stat -c '%s %F' a/b/f; stat -c %F a; ls a"); got != "hello\n6 regular file\ndirectory\nb\n" {
				t.Errorf("reads through the mount: %q", got)
			}
			sh(t, mnt, "cp "+filepath.Join(src, "big")+" big; mkdir -p x/y; echo z > x/y/z; mv x/y/z x/z2; rm -r a")
			if got, err := os.ReadFile(filepath.Join(dir, "big")); err != nil || !bytes.Equal(got, big) {
				t.Errorf("a %d-byte file written through the mount reads back %d bytes (%v), equal %v", len(big), len(got), err, bytes.Equal(got, big))
			}
			if got := sh(t, mnt, "cmp big "+filepath.Join(src, "big")+" && cat x/z2 && ls"); got != "z\nbig\nx\n" {
				t.Errorf("after writes: %q", got)
			}
			if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
				t.Errorf("a removed through the mount: %v", err)
			}
			// Every request but the kernel's FORGETs and INTERRUPTs goes
			// over the rings: dozens here, at least one per payload of
			// the big file's write and read.
			if n := rings.Served.Load() - before; n < 2*int64(len(big)>>20) {
				t.Errorf("%d requests over the rings", n)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRingsParallelCallers keeps every queue's threads busy with callers
// on both CPUs at once and checks that every answer is right.
func TestRingsParallelCallers(t *testing.T) {
	requireURing(t)
	dir := t.TempDir()
	for i := range 200 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte(fmt.Sprintf("%d\n", i)), 0o644)
	}
	mnt, _, stop := mountLoop(t, dir, 2)
	// All on one CPU, so its queue's two threads are both busy.
	script := `for w in 1 2 3 4 5 6; do ( for i in $(seq 0 199); do f=$(printf f%03d $i); [ "$(cat $f)" = "$i" ] || { echo bad $f; exit 1; }; echo $w > w$w-$i; done ) & done; wait; ls | wc -l`
	if _, err := exec.LookPath("taskset"); err == nil {
		script = "exec taskset -c 0 sh -ec '" + strings.ReplaceAll(script, "'", `'"'"'`) + "'"
	}
	if got := strings.TrimSpace(sh(t, mnt, script)); got != "1400" {
		t.Errorf("entries after 6 parallel writers: %s, want 1400", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for w := 1; w <= 6; w++ {
		if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("w%d-199", w))); err != nil || string(b) != fmt.Sprintf("%d\n", w) {
			t.Errorf("w%d-199: %q %v", w, b, err)
		}
	}
}

// Signals reach the ring threads while they wait for requests (a
// process-directed signal may land on any thread; Go's preemption sends
// SIGURG): each wait is taken up again and no request is lost. Before,
// an interrupted wait counted a submission that never was, and the
// thread spun without reading its completions: its requests and the
// unmount hung.
func TestRingsSignalledThreads(t *testing.T) {
	requireURing(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x\n"), 0o644)
	mnt, rings, stop := mountLoop(t, dir, 2)
	pid := os.Getpid()
	for round := range 3 {
		for _, tid := range rings.Tids() {
			if err := unix.Tgkill(pid, tid, unix.SIGURG); err != nil {
				t.Fatalf("signal thread %d: %v", tid, err)
			}
		}
		time.Sleep(20 * time.Millisecond)
		before := rings.Served.Load()
		script := fmt.Sprintf("for i in $(seq 50); do cat f >/dev/null; echo %d > g$i; done; cat g50", round)
		if got := sh(t, mnt, script); got != fmt.Sprintf("%d\n", round) {
			t.Fatalf("round %d: %q", round, got)
		}
		if rings.Served.Load()-before < 50 {
			t.Fatalf("round %d: %d requests over the rings", round, rings.Served.Load()-before)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A registration the kernel refuses (here: a payload buffer smaller than
// the mount's max_write) leaves the connection served through /dev/fuse
// by the kernel itself: Serve says so, and the mount works.
func TestRingsRefusedFallsBack(t *testing.T) {
	requireURing(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x\n"), 0o644)
	mnt, rings, stop, err := mountLoopPayload(t, dir, 1, 8192)
	if err == nil || errors.Is(err, errStuck) || !rings.Refused() {
		t.Fatalf("Serve with a small payload buffer: %v (refused %v), want a refusal", err, rings.Refused())
	}
	if got := sh(t, mnt, "cat f; echo y > g; cat g; ls"); got != "x\ny\nf\ng\n" {
		t.Errorf("through /dev/fuse after the refusal: %q", got)
	}
	if n := rings.Served.Load(); n != 0 {
		t.Errorf("%d requests over refused rings", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestPossibleCPUs(t *testing.T) {
	n, err := possibleCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatalf("%d possible CPUs", n)
	}
}

// Prepare gives each ring thread a P of its own (internal/procs) while
// it lives: the threads wait blocked in io_uring_enter holding their Ps,
// and without spare ones a goroutine they made runnable waited for Go's
// sysmon (up to 10 ms a time; the registrations at the mount took 12-19
// ms). The workers' count stays what it was, and the Ps go with the
// threads.
func TestPrepareReservesPs(t *testing.T) {
	requireURing(t)
	before, workers := runtime.GOMAXPROCS(0), procs.Workers()
	r, err := Prepare(Options{Threads: 2, Entries: 1, MaxPayload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	threads := len(r.Tids())
	if got := runtime.GOMAXPROCS(0); got != before+min(threads, 32) {
		r.Discard()
		t.Fatalf("GOMAXPROCS %d with %d ring threads, want %d", got, threads, before+min(threads, 32))
	}
	if got := procs.Workers(); got != workers {
		r.Discard()
		t.Fatalf("workers %d while the rings live, want %d", got, workers)
	}
	r.Discard()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after the threads ended, want %d", got, before)
	}
}
