package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/artrt/art/overlay"
	"golang.org/x/sys/unix"
)

// StateDir is where art keeps a session's mountpoint and private copies:
// under /run (root) or the user's runtime dir - both covered by the
// sandbox's private /run, so never visible inside.
func StateDir() (string, error) {
	base := "/run/art"
	if os.Geteuid() != 0 {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			base = filepath.Join(x, "art")
		} else {
			base = filepath.Join(os.TempDir(), fmt.Sprintf("art-%d", os.Getuid()))
		}
	}
	// 0711: the sandbox's uid must reach the mountpoint to bind it, but
	// may not list the sessions.
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return base, nil
}

// branchLock holds an exclusive lock on (store, branch) for a session:
// two mounts of one branch would interleave their changes.
func branchLock(base, db, branch string) (*os.File, error) {
	abs, _ := filepath.Abs(db)
	sum := sha256.Sum256([]byte(abs + "\x00" + branch))
	p := filepath.Join(base, "lock-"+hex.EncodeToString(sum[:8]))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, &BranchInUseError{Store: db, Branch: branch}
	}
	return f, nil
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
	for _, parent := range []string{"/var/tmp", ""} {
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
			os.RemoveAll(d)
		}
		f.Close()
	}
}
