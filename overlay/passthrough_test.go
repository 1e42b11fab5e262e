package overlay_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artrt/art/overlay"
	"golang.org/x/sys/unix"
)

// pattern is n bytes that differ from offset to offset.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + i/251)
	}
	return b
}

func mustOpen(t *testing.T, p string, flags int) int {
	t.Helper()
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	return fd
}

func mustPread(t *testing.T, fd int, n int, off int64) []byte {
	t.Helper()
	b := make([]byte, n)
	got, err := unix.Pread(fd, b, off)
	if err != nil {
		t.Fatalf("pread: %v", err)
	}
	return b[:got]
}

func fstat(t *testing.T, fd int) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPassthroughWriters drives a file open for reading and for writing at
// once, both served by passthrough to its private copy: the reader sees
// every write at once (one page cache), stat follows the size and mtime
// the kernel's writes set, a write through a shared mapping after the
// last close of the writer's descriptor is journaled at its release, and
// a remount shows exactly what was written.
func TestPassthroughWriters(t *testing.T) {
	s := newStore(t)
	p := filepath.Join(s.mnt, "f")
	want := pattern(200 << 10)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	// The writer's release reaches the daemon after close returns; until
	// then a new open is served as the writer was (by the daemon).
	var r, w int
	for deadline := time.Now().Add(5 * time.Second); ; {
		before := s.fs.Stats().PtOpens
		r = mustOpen(t, p, unix.O_RDONLY)
		w = mustOpen(t, p, unix.O_RDWR)
		got := s.fs.Stats().PtOpens - before
		if got == 2 {
			break
		}
		unix.Close(w)
		unix.Close(r)
		if time.Now().After(deadline) {
			t.Fatalf("passthrough opens of a file with a private copy = %d, want 2", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rOpen := true
	t.Cleanup(func() { // before the unmount, if the test fails
		if rOpen {
			unix.Close(r)
		}
	})
	mtime0 := fstat(t, r).Mtim
	time.Sleep(20 * time.Millisecond)

	// A write is seen by the reader at once.
	if _, err := unix.Pwrite(w, []byte("hello"), 100); err != nil {
		t.Fatal(err)
	}
	copy(want[100:], "hello")
	if got := mustPread(t, r, 5, 100); string(got) != "hello" {
		t.Fatalf("reader after a write = %q, want hello", got)
	}
	// fsync reaches the daemon, which journals what the kernel wrote.
	if err := unix.Fsync(w); err != nil {
		t.Fatal(err)
	}
	if got, live := journalTree(t, s.db)["f"], fileTree(t, s.mnt)["f"]; got != live {
		t.Fatalf("after fsync the journal holds %.60s, the file is %.60s", got, live)
	}
	// Growing the file: stat (through the daemon) follows the kernel.
	tail := pattern(100 << 10)
	if _, err := unix.Pwrite(w, tail, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	want = append(want, tail...)
	st := fstat(t, r)
	if st.Size != int64(len(want)) {
		t.Fatalf("size after growing = %d, want %d", st.Size, len(want))
	}
	if st.Mtim.Nano() <= mtime0.Nano() {
		t.Fatalf("mtime after writes = %v, not after %v", st.Mtim, mtime0)
	}
	if st.Ctim.Nano() < st.Mtim.Nano() {
		t.Fatalf("ctime %v before mtime %v", st.Ctim, st.Mtim)
	}
	// futimens while a passthrough writer is open.
	fixed := time.Date(2020, 5, 6, 7, 8, 9, 123456789, time.UTC).UnixNano()
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(fixed)}
	if err := unix.UtimesNanoAt(w, "", ts, unix.AT_EMPTY_PATH); err != nil {
		t.Fatal(err)
	}
	if st := fstat(t, r); st.Mtim.Nano() != fixed {
		t.Fatalf("mtime after futimens = %d, want %d", st.Mtim.Nano(), fixed)
	}
	// A shared mapping written after the writer's descriptor is closed.
	m, err := unix.Mmap(w, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(w); err != nil { // flush: journals what is there now
		t.Fatal(err)
	}
	withoutGC(func() { copy(m[4090:], "mapped") })
	copy(want[4090:], "mapped")
	if err := unix.Munmap(m); err != nil { // release: journals again
		t.Fatal(err)
	}
	if got := mustPread(t, r, 6, 4090); string(got) != "mapped" {
		t.Fatalf("reader after a mapped write = %q", got)
	}
	// The release is asynchronous: wait until the journal holds it.
	deadline := time.Now().Add(5 * time.Second)
	for journalTree(t, s.db)["f"] != fileTree(t, s.mnt)["f"] {
		if time.Now().After(deadline) {
			t.Fatal("a write through a mapping is not journaled 5 s after munmap")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	unix.Close(r)
	rOpen = false
	s.remount()
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after remount: %d bytes (%v), want %d; equal %v", len(got), err, len(want), bytes.Equal(got, want))
	}
	var after unix.Stat_t
	if err := unix.Stat(p, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mtim != st.Mtim {
		t.Fatalf("mtime after remount = %v, want %v", after.Mtim, st.Mtim)
	}
}

// TestPassthroughTruncateAppendHoles checks the requests that still reach
// the daemon on a passthrough file: ftruncate, O_TRUNC, O_APPEND writes,
// fallocate and SEEK_DATA/SEEK_HOLE, against a reader of the same file.
func TestPassthroughTruncateAppendHoles(t *testing.T) {
	s := newStore(t)
	p := filepath.Join(s.mnt, "f")
	if err := os.WriteFile(p, pattern(256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, p, unix.O_RDONLY)
	w := mustOpen(t, p, unix.O_RDWR)
	if err := unix.Ftruncate(w, 1000); err != nil {
		t.Fatal(err)
	}
	if st := fstat(t, r); st.Size != 1000 {
		t.Fatalf("size after ftruncate = %d, want 1000", st.Size)
	}
	if got := mustPread(t, r, 10, 995); len(got) != 5 {
		t.Fatalf("read at the new end = %d bytes, want 5", len(got))
	}
	a := mustOpen(t, p, unix.O_WRONLY|unix.O_APPEND)
	if _, err := unix.Write(a, []byte("tail")); err != nil {
		t.Fatal(err)
	}
	unix.Close(a)
	if got := mustPread(t, r, 10, 1000); string(got) != "tail" {
		t.Fatalf("after an append: %q, want tail", got)
	}
	// A hole punched in a 64 KiB file; the data after it is found.
	if err := unix.Ftruncate(w, 64<<10); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(w, bytes.Repeat([]byte{1}, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(w, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 32<<10); err != nil {
		t.Fatal(err)
	}
	if off, err := unix.Seek(r, 0, unix.SEEK_DATA); err != nil || off != 32<<10 {
		t.Fatalf("SEEK_DATA = %d %v, want %d", off, err, 32<<10)
	}
	if got := mustPread(t, r, 4, 0); !bytes.Equal(got, make([]byte, 4)) {
		t.Fatalf("punched range reads %v", got)
	}
	unix.Close(w)
	// O_TRUNC while the reader is open.
	tr := mustOpen(t, p, unix.O_WRONLY|unix.O_TRUNC)
	if st := fstat(t, r); st.Size != 0 {
		t.Fatalf("size after O_TRUNC = %d", st.Size)
	}
	unix.Write(tr, []byte("new"))
	unix.Close(tr)
	unix.Close(r)
	s.remount()
	if got, err := os.ReadFile(p); err != nil || string(got) != "new" {
		t.Fatalf("after remount: %q %v", got, err)
	}
}

// TestPassthroughMixedOpens: a file being written through the daemon (in
// memory) is opened for reading meanwhile, and the open must not ask the
// kernel for passthrough, which refuses to mix the two with EIO.
func TestPassthroughMixedOpens(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	s := newStore(t)
	p := filepath.Join(s.mnt, "new")
	w := mustOpen(t, p, unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL)
	if _, err := unix.Write(w, []byte("being written")); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, p, unix.O_RDONLY)
	if got := mustPread(t, r, 100, 0); string(got) != "being written" {
		t.Fatalf("read while written = %q", got)
	}
	unix.Close(r)
	unix.Close(w)
	// And the other way round: a passthrough reader, then a writer.
	r = mustOpen(t, p, unix.O_RDONLY)
	w = mustOpen(t, p, unix.O_WRONLY)
	unix.Pwrite(w, []byte("BEING"), 0)
	if got := mustPread(t, r, 100, 0); string(got) != "BEING written" {
		t.Fatalf("read after a write = %q", got)
	}
	unix.Close(w)
	unix.Close(r)
}

// TestPassthroughOff: forensic mode and a quota see every write request,
// so nothing is passed through.
func TestPassthroughOff(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	for _, opts := range []overlay.Options{{Branch: "main", JournalWrites: true}, {Branch: "main", Quota: 1 << 30}} {
		s := newStoreWith(t, opts)
		p := filepath.Join(s.mnt, "f")
		if err := os.WriteFile(p, pattern(300<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, pattern(200<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		if got := s.fs.Stats().PtOpens; got != 0 {
			t.Fatalf("%+v: %d passthrough opens, want 0", opts, got)
		}
	}
}

// TestPassthroughNeverReachesHost: a file read from the host workspace
// (passthrough to the host file) and then written must never change the
// host file, even while a reader still holds it open (the kernel then
// refuses the writer with EIO: it cannot switch an open inode's backing
// file), and later opens go through the daemon.
func TestPassthroughNeverReachesHost(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	host := strings.Repeat("host bytes\n", 20000)
	s := newLower(t, map[string]string{"a": host, "b": host})
	m := func(p string) string { return filepath.Join(s.mnt, "ws", p) }
	if got := s.read("a"); got != host {
		t.Fatalf("a read %d bytes", len(got))
	}
	if err := os.WriteFile(m("a"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := s.read("a"); got != "edited" {
		t.Fatalf("a after edit = %q", got)
	}
	r := mustOpen(t, m("b"), unix.O_RDONLY)
	if fd, err := unix.Open(m("b"), unix.O_WRONLY|unix.O_TRUNC, 0); err == nil {
		unix.Write(fd, []byte("while read"))
		unix.Close(fd)
	}
	unix.Close(r)
	for _, p := range []string{"a", "b"} {
		if b, err := os.ReadFile(filepath.Join(s.ws, p)); err != nil || string(b) != host {
			t.Fatalf("host %s changed: %d bytes %v", p, len(b), err)
		}
	}
	s.remount()
	if got := s.read("a"); got != "edited" {
		t.Fatalf("a after remount = %q", got)
	}
}

// withoutGC runs fn, which touches a mapping served by this process's own
// daemon (the mount's page faults are FUSE requests), with the collector
// off: a stop-the-world that began while this goroutine waits in a page
// fault - not a system call, so it cannot be stopped there - would wait
// for the daemon goroutines it stopped. (It did: a -race run hung.)
func withoutGC(fn func()) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	fn()
}

// TestPassthroughOpenDuringRelease: go-fuse's bridge drops a backing
// reference at the end of every release of a node that has a backing id,
// whether or not the released file took one. A file served by the daemon,
// released while an open of the same file registers a backing file, must
// therefore not leave that open's id to be unregistered under it: the next
// open would name a second backing file, which the kernel refuses with EIO
// (TestFSX met it as an EIO on an open right after a close).
func TestPassthroughOpenDuringRelease(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	s := newStore(t)
	p := filepath.Join(s.mnt, "f")
	want := pattern(100 << 10)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	// A read-only open of a file held only in the store is served by the
	// daemon (read from the store).
	s.remount()
	r := mustOpen(t, p, unix.O_RDONLY)
	closeR := sync.OnceFunc(func() { unix.Close(r) })
	defer closeR()
	if got := s.fs.Stats().PtOpens; got != 0 {
		t.Fatalf("the reader was served by passthrough (%d): the test needs a daemon-served file", got)
	}
	// Its release stops inside the bridge, after the daemon's part.
	inRelease, goOn, released := make(chan int64, 1), make(chan struct{}), make(chan int64, 1)
	var once sync.Once
	t.Cleanup(overlay.OnHandleRelease(func(ino int64) {
		once.Do(func() {
			inRelease <- ino
			<-goOn
		})
	}))
	t.Cleanup(overlay.OnReleaseDone(func(ino int64) {
		select {
		case released <- ino:
		default:
		}
	}))
	closeR()
	var ino int64
	select {
	case ino = <-inRelease:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader's release did not reach the daemon")
	}
	// Opened meanwhile for writing: free of other opens as far as the
	// daemon's counts go.
	w, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	close(goOn)
	if err != nil {
		t.Fatalf("open for writing during the release: %v", err)
	}
	defer unix.Close(w)
	for done := false; !done; {
		select {
		case got := <-released:
			done = got == ino
		case <-time.After(10 * time.Second):
			t.Fatal("the reader's release did not finish")
		}
	}
	// A second open while the writer is open.
	r2, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open while the writer is open: %v", err)
	}
	defer unix.Close(r2)
	if _, err := unix.Pwrite(w, []byte("EDIT"), 0); err != nil {
		t.Fatal(err)
	}
	copy(want, "EDIT")
	if got := mustPread(t, r2, len(want)+1, 0); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not what was written", len(got))
	}
}

// TestHostFileWriterBesideReader: an open for writing of a file whose host
// file a reader holds open by passthrough cannot be served (the kernel
// refuses a daemon-served open beside a passthrough one). It must fail
// with nothing changed - an O_TRUNC once emptied the file before the
// kernel refused the open, and the refused open's release dropped the
// host file's backing reference, so every later reader failed with EIO -
// while a writer that opens right after the reader closed (an editor's
// read, close, open for writing) must not fail.
func TestHostFileWriterBesideReader(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	host := strings.Repeat("host bytes\n", 20000)
	files := map[string]string{"b": host}
	for i := range 10 {
		files[fmt.Sprintf("c%d", i)] = host
	}
	s := newLower(t, files)
	m := func(p string) string { return filepath.Join(s.mnt, "ws", p) }
	var fds []int
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	r := mustOpen(t, m("b"), unix.O_RDONLY)
	fds = append(fds, r)
	if fd, err := unix.Open(m("b"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
		t.Fatal("an open for writing beside a passthrough reader of the host file succeeded: the kernel refuses those")
	}
	r2, err := unix.Open(m("b"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("a reader beside the first after the refused writer: %v", err)
	}
	fds = append(fds, r2)
	if got := mustPread(t, r2, len(host)+1, 0); string(got) != host {
		t.Fatalf("b read %d bytes after the refused O_TRUNC, want the host file's %d", len(got), len(host))
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	fds = nil
	// Read, close, and at once open for writing: the reader's release may
	// still be on its way; the writer waits for it.
	for i := range 10 {
		p := m(fmt.Sprintf("c%d", i))
		rc := mustOpen(t, p, unix.O_RDONLY)
		mustPread(t, rc, 100, 0)
		unix.Close(rc)
		w, err := unix.Open(p, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("c%d: open for writing right after the reader closed: %v", i, err)
		}
		unix.Write(w, []byte("edited"))
		unix.Close(w)
	}
	s.remount()
	if got := s.read("b"); got != host {
		t.Fatalf("b after remount: %d bytes, want the host file's %d", len(got), len(host))
	}
	for i := range 10 {
		if got := s.read(fmt.Sprintf("c%d", i)); got != "edited" {
			t.Fatalf("c%d after remount = %q", i, got)
		}
	}
}

// TestHostFileWithoutBacking: where the kernel will not take host files
// as backing files (a host filesystem it does not stack on), go-fuse
// registers no backing file for the rest of the mount, so host-file opens
// are the daemon's and a writer beside a reader is served as without
// passthrough, not refused.
func TestHostFileWithoutBacking(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	t.Cleanup(overlay.NoLowerBacking()) // likewise
	host := strings.Repeat("host bytes\n", 20000)
	s := newLower(t, map[string]string{"b": host})
	m := filepath.Join(s.mnt, "ws", "b")
	r := mustOpen(t, m, unix.O_RDONLY)
	defer unix.Close(r)
	w, err := unix.Open(m, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("a writer beside a daemon-served reader of the host file: %v", err)
	}
	unix.Write(w, []byte("edited"))
	unix.Close(w)
	if got := s.read("b"); got != "edited" {
		t.Fatalf("b after its writer = %q", got)
	}
	unix.Close(r)
	s.remount()
	if got := s.read("b"); got != "edited" {
		t.Fatalf("b after remount = %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(s.ws, "b")); err != nil || string(b) != host {
		t.Fatalf("host b changed: %d bytes %v", len(b), err)
	}
}
