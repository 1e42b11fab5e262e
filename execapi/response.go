package execapi

import "time"

// Status is the outcome of one execution.
type Status string

const (
	StatusSuccess Status = "success" // ran and exited 0
	StatusError   Status = "error"   // exited non-zero, or did not run (see Error)
	StatusTimeout Status = "timeout" // timeout_ms passed; exit_code 124
	StatusKilled  Status = "killed"  // ended by a signal or a limit; exit_code 128+N
)

// Exit codes of the conventions art follows (timeout(1), shells).
const (
	ExitTimeout = 124
	ExitNotRun  = -1  // the command never started
	ExitSignal  = 128 // + signal number
)

// Response is one ExecutionResponse (docs/schema/exec-response.v1.json).
// Every field is always present except snapshot_*, changes and error.
type Response struct {
	APIVersion      int     `json:"api_version"`
	ExecutionID     string  `json:"execution_id"`
	Status          Status  `json:"status"`
	ExitCode        int     `json:"exit_code"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	Metrics         Metrics `json:"metrics"`
	// SnapshotBefore and SnapshotAfter are full snapshot ids, present
	// when the request asked for snapshots and the executor has a store.
	SnapshotBefore string   `json:"snapshot_before,omitempty"`
	SnapshotAfter  string   `json:"snapshot_after,omitempty"`
	Changes        *Changes `json:"changes,omitempty"`
	// Capture is set on the first response after the workspace capture
	// that started the executor, if the host and the branch had both
	// changed paths since the capture before it.
	Capture    *WorkspaceCapture `json:"capture,omitempty"`
	Timestamps Timestamps        `json:"timestamps"`
	Error      *Error            `json:"error,omitempty"`
}

// Metrics of one execution. Times are milliseconds, sizes bytes.
type Metrics struct {
	WallTimeMS     int64 `json:"wall_time_ms"`
	UserTimeMS     int64 `json:"user_time_ms"`     // rusage of the command's whole process tree (in a sandbox: of its init)
	KernelTimeMS   int64 `json:"kernel_time_ms"`   //
	MaxMemoryBytes int64 `json:"max_memory_bytes"` // the cgroup's peak, else peak RSS of the largest process (ru_maxrss)
	IOBytesRead    int64 `json:"io_bytes_read"`    // rchar of the tree: bytes through read(2) and kin, pipes included
	IOBytesWritten int64 `json:"io_bytes_written"` // wchar of the tree: bytes through write(2) and kin
}

// MaxChangedPaths bounds Changes.Paths.
const MaxChangedPaths = 100

// Changes summarises the difference between snapshot_before and
// snapshot_after: counts of every change, the first MaxChangedPaths paths.
type Changes struct {
	Added          int          `json:"added"`
	Modified       int          `json:"modified"`
	Deleted        int          `json:"deleted"`
	Paths          []PathChange `json:"paths"`
	PathsTruncated bool         `json:"paths_truncated"`
}

// WorkspaceCapture reports the paths both the host and the branch changed since
// the previous capture, and which side's version the branch kept (the
// rule: docs/architecture.md, "Capture").
type WorkspaceCapture struct {
	Conflicts int               `json:"conflicts"`
	Paths     []CaptureConflict `json:"conflict_paths"` // the first 100
}

// CaptureConflict is one path both sides changed.
type CaptureConflict struct {
	Path string `json:"path"` // store path: /WORKSPACE/...
	Kept string `json:"kept"` // "host" or "branch"
	Why  string `json:"why"`
}

// PathChange is one changed path, relative to /home/agent.
type PathChange struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added | modified | deleted
}

// Add counts one change and keeps its path while there is room.
func (c *Changes) Add(path, change string) {
	switch change {
	case "added":
		c.Added++
	case "modified":
		c.Modified++
	case "deleted":
		c.Deleted++
	}
	if len(c.Paths) < MaxChangedPaths {
		c.Paths = append(c.Paths, PathChange{Path: path, Change: change})
	} else {
		c.PathsTruncated = true
	}
}

// Timestamps are RFC 3339 UTC times with nanoseconds.
type Timestamps struct {
	Received string `json:"received"` // the request was read
	Started  string `json:"started"`  // the command started ("" if it never did)
	Finished string `json:"finished"` // the response was complete
}

// Stamp formats t as the timestamps do.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Failed returns the response for a request that did not run.
func Failed(e *Error) *Response {
	return &Response{APIVersion: APIVersion, Status: StatusError, ExitCode: ExitNotRun, Error: e}
}
