package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPullInterrupted: a pull -m stopped by SIGTERM while it stages
// leaves the destination as it was, with no staging directory; one killed
// by SIGKILL leaves its staging directory, which the next pull removes
// before it completes.
func TestPullInterrupted(t *testing.T) {
	base := t.TempDir()
	src, db := filepath.Join(base, "src", "ws"), filepath.Join(base, "ws.db")
	big := make([]byte, 96<<20)
	rand.Read(big)
	writeFile(t, filepath.Join(src, "big.bin"), string(big))
	for i := 0; i < 8; i++ {
		writeFile(t, filepath.Join(src, "more", string(rune('a'+i))+".bin"), string(big[i<<20:(i+8)<<20]))
	}
	// The destination's own file is one the store has too: a pull never
	// writes over a host file that exists nowhere else.
	writeFile(t, filepath.Join(src, "keep.txt"), "mine\n")
	if _, errs, code := artStdin(t, "", "push", "-m", src, "-d", db, "-q"); code != 0 {
		t.Fatalf("push: %s", errs)
	}
	dest := filepath.Join(base, "dest", "ws")
	writeFile(t, filepath.Join(dest, "keep.txt"), "mine\n")

	// staging waits until the pull has a staging directory in dest.
	staging := func() string {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			names, _ := filepath.Glob(filepath.Join(dest, ".art-staging-*"))
			if len(names) > 0 {
				return names[0]
			}
		}
		t.Fatal("no staging directory appeared in 30 s")
		return ""
	}
	listing := func() string {
		names, err := filepath.Glob(filepath.Join(dest, "*"))
		if err != nil {
			t.Fatal(err)
		}
		hidden, _ := filepath.Glob(filepath.Join(dest, ".*"))
		return strings.Join(append(names, hidden...), "\n")
	}
	before := listing()

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		cmd := artCmd(t, "pull", "-m", dest, "-d", db, "-q")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		staging()
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if err == nil {
			t.Fatalf("%v: the pull finished before the signal; make the content bigger", sig)
		}
		left, _ := filepath.Glob(filepath.Join(dest, ".art-staging-*"))
		switch sig {
		case syscall.SIGTERM:
			if len(left) > 0 || listing() != before {
				t.Fatalf("after SIGTERM (stderr %q) the destination holds:\n%s\nwant:\n%s", stderr.String(), listing(), before)
			}
			if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "pull interrupted") || !strings.Contains(lines[0], "unchanged, nothing recorded") {
				t.Errorf("SIGTERM: want one line on stderr saying nothing was recorded, got %q", stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
				t.Errorf("SIGTERM: exit %d, want %d", code, 128+int(syscall.SIGTERM))
			}
		case syscall.SIGKILL:
			if len(left) == 0 {
				t.Log("SIGKILL: no staging left (killed between files); the cleanup is not exercised")
			}
		}
	}
	if _, errs, code := artStdin(t, "", "pull", "-m", dest, "-d", db, "-q"); code != 0 {
		t.Fatalf("pull after the kill: %s", errs)
	}
	if left, _ := filepath.Glob(filepath.Join(dest, ".art-staging-*")); len(left) > 0 {
		t.Fatalf("staging left after a complete pull: %v", left)
	}
	got, err := os.ReadFile(filepath.Join(dest, "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big.bin after the pull: %d bytes, %v", len(got), err)
	}
}
