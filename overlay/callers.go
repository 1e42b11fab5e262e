package overlay

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// callerPid is the pid (a thread id, in the mount's pid namespace) of the
// process whose request this is, 0 for requests the kernel makes itself.
func callerPid(ctx context.Context) int64 {
	if c, ok := fuse.FromContext(ctx); ok {
		return int64(c.Pid)
	}
	return 0
}

// noteCaller names pid in the journal the first time a change comes from
// it (Options.NameCallers). It runs after the change's update, while the
// caller is still blocked in its system call (so /proc/PID is its live
// self) and outside the batch's lock. Changing requests come from system
// calls (create, rename, close...), never from page faults, so the caller
// holds no mmap lock that reading its cmdline would wait for.
func (f *FS) noteCaller(ctx context.Context, pid int64) {
	if !f.nameCallers || pid == 0 {
		return
	}
	if _, seen := f.callers.LoadOrStore(pid, struct{}{}); seen {
		return
	}
	ev, ok := procExec(pid, time.Now())
	if !ok {
		return // gone already: its events keep the bare pid
	}
	// Best effort: naming must not fail the change it follows.
	if f.caughtUp() != nil {
		return
	}
	f.batch.Update(ctx, func(tx *journal.Tx) error { return tx.Record(ev) })
}

// procExecInfo is the Value of an EvExec event made from /proc: the same
// JSON fields as a tracer record of an exec, with source "proc".
type procExecInfo struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	PID    int64     `json:"pid"`
	PPID   int64     `json:"ppid"`
	Path   string    `json:"path,omitempty"`
	Argv   []string  `json:"argv"`
	Cwd    string    `json:"cwd,omitempty"`
	Source string    `json:"source"`
}

// procExec describes what pid runs now, from /proc. Paths are as the
// process sees them (its mount namespace).
func procExec(pid int64, now time.Time) (journal.Event, bool) {
	dir := "/proc/" + strconv.FormatInt(pid, 10)
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil || len(b) == 0 {
		return journal.Event{}, false
	}
	argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	info := procExecInfo{Time: now, Kind: "exec", PID: pid, Argv: argv, Source: "proc"}
	info.Path, _ = os.Readlink(dir + "/exe")
	info.Cwd, _ = os.Readlink(dir + "/cwd")
	if st, err := os.ReadFile(dir + "/status"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				info.PPID, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	value, err := json.Marshal(info)
	if err != nil {
		return journal.Event{}, false
	}
	return journal.Event{Kind: journal.EvExec, PID: pid, Text: strings.Join(argv, "\x00"), Value: value}, true
}

// Record appends events that do not change the tree (exec and syscall
// records from a tracer, network decisions: journal.EvExec, EvSyscall,
// EvNet) to the mount's session, through the mount's Batch: in a process
// that serves a mount, that Batch is the only writer, so other journal
// writers must use this. Safe from any goroutine; the events commit with
// the next group commit.
func (f *FS) Record(ctx context.Context, evs ...journal.Event) error {
	if err := f.caughtUp(); err != nil {
		return err
	}
	return f.batch.Record(ctx, evs...)
}
