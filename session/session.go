package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/workspace"
	"golang.org/x/sys/unix"
)

// Options say which store, branch and workspace a session serves, and as
// whom.
type Options struct {
	Store      string // store file (created if missing); "" in Run: direct mode, nothing recorded
	Durability string // journal.Durability ("" the journal's default)
	Workspace  string // host workspace directory, absolute

	// Branch is the branch to run on (required: the caller resolves the
	// default, journal.DefaultBranch), created from main's head
	// if new. With At, the session starts on a new branch from the state
	// at revision At, named Branch when NamedBranch is set, else at-REV-TIME.
	Branch      string
	NamedBranch bool
	At          string

	UID, GID      int   // the host user the sandbox runs as (DefaultUser)
	DiskQuota     int64 // cap on bytes written to the overlay (0: none)
	JournalWrites bool  // forensic mode: journal every write request

	// Warm (Run only): serve the overlay from the branch's warm daemon
	// and keep it mounted for this long after the run, for the next run
	// of the branch (warm.go; 0: a mount of the run's own).
	Warm time.Duration

	// Warn receives art's own messages ("art: new branch ...", warnings),
	// one line each; nil discards them. Progress, if set, follows the
	// workspace capture.
	Warn     io.Writer
	Progress Progress
}

func (o *Options) warn() io.Writer {
	if o.Warn == nil {
		return io.Discard
	}
	return o.Warn
}

// Session is a branch of a store served as /home/agent: the store open,
// the branch locked against other sessions, the host workspace captured,
// the overlay mounted in a private state directory. art run holds one for
// one command, art exec --jsonl for a stream of requests.
type Session struct {
	DB     *journal.DB
	Branch string
	FS     *overlay.FS
	Dir    string           // the session's private state directory
	Before journal.Snapshot // the capture's snapshot: the state the session starts from
	// Capture is what the capture did; its Conflicts are the paths both
	// the host and the branch changed, reported to the user.
	Capture workspace.ImportStats
	undo    []func() // run by Close, last first
	// reserve is the space held for recording a failure (reserveSpace),
	// let go of by Close before anything else of the undo: the records
	// after it need it on a full disk.
	reserve *os.File
	// lock is the branch's lock, released after everything else (Close),
	// or by CloseAside's wait once the caller's end records are in: until
	// then no other session may take the branch, whose tree the end's
	// snapshot must find as this session left it.
	lock *journal.BranchLock
	// log holds the overlay's messages while the session runs: its
	// program may own the terminal art's stderr is. Close writes them to
	// Options.Warn.
	log  *heldLog
	warn io.Writer
}

// Open prepares o's store and branch, captures the workspace and mounts
// the overlay, filling cfg.Home and cfg.Hide. newOp, if set, returns the
// operation the mount's changes are journaled under (created after the
// capture); otherwise the mount has an operation of its own. On error the
// returned Session is half open: Close it, then close its DB if set.
func Open(ctx context.Context, o Options, cfg *sandbox.Config,
	newOp func(db *journal.DB, branch string) (*journal.Op, error)) (s *Session, err error) {
	s = &Session{log: &heldLog{}, warn: o.warn()}
	defer func() {
		if err != nil {
			s.Close(context.WithoutCancel(ctx)) // the caller closes s.DB
		}
	}()
	end := phase.Start("journal open")
	db, err := journal.Open(ctx, o.Store, journal.Options{Create: true, Durability: journal.Durability(o.Durability)})
	end()
	if err != nil {
		return s, err
	}
	s.DB = db
	db.Recovered().Report(o.warn())
	base, err := StateDir()
	if err != nil {
		return s, err
	}
	end = phase.Start("state dir, branch, lock")
	if s.Branch, err = prepareBranch(ctx, db, o); err != nil {
		return s, err
	}
	if s.lock, err = db.LockBranch(ctx, s.Branch); err != nil {
		return s, err
	}
	// Holding the branch's lock: no warm daemon of the branch is alive
	// (one holds it while it lives), so a socket of one here is a killed
	// daemon's. It goes now (a daemon starting here listens afresh), or
	// it would stay in the state directory until one does.
	os.Remove(WarmSocket(o.Store, s.Branch))

	end()
	// What does not depend on the capture runs beside it: cleaning up
	// after killed sessions (globs of the state directory and the
	// temporary directories) and the space reserve, each about a
	// millisecond of a tiny run's start. Its messages follow the
	// capture's, as when it ran after it.
	var cleaned bytes.Buffer
	var reserve *os.File
	aside := make(chan struct{})
	go func() {
		defer close(aside)
		defer phase.Start("clean stale, reserve space (beside the capture)")()
		CleanStale(base, &cleaned)
		reserve = reserveSpace(filepath.Dir(db.Path()), reserveBytes)
	}()
	joinAside := func() {
		<-aside
		s.warn.Write(cleaned.Bytes())
		s.reserve = reserve
	}
	end = phase.Start("capture")
	st, err := Capture(ctx, db, o.Workspace, s.Branch, "capture workspace", o.Warn, o.Progress)
	end()
	joinAside()
	if err != nil {
		return s, err
	}
	s.Before, s.Capture = st.Snapshot, st

	end = phase.Start("session dir, lock, upper dir")
	mnt, upper, err := s.makeDir(base)
	if err != nil {
		return s, err
	}
	end()
	var wst unix.Stat_t
	if err := unix.Stat(o.Workspace, &wst); err != nil {
		return s, fmt.Errorf("workspace: %w", err)
	}
	var op *journal.Op
	if newOp != nil {
		if op, err = newOp(db, s.Branch); err != nil {
			return s, err
		}
	}
	end = phase.Start("overlay mount")
	s.FS, err = overlay.Mount(ctx, mnt, overlay.Options{DB: db, Branch: s.Branch, Lower: o.Workspace, Op: op,
		UpperDir: upper, AllowOther: os.Geteuid() == 0,
		Owner:       &overlay.Owner{UID: uint32(o.UID), GID: uint32(o.GID)},
		RecordOwner: &overlay.Owner{UID: wst.Uid, GID: wst.Gid},
		Quota:       o.DiskQuota, JournalWrites: o.JournalWrites, Description: "session " + filepath.Base(s.Dir),
		NameCallers: true, Log: s.log.add,
		// ART_PRIME=0 leaves the kernel's caches cold (to measure).
		Prime: os.Getenv("ART_PRIME") != "0",
		// ART_CLOSE_LOG=0 makes every close commit (to measure).
		CommitCloses: os.Getenv("ART_CLOSE_LOG") == "0"})
	end()
	if err != nil {
		return s, err
	}
	cfg.Home = mnt
	cfg.Hide = append(workspace.StoreFiles(db.Path()), base, upper)
	if cfg.Name != "" {
		// The sandbox's first request on the mount after its release
		// is the lookup of the workspace's directory, bwrap's --chdir
		// into /home/agent/<Name>. Made now, on another goroutine while
		// bwrap starts, it is in the kernel's cache (the mount's entry
		// timeout) when bwrap gets there, and the command starts a
		// round trip to this process sooner. A stat is a system call,
		// not a page fault of this process on its own mount (which
		// could deadlock with the runtime stopping the world): the
		// runtime does not wait for a goroutine blocked in one. Not
		// waited for: it is over long before the run ends (were it
		// still going, the unmount's retries on EBUSY would wait).
		go unix.Lstat(filepath.Join(mnt, cfg.Name), new(unix.Stat_t))
	}
	return s, nil
}

// makeDir makes the session's directory under base (s.Dir), takes its
// liveness lock, and makes the mount point (returned as mnt) and the
// directory of private copies (upper).
func (s *Session) makeDir(base string) (string, string, error) {
	dir, err := os.MkdirTemp(base, "session-")
	if err != nil {
		return "", "", fmt.Errorf("session dir: %w", err)
	}
	s.Dir = dir
	s.undo = append(s.undo, func() { removeTree(dir) }) // never through a mount
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", "", err
	}
	// Held while this session lives: a later session that can take it
	// knows this one's art is gone (CleanStale).
	alive, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", "", err
	}
	s.undo = append(s.undo, func() { alive.Close() })
	if err := unix.Flock(int(alive.Fd()), unix.LOCK_EX); err != nil {
		return "", "", err
	}
	if err := describe(alive, s.DB.Path(), s.Branch); err != nil {
		return "", "", fmt.Errorf("session lock: %w", err)
	}
	mnt := filepath.Join(dir, "home")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", "", err
	}
	// Private copies of files being written live on disk (/var/tmp), not
	// under /run: that is a small tmpfs on most hosts, which an agent
	// writing a large file would fill. The sandbox has /var/tmp of its own.
	upper, release, err := overlay.MakeUpperDir(UpperParent())
	if err != nil {
		if upper, release, err = overlay.MakeUpperDir(""); err != nil {
			return "", "", err
		}
	}
	s.undo = append(s.undo, release)
	return mnt, upper, nil
}

// Close unmounts (journaling what is still dirty) and releases the
// session's lock and state. The store stays open for the caller's closing
// records; the caller closes s.DB. Safe on a half-opened session and twice.
//
// When the unmount fails (a process outside the sandbox still has a file
// or directory of the mount open) nothing of the session goes: removing
// its directory would walk into the live mount and delete the branch's
// files through it, journaled, and its private copies hold the content of
// files still open. A later Close retries; otherwise, once this process
// has exited, the next session cleans it up as a killed one's.
//
// A mount that failed (*overlay.FailedError: the store could not keep
// what the sandbox wrote) is unmounted all the same: Close releases the
// session and returns that error.
func (s *Session) Close(ctx context.Context) error {
	err := s.close(ctx)
	if s.FS == nil {
		s.runUndo(s.takeUndo())
		s.releaseLock()
	}
	return err
}

// CloseAside is Close with the release of the session's state - its
// directory, private copies directory and liveness lock - left to a
// goroutine: the caller records the run's end meanwhile (about two
// milliseconds of file system calls at the end of every run, beside its
// last transaction and the store's close). The unmount, and the release
// of the failure reserve the records need, are done before it returns;
// wait (never nil) waits for the rest and then releases the branch's lock,
// so the caller calls it once its end records are in (and before it
// returns): another session taking the branch before them would change
// the tree the end's snapshot records. When the unmount fails nothing is
// released, as with Close.
func (s *Session) CloseAside(ctx context.Context) (wait func(), err error) {
	err = s.close(ctx)
	if s.FS != nil {
		return func() {}, err
	}
	undo := s.takeUndo()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer phase.Start("session state released (aside)")()
		s.runUndo(undo)
	}()
	return func() { <-done; s.releaseLock() }, err
}

// releaseLock gives the branch's lock up (once).
func (s *Session) releaseLock() {
	if s.lock != nil {
		s.lock.Release()
		s.lock = nil
	}
}

// takeUndo returns the undo steps Close must run (none while the mount
// is still up: an unmount that failed), after letting go of the reserve.
func (s *Session) takeUndo() []func() {
	if s.FS != nil {
		return nil
	}
	if s.reserve != nil {
		s.reserve.Close()
		s.reserve = nil
	}
	undo := s.undo
	s.undo = nil
	return undo
}

func (s *Session) runUndo(undo []func()) {
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
}

// close unmounts (see Close); the undo is the caller's.
func (s *Session) close(ctx context.Context) error {
	var failed error
	if s.FS != nil {
		if phase.On() {
			phase.Note("overlay: %+v", s.FS.Stats())
		}
		end := phase.Start("overlay unmount")
		err := s.FS.Unmount(ctx)
		end()
		s.log.flush(s.warn)
		if err != nil {
			var fe *overlay.FailedError
			if !errors.As(err, &fe) {
				return fmt.Errorf("%w (session %s left for the next run to clean up)", err, filepath.Base(s.Dir))
			}
			failed = err
		}
		s.FS = nil
	}
	return failed
}

// prepareBranch resolves o.Branch and o.At to the branch the session
// uses, creating it when new.
func prepareBranch(ctx context.Context, db *journal.DB, o Options) (string, error) {
	branch := o.Branch
	if branch == "" {
		return "", errNoBranch
	}
	if o.At != "" {
		st, err := db.Resolve(ctx, o.At, journal.DefaultBranch)
		if err != nil {
			return "", err
		}
		name := branch
		if !o.NamedBranch {
			name = fmt.Sprintf("at-%s-%d", o.At, time.Now().Unix())
			name = strings.NewReplacer("~", "-", "@", "seq", "/", "-").Replace(name)
		}
		if _, err := db.Branch(ctx, name); err == nil {
			return "", usagef("--at starts a new branch, and %s exists (name a new one with --branch)", name)
		}
		if _, err := db.CreateBranch(ctx, name, st); err != nil {
			return "", err
		}
		if err := db.InheritImportCache(ctx, name, st.Branch); err != nil {
			return "", err
		}
		fmt.Fprintf(o.warn(), "art: new branch %s from %s\n", termtext.Quote(name), termtext.Quote(o.At))
		return name, nil
	}
	if _, err := db.Branch(ctx, branch); errors.Is(err, journal.ErrBranchNotFound) {
		if err := journal.ValidBranchName(branch); err != nil {
			return "", usagef("%v", err)
		}
		head, err := db.Head(ctx, journal.DefaultBranch)
		if err != nil {
			return "", err
		}
		if _, err := db.CreateBranch(ctx, branch, head); err != nil {
			return "", err
		}
		if err := db.InheritImportCache(ctx, branch, journal.DefaultBranch); err != nil {
			return "", err
		}
		fmt.Fprintf(o.warn(), "art: new branch %s from %s\n", termtext.Quote(branch), journal.DefaultBranch)
	} else if err != nil {
		return "", err
	}
	return branch, nil
}

// reserveBytes is the space a session holds on its store's file system
// (reserveSpace).
const reserveBytes = 1 << 20

// reserveSpace allocates n bytes in an unnamed file in dir (O_TMPFILE)
// and returns it open, or nil where that cannot be done. A session holds
// it while it runs and lets go of it when it closes (a killed art lets go
// with its descriptors): if the sandbox filled the disk and the store
// could not keep its writes, the space is there for recording that the
// run failed and the snapshot of what was kept (docs/architecture.md,
// "Commit failure").
func reserveSpace(dir string, n int64) *os.File {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil
	}
	if err := unix.Fallocate(fd, 0, 0, n); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "reserve")
}
