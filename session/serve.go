package session

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/workspace"
)

// ServeOptions say what Serve mounts: a branch to work on, or (At, with
// ReadOnly) a past state to look at.
type ServeOptions struct {
	Branch    string // required (the caller resolves the default)
	At        string // a revision to serve read-only instead of the branch
	Workspace string // host workspace to capture first and use as the lower layer ("" none)
	ReadOnly  bool

	JournalWrites bool // forensic mode: journal every write request
	AllowOther    bool // let other users use the mount
	Debug         bool // log every FUSE request to stderr

	// Warn receives the capture's messages, one line each; nil discards
	// them.
	Warn io.Writer
}

// Served is a branch of a store mounted at a mountpoint the caller chose
// (art mount), outside any sandbox: the user's own tools work on it and
// every change is journaled as in a session.
type Served struct {
	FS      *overlay.FS
	Capture *workspace.ImportStats // the workspace capture before the mount; nil without one
	undo    []func()
}

// Serve mounts o's branch of db at mnt. A writable mount holds the same
// branch lock a session does, so a mount and a run never interleave
// their changes on one branch. With At, the state is served through a
// temporary branch that Close deletes. Close it (the caller closes db).
func Serve(ctx context.Context, db *journal.DB, mnt string, o ServeOptions) (s *Served, err error) {
	s = &Served{}
	defer func() {
		if err != nil {
			s.Close(context.WithoutCancel(ctx))
			s = nil
		}
	}()
	branch := o.Branch
	if branch == "" {
		return s, errNoBranch
	}
	if o.At != "" {
		if !o.ReadOnly {
			return s, usagef("--at serves a past state and needs --read-only (to change it, art branch NAME --from REV)")
		}
		st, err := db.Resolve(ctx, o.At, branch)
		if err != nil {
			return s, err
		}
		tmp, err := db.CreateTempBranch(ctx, st)
		if err != nil {
			return s, err
		}
		s.undo = append(s.undo, func() { db.DeleteBranch(context.WithoutCancel(ctx), tmp.Name) })
		branch = tmp.Name
	} else {
		if !o.ReadOnly {
			lock, err := db.LockBranch(ctx, branch)
			if err != nil {
				return s, err
			}
			s.undo = append(s.undo, func() { lock.Release() })
		}
		if o.Workspace != "" {
			st, err := Capture(ctx, db, o.Workspace, branch, "capture lower layer for mount", o.Warn, nil)
			if err != nil {
				return s, err
			}
			s.Capture = &st
		}
	}
	desc := "mount " + mnt
	s.FS, err = overlay.Mount(ctx, mnt, overlay.Options{DB: db, Branch: branch, Lower: o.Workspace,
		ReadOnly: o.ReadOnly, JournalWrites: o.JournalWrites, AllowOther: o.AllowOther, Debug: o.Debug,
		Description: desc, Log: func(line string) {
			if o.Warn != nil {
				fmt.Fprintln(o.Warn, termtext.Text(line))
			}
		}})
	if err != nil {
		return s, err
	}
	return s, nil
}

// Close unmounts (journaling what is still dirty) and releases the lock
// and the temporary branch. If the unmount fails (a process still has a
// file of the mount open) the lock stays held and Close may be called
// again.
//
// A mount that failed (*overlay.FailedError: the store could not keep
// every change) is unmounted all the same: Close releases the rest and
// returns that error.
func (s *Served) Close(ctx context.Context) error {
	var failed error
	if s.FS != nil {
		if err := s.FS.Unmount(ctx); err != nil {
			var fe *overlay.FailedError
			if !errors.As(err, &fe) {
				return err
			}
			failed = err
		}
		s.FS = nil
	}
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
	return failed
}
