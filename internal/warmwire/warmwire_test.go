package warmwire

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sum256 must be SHA-256 exactly: branch keys name lock files, and a
// process computing another key than its peers would lock another file.
// Every length across the padding's boundaries (55, 56, 63, 64 bytes and
// their multiples), then random inputs.
func TestSum256MatchesCryptoSHA256(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(b []byte) {
		t.Helper()
		if got, want := sum256(b), sha256.Sum256(b); got != want {
			t.Fatalf("sum256 of %d bytes = %x, want %x", len(b), got, want)
		}
	}
	for n := 0; n <= 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		check(b)
	}
	for range 200 {
		b := make([]byte, r.IntN(1<<14))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		check(b)
	}
	// A published test vector (FIPS 180-4's examples): "abc".
	if got := hex.EncodeToString(func() []byte { s := sum256([]byte("abc")); return s[:] }()); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("sum256(abc) = %s", got)
	}
}

// BranchKey is the first 8 bytes of SHA-256 of the store's resolved path
// and the branch, in lower-case hex: the names of lock files and sockets
// that processes of earlier versions made too.
func TestBranchKeyIsStable(t *testing.T) {
	dir := t.TempDir()
	for _, branch := range []string{"main", "feature/x", ""} {
		sum := sha256.Sum256([]byte(StoreKey(dir+"/s.db") + "\x00" + branch))
		want := hex.EncodeToString(sum[:8])
		if got := BranchKey(dir+"/s.db", branch); got != want {
			t.Errorf("BranchKey(%q) = %s, want %s", branch, got, want)
		}
		if got := Socket(dir+"/s.db", branch); !strings.HasSuffix(got, "/warm-"+want+".sock") {
			t.Errorf("Socket(%q) = %s, want warm-%s.sock", branch, got, want)
		}
	}
}

// readProc reads a file whole, past its first buffer, and says why not.
func TestReadProc(t *testing.T) {
	p := t.TempDir() + "/f"
	want := strings.Repeat("0123456789abcdef", 1000) // 16,000 bytes
	if err := os.WriteFile(p, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readProc(p); err != nil || string(got) != want {
		t.Fatalf("readProc: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	if got, err := readProc("/proc/self/cgroup"); err != nil || len(got) == 0 {
		t.Fatalf("readProc /proc/self/cgroup: %q, %v", got, err)
	}
	if _, err := readProc(p + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("readProc of a missing file: %v", err)
	}
	// Status reads the umask the process has.
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	if um, _, ok := Status(); um != 0o027 || !ok {
		t.Fatalf("Status: umask %o ok %v, want 027", um, ok)
	}
}

// ReadFD with line stops at the first newline (the front's answer), says
// when the end comes first, and refuses more than its limit.
func TestReadFDLine(t *testing.T) {
	read := func(data string, limit int) ([]byte, error) {
		t.Helper()
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fds[0])
		go func() {
			defer syscall.Close(fds[1])
			for b := []byte(data); len(b) > 0; {
				n, err := syscall.Write(fds[1], b)
				if err != nil {
					return // the reader gave up (the limit)
				}
				b = b[n:]
			}
		}()
		return ReadFD(fds[0], limit, true)
	}
	long := strings.Repeat("x", 10000)
	if got, err := read(long+"\n{}\n", 1<<20); err != nil || string(got) != long {
		t.Fatalf("a line past the first buffer: %d bytes, %v", len(got), err)
	}
	if _, err := read("no newline", 1<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the end before a newline: %v", err)
	}
	if _, err := read(long+long+"\n", 8<<10); !errors.Is(err, unix.EFBIG) {
		t.Fatalf("past the limit: %v", err)
	}
}
