package sandbox_test

import (
	"os/exec"
	"testing"
	"time"
)

// The result's CPU time and I/O counts are the whole sandbox's - the
// command, its children and grandchildren - not bwrap's (issue 29: a
// second of CPU reported as 1 ms, a 20 MiB dd as 0 bytes).
func TestResultMetricsOfTheTree(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3 for a loop bounded by its own CPU time")
	}
	c := direct(t)
	// A grandchild burns one second of CPU (its own clock, so a busy
	// machine only makes it take longer); a child writes 20 MiB and
	// reads them back, all through a pipe and /tmp (tmpfs: no block I/O).
	script := `sh -c 'python3 -c "import time
while time.process_time() < 1:
    for _ in range(100000): pass"'
dd if=/dev/zero of=/tmp/f bs=1M count=20 2>/dev/null
cat /tmp/f > /dev/null`
	_, errs, res := run(t, c, "sh", "-c", script)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, errs)
	}
	t.Logf("user %v sys %v read %d written %d max memory %d", res.UserTime, res.SysTime, res.IORead, res.IOWritten, res.MaxMemory)
	if res.UserTime < 800*time.Millisecond {
		t.Errorf("user time %v for a second of CPU in a grandchild, want >= 800ms", res.UserTime)
	}
	if res.IOWritten < 20<<20 || res.IORead < 20<<20 {
		t.Errorf("I/O read %d written %d bytes for a 20 MiB dd and cat, want >= %d each", res.IORead, res.IOWritten, 20<<20)
	}
}
