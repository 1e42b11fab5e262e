package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// session is a branch of a store served as /home/agent: the store open,
// the branch locked against other runs, the host workspace captured, the
// overlay mounted in a private state directory. art run holds one for one
// command, art exec --jsonl for a stream of requests.
type session struct {
	db     *journal.DB
	branch string
	fsys   *overlay.FS
	dir    string           // the session's private state directory
	before journal.Snapshot // the capture's snapshot: the state the session starts from
	undo   []func()         // run by close, last first
}

// openSession prepares o's store and branch and mounts the overlay,
// filling cfg.Home and cfg.Hide. newOp, if set, returns the operation the
// mount's changes are journaled under (created after the capture);
// otherwise the mount has an operation of its own.
func openSession(ctx context.Context, e *env, o runOptions, cfg *sandbox.Config,
	newOp func(db *journal.DB, branch string) (*journal.Op, error)) (s *session, err error) {
	s = &session{}
	defer func() {
		if err != nil {
			s.close(context.WithoutCancel(ctx)) // the caller closes s.db
		}
	}()
	db, err := journal.Open(ctx, o.db, journal.Options{Create: true, Durability: journal.Durability(o.durability)})
	if err != nil {
		return s, err
	}
	s.db = db
	base, err := stateDir()
	if err != nil {
		return s, err
	}
	if s.branch, err = prepareBranch(ctx, e, db, o); err != nil {
		return s, err
	}
	lock, err := branchLock(base, o.db, s.branch)
	if err != nil {
		return s, err
	}
	s.undo = append(s.undo, func() { lock.Close() })

	bar := newProgress(e.stderr)
	st, err := workspace.Import(ctx, db, workspace.ImportOptions{Dir: o.dir, Branch: s.branch, Warn: e.stderr,
		Message: "capture workspace", Capture: true,
		Progress: func(s workspace.ImportStats) {
			bar.update("capturing %s: %d files, %s read", o.dir, s.Files, fmtBytes(s.BytesRead))
		}})
	bar.done()
	if err != nil {
		return s, err
	}
	s.before = st.Snapshot

	cleanStaleSessions(e, base)
	dir, err := os.MkdirTemp(base, "session-")
	if err != nil {
		return s, fmt.Errorf("session dir: %w", err)
	}
	s.dir = dir
	s.undo = append(s.undo, func() { removeTree(dir) }) // never through a mount
	if err := os.Chmod(dir, 0o711); err != nil {
		return s, err
	}
	// Held while this session lives: a later run that can take it knows
	// the session's art is gone (cleanStaleSessions).
	alive, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return s, err
	}
	s.undo = append(s.undo, func() { alive.Close() })
	if err := unix.Flock(int(alive.Fd()), unix.LOCK_EX); err != nil {
		return s, err
	}
	mnt := filepath.Join(dir, "home")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return s, err
	}
	// Private copies of files being written live on disk (/var/tmp), not
	// under /run: that is a small tmpfs on most hosts, which an agent
	// writing a large file would fill. The sandbox has /var/tmp of its own.
	upper, release, err := overlay.MakeUpperDir("/var/tmp")
	if err != nil {
		if upper, release, err = overlay.MakeUpperDir(""); err != nil {
			return s, err
		}
	}
	s.undo = append(s.undo, release)
	var wst unix.Stat_t
	if err := unix.Stat(o.dir, &wst); err != nil {
		return s, fmt.Errorf("workspace: %w", err)
	}
	var op *journal.Op
	if newOp != nil {
		if op, err = newOp(db, s.branch); err != nil {
			return s, err
		}
	}
	s.fsys, err = overlay.Mount(ctx, mnt, overlay.Options{DB: db, Branch: s.branch, Lower: o.dir, Op: op,
		UpperDir: upper, AllowOther: os.Geteuid() == 0,
		Owner:       &overlay.Owner{UID: uint32(o.uid), GID: uint32(o.gid)},
		RecordOwner: &overlay.Owner{UID: wst.Uid, GID: wst.Gid},
		Quota:       o.diskQuota, JournalWrites: o.journalWrites, Description: "session " + filepath.Base(dir),
		NameCallers: true})
	if err != nil {
		return s, err
	}
	cfg.Home = mnt
	cfg.Hide = append(workspace.StoreFiles(db.Path()), base, upper)
	return s, nil
}

// close unmounts (journaling what is still dirty) and releases the
// session's lock and state. The store stays open for the caller's closing
// records; the caller closes s.db. Safe on a half-opened session and twice.
//
// When the unmount fails (a process outside the sandbox still has a file
// or directory of the mount open) nothing of the session goes: removing
// its directory would walk into the live mount and delete the branch's
// files through it, journaled, and its private copies hold the content of
// files still open. A later close retries; otherwise, once this process
// has exited, the next run cleans it up as a killed run's.
func (s *session) close(ctx context.Context) error {
	if s.fsys != nil {
		if err := s.fsys.Unmount(ctx); err != nil {
			return fmt.Errorf("%w (session %s left for the next run to clean up)", err, filepath.Base(s.dir))
		}
		s.fsys = nil
	}
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
	return nil
}
