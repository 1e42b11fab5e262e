package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/session"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func newMountCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "mount",
		Usage: "serve a branch (or, read-only, any past state) as a FUSE filesystem",
		UsageText: "art mount -d FILE [-m DIR] [--branch B] MOUNTPOINT\n" +
			"   art mount -d FILE --at REV --read-only MOUNTPOINT",
		Description: `Serves the branch's /home/agent tree at MOUNTPOINT in the foreground until SIGINT
or SIGTERM, then unmounts cleanly. Every change is journaled: file contents when a
file is closed or fsynced, everything else as it happens. With -m DIR the host
workspace is captured first (an incremental push), so it appears at
MOUNTPOINT/<basename of DIR>/ and every snapshot is self-contained. A stale mount
left at MOUNTPOINT by a killed art is cleaned first.`,
		Flags: []cli.Flag{
			dbFlag(), durabilityFlag(),
			&cli.StringFlag{Name: "mount", Aliases: []string{"m"}, Usage: "host workspace `DIR` to capture as the lower layer"},
			branchFlag("branch to serve"),
			&cli.StringFlag{Name: "at", Usage: "serve the state at `REV` (requires --read-only)"},
			&cli.BoolFlag{Name: "read-only", Usage: "refuse every change (EROFS)"},
			&cli.BoolFlag{Name: "journal-writes", Usage: "forensic mode: also journal every write request with its range and bytes (slower; see docs/benchmarks.md)"},
			&cli.BoolFlag{Name: "allow-other", Usage: "let other users (the sandbox's uid) use the mount"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request to stderr"},
			// For profiling the daemon (docs/benchmarks.md), not for users.
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the mount's daemon to `FILE` at unmount", Hidden: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("mount takes exactly one MOUNTPOINT")
			}
			if c.IsSet("at") && !c.Bool("read-only") {
				return usagef("--at serves a past state and needs --read-only (to change it, art branch NAME --from REV)")
			}
			if c.IsSet("at") && c.IsSet("mount") {
				return usagef("--at and -m do not combine: a past state already holds its workspace")
			}
			mnt := c.Args().First()
			if p := c.String("cpuprofile"); p != "" {
				stop, err := startCPUProfile(p)
				if err != nil {
					return err
				}
				defer stop()
			}
			db, err := openStore(c, true)
			if err != nil {
				return err
			}
			defer db.Close()
			ctx := c.Context
			srv, err := session.Serve(ctx, db, mnt, session.ServeOptions{Branch: branchName(c.String("branch")), At: c.String("at"),
				Workspace: c.String("mount"), ReadOnly: c.Bool("read-only"), JournalWrites: c.Bool("journal-writes"),
				AllowOther: c.Bool("allow-other"), Debug: c.Bool("debug"), Warn: e.stderr})
			if err != nil {
				return err
			}
			if st := srv.Capture; st != nil {
				fmt.Fprintf(e.stderr, "captured %s: %d new, %d changed, %d deleted files%s\n", termtext.Quote(c.String("mount")), st.New, st.Changed, st.Deleted, conflictNote(*st))
			}
			fsys := srv.FS
			what := "branch " + termtext.Quote(c.String("branch"))
			if c.IsSet("at") {
				what = "state " + termtext.Quote(c.String("at")) + " (read-only)"
			}
			fmt.Fprintf(e.stderr, "serving %s at %s; fast paths: %s\n", what, termtext.Quote(mnt), strings.Join(fsys.FastPaths(), ", "))
			fmt.Fprintln(e.stderr, "press Ctrl-C (or send SIGTERM) to unmount")
			done := make(chan struct{})
			go func() { fsys.Wait(); close(done) }()
			select {
			case <-ctx.Done():
			case <-done: // unmounted from outside (fusermount -u, umount)
			}
			// The signal cancelled ctx; the final journaling must still happen.
			if err := srv.Close(context.WithoutCancel(ctx)); err != nil {
				if errors.Is(err, unix.EBUSY) {
					return fmt.Errorf("%s: %w (a process still uses a file or directory of it; everything closed is journaled, and the next art mount cleans up)", mnt, err)
				}
				return fmt.Errorf("%s: %w", mnt, err)
			}
			fmt.Fprintf(e.stderr, "unmounted %s\n", termtext.Quote(mnt))
			return nil
		},
	}
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeRusage appends the process's own resource usage (every thread of
// art's process, the session's FUSE daemon included; not the sandbox's
// processes) to path as one line: a measurement aid (ART_RUSAGE) for the
// cost of FUSE round trips, whose context switches and scheduler work
// the daemon's threads pay (docs/benchmarks.md, issue 27). Best effort.
func writeRusage(path string) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "user %.3f sys %.3f nvcsw %d nivcsw %d threads %d\n",
		float64(ru.Utime.Nano())/1e9, float64(ru.Stime.Nano())/1e9, ru.Nvcsw, ru.Nivcsw,
		pprof.Lookup("threadcreate").Count())
}
