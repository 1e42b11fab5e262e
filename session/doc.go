// Package session is what art is: a branch of a store served as the
// agent's /home/agent, commands run on it in a bubblewrap sandbox, and
// everything they change journaled, ending in a snapshot.
//
// A session's life:
//
//  1. Open: the store is opened (created if missing); the branch is
//     prepared (created from main's head when new, or from revision At);
//     the branch's lock (journal.DB.LockBranch) keeps other sessions, and
//     every other change of the branch's tree, off it; the host
//     workspace is captured into the branch (Capture: an incremental
//     push); sessions a SIGKILL left behind are cleaned up (CleanStale);
//     the overlay mounts the branch at StateDir/session-*/home, with a lock
//     held for as long as this session lives.
//  2. Commands: each runs in a sandbox of its own (sandbox.Start: bwrap in
//     a cgroup with the limits, the seccomp deny-list, binds from the
//     caller and from the host workspace's .art/config/binds.json), under
//     the tracer when asked, behind art's network proxy with --net allow.
//     Its file changes are journaled under its own operation.
//  3. Close: the overlay unmounts (journaling what is still dirty), the
//     locks and the state directory are released. The caller records the
//     operation's end and a snapshot, then closes the store.
//
// Run does all three for one command (art run), and with no store runs
// the command over the host workspace bound read-write, recording
// nothing (direct mode). NewExecutor keeps one session open for a stream
// of requests of the JSON exec API (art exec): each is an "exec"
// operation with snapshots before and after it. Open and Close are the
// parts, for callers that run commands their own way; List names the
// sessions running on a store. Serve mounts a branch at a mountpoint of
// the caller's choosing, outside any sandbox (art mount), under the same
// branch lock.
//
// The package prints nothing of its own: art's messages (a new branch,
// a cleaned-up session, warnings) go to Options.Warn, the capture's
// progress to Options.Progress, and the command's output to the writers
// in Command. Errors the caller has to fix are *UsageError; a branch
// another session holds is *BranchInUseError. Run passes the signals
// art receives on to the command (SIGINT, SIGQUIT) or stops it with them
// (SIGTERM, SIGHUP), so it belongs in a process that runs one session.
package session
