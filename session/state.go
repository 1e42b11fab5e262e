package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"golang.org/x/sys/unix"
)

// StateDir is where art keeps a session's mountpoint and private copies,
// next to the branch locks (journal.LockDir): under /run (root) or the
// user's runtime dir - both covered by the sandbox's private /run, so never
// visible inside.
func StateDir() (string, error) {
	base := journal.LockDir()
	// 0711: the sandbox's uid must reach the mountpoint to bind it, but
	// may not list the sessions.
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return base, nil
}

// UpperParent is where sessions keep private copies of the files the
// agent is writing: $ART_TMPDIR when set (a disk with room for large
// files; the tests' own directory), else /var/tmp - on disk, unlike /run.
func UpperParent() string {
	if d := os.Getenv("ART_TMPDIR"); d != "" {
		return d
	}
	return "/var/tmp"
}

// CleanStale removes what sessions killed with SIGKILL left in the state
// dir base: their FUSE mounts (detached) and session directories, and
// their private copies of the agent's open files. A session is stale when
// nobody holds its lock. What it did and could not do goes to warn.
func CleanStale(base string, warn io.Writer) {
	if warn == nil {
		warn = io.Discard
	}
	// Their private copies of the agent's open files too.
	for _, parent := range []string{UpperParent(), ""} {
		if _, err := overlay.CleanStaleUppers(parent); err != nil {
			fmt.Fprintf(warn, "art: warning: cannot remove a killed session's private copies: %v\n", err)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(base, "session-*"))
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, "lock"))
		if err != nil {
			continue // being created, or not ours
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			continue // alive
		}
		home := filepath.Join(d, "home")
		err = overlay.CleanStale(home)
		if err == nil {
			// Fails while anything is still mounted there: then the
			// directory stays, lock included, for a later try.
			err = os.Remove(home)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(warn, "art: warning: cannot clean up killed session %s: %v\n", filepath.Base(d), err)
		} else {
			fmt.Fprintf(warn, "art: cleaned up after a killed session (%s)\n", filepath.Base(d))
			removeTree(d) // never through a mount
		}
		f.Close()
	}
}

// Live is a session running on a store.
type Live struct {
	PID    int       // the art process holding it
	Branch string    // the branch it serves
	Since  time.Time // when it was opened
	Dir    string    // its state directory
}

// List returns the live sessions of the store file store whose state is
// under base (StateDir): those whose lock is held. A session writes who
// it is into its lock file when it opens (describe).
func List(base, store string) ([]Live, error) {
	abs, err := filepath.Abs(store)
	if err != nil {
		return nil, err
	}
	// Sessions name the store as the journal does: links resolved.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	dirs, err := filepath.Glob(filepath.Join(base, "session-*"))
	if err != nil {
		return nil, err
	}
	var out []Live
	seen := map[Live]bool{}
	for _, d := range dirs {
		if l, ok := readLive(filepath.Join(d, "lock")); ok && l.store == abs {
			l.Dir = d
			out = append(out, l.Live)
			seen[Live{PID: l.PID, Branch: l.Branch}] = true
		}
	}
	// Branch locks name the sessions that have no directory here (art
	// mount of a branch at the user's mountpoint).
	locks, err := filepath.Glob(filepath.Join(base, "lock-*"))
	if err != nil {
		return nil, err
	}
	for _, p := range locks {
		if l, ok := readLive(p); ok && l.store == abs && !seen[Live{PID: l.PID, Branch: l.Branch}] {
			out = append(out, l.Live)
		}
	}
	return out, nil
}

type liveSession struct {
	Live
	store string
}

// readLive reads the lock file p if a session holds it.
func readLive(p string) (liveSession, bool) {
	f, err := os.Open(p)
	if err != nil {
		return liveSession{}, false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
		return liveSession{}, false // nobody holds it: stale, or not yet locked
	}
	st, err := f.Stat()
	if err != nil {
		return liveSession{}, false
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return liveSession{}, false
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 3 {
		return liveSession{}, false // being opened: not described yet
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil {
		return liveSession{}, false
	}
	return liveSession{Live: Live{PID: pid, Branch: lines[2], Since: st.ModTime()}, store: lines[1]}, true
}

// describe writes who holds a session's lock into it, for List: the pid,
// the store's absolute path and the branch, a line each.
func describe(lock *os.File, store, branch string) error {
	abs, err := filepath.Abs(store)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil { // as List and the journal's locks name it
		abs = real
	}
	_, err = fmt.Fprintf(lock, "%d\n%s\n%s\n", os.Getpid(), abs, branch)
	return err
}
