package execapi

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Outcome is how a command ended, as the executor that ran it saw it. The
// Runner builds one from wait4 and /proc; a sandboxed executor builds one
// from its own result (cgroup peak memory, OOM kills, bwrap's 128+N) and
// gets the same status mapping from Response.
type Outcome struct {
	Started             time.Time
	Wall, User, Kernel  time.Duration
	MaxMemory           int64          // bytes
	IORead, IOWritten   int64          // bytes
	ExitCode            int            // the command's exit status, when Signal is 0
	Signal              syscall.Signal // the signal that ended it; 0 if it exited
	TimedOut, Cancelled bool
	Timeout             time.Duration // the limit that TimedOut refers to
	Limit               *Error        // the E4xxx error of a limit that ended it (LimitError)
}

// Response maps o to a response: exit 0 success; exit n error; timeout
// 124 timeout (E3003); signal N or a limit 128+N killed (E3004, E4xxx).
// Cancellation (art shutting down) is killed with E3004. Output comes from
// the captures. The Server fills execution_id, api_version and the
// received and finished times.
func (o *Outcome) Response(stdout, stderr *Capture) *Response {
	resp := &Response{
		APIVersion:      APIVersion,
		Stdout:          stdout.String(),
		Stderr:          stderr.String(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		Metrics: Metrics{
			WallTimeMS:     o.Wall.Milliseconds(),
			UserTimeMS:     o.User.Milliseconds(),
			KernelTimeMS:   o.Kernel.Milliseconds(),
			MaxMemoryBytes: o.MaxMemory,
			IOBytesRead:    o.IORead,
			IOBytesWritten: o.IOWritten,
		},
	}
	if !o.Started.IsZero() {
		resp.Timestamps.Started = Stamp(o.Started)
	}
	code := o.ExitCode
	if o.Signal != 0 {
		code = ExitSignal + int(o.Signal)
	}
	sig := int(o.Signal)
	switch {
	case o.TimedOut:
		resp.Status, resp.ExitCode = StatusTimeout, ExitTimeout
		resp.Error = Errorf(CodeTimeout, "timed out after %d ms; the process tree was killed", o.Timeout.Milliseconds()).
			with("timeout_ms", o.Timeout.Milliseconds())
	case o.Cancelled:
		resp.Status, resp.ExitCode = StatusKilled, code
		resp.Error = Errorf(CodeSignaled, "cancelled: art is shutting down; the process tree was killed")
	case o.Limit != nil:
		resp.Status, resp.ExitCode, resp.Error = StatusKilled, code, o.Limit
	case o.Signal == syscall.SIGXCPU:
		resp.Status, resp.ExitCode = StatusKilled, code
		resp.Error = Errorf(CodeCPULimit, "CPU time limit exceeded (SIGXCPU)").with("signal", sig)
	case o.Signal != 0:
		resp.Status, resp.ExitCode = StatusKilled, code
		resp.Error = Errorf(CodeSignaled, "killed by signal %d (%s)", sig, unix.SignalName(o.Signal)).with("signal", sig)
	case code == 0:
		resp.Status = StatusSuccess
	default:
		resp.Status, resp.ExitCode = StatusError, code
	}
	return resp
}

// LimitError is the error of a response ended by the resource limit c
// (CodeMemoryLimit, CodeCPULimit, CodePidsLimit, CodeDiskLimit), naming
// the request's value.
func LimitError(c Code, req *Request) *Error {
	field, v := "", int64(0)
	switch c {
	case CodeMemoryLimit:
		field, v = "resources.memory_bytes", req.Resources.MemoryBytes
	case CodeCPULimit:
		field, v = "resources.cpu_ms", req.Resources.CPUMS
	case CodePidsLimit:
		field, v = "resources.max_pids", req.Resources.MaxPids
	case CodeDiskLimit:
		field, v = "resources.disk_bytes", req.Resources.DiskBytes
	}
	return Errorf(c, "%s: %s (%d); the process tree was killed", field, c.Title(), v).with("field", field).with("limit", v)
}
