package execapi

import (
	"syscall"
	"testing"
	"time"
)

// TestOutcomeStatusMapping pins the status table of docs/exec-api.md for
// outcomes a sandboxed executor reports (cgroup OOM kill, bwrap's 128+N).
func TestOutcomeStatusMapping(t *testing.T) {
	req := &Request{Command: []string{"x"}, Resources: Resources{MemoryBytes: 64 << 20}}
	for _, c := range []struct {
		name   string
		o      Outcome
		status Status
		exit   int
		code   Code
	}{
		{"exit 0", Outcome{}, StatusSuccess, 0, ""},
		{"exit 2", Outcome{ExitCode: 2}, StatusError, 2, ""},
		{"exit 255", Outcome{ExitCode: 255}, StatusError, 255, ""},
		{"sigkill", Outcome{Signal: syscall.SIGKILL, ExitCode: 137}, StatusKilled, 137, CodeSignaled},
		{"sigsegv", Outcome{Signal: syscall.SIGSEGV}, StatusKilled, 139, CodeSignaled},
		{"sigxcpu", Outcome{Signal: syscall.SIGXCPU}, StatusKilled, 152, CodeCPULimit},
		{"oom", Outcome{Signal: syscall.SIGKILL, Limit: LimitError(CodeMemoryLimit, req)}, StatusKilled, 137, CodeMemoryLimit},
		{"timeout wins", Outcome{Signal: syscall.SIGKILL, TimedOut: true, Timeout: time.Second}, StatusTimeout, 124, CodeTimeout},
		{"timeout after a clean exit in the grace", Outcome{TimedOut: true, Timeout: time.Second}, StatusTimeout, 124, CodeTimeout},
		{"cancelled", Outcome{Signal: syscall.SIGKILL, Cancelled: true}, StatusKilled, 137, CodeSignaled},
	} {
		resp := c.o.Response(NewCapture(10), NewCapture(10))
		var code Code
		if resp.Error != nil {
			code = resp.Error.Code
		}
		if resp.Status != c.status || resp.ExitCode != c.exit || code != c.code {
			t.Errorf("%s: %s %d %s, want %s %d %s", c.name, resp.Status, resp.ExitCode, code, c.status, c.exit, c.code)
		}
	}
	if got, want := LimitError(CodeMemoryLimit, req).Message,
		"resources.memory_bytes: memory limit exceeded (67108864); the process tree was killed"; got != want {
		t.Errorf("LimitError message %q, want %q", got, want)
	}
}
