package overlay

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/fusectl"
	"github.com/artrt/art/internal/fuseuring"
	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/internal/procs"
	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure Mount.
type Options struct {
	DB     *journal.DB
	Branch string // required: the branch to serve (resolved at the edge)
	// Description is recorded with the mount's operation in the log.
	Description string
	// UpperDir holds private copies of open files; it must not be visible
	// to the sandbox. Default: a new directory under os.TempDir().
	UpperDir string
	// AllowOther lets users other than the mounting one use the mount
	// (the sandbox runs as another uid).
	AllowOther bool
	// Lower is the host workspace captured into the branch under
	// /<base name of Lower>/ before mounting. Files still equal to what
	// that import recorded are read from it directly (with FUSE
	// passthrough where the kernel and privileges allow) instead of being
	// copied out of the store.
	Lower string
	// ReadOnly serves the branch without allowing changes (EROFS).
	ReadOnly bool
	// JournalWrites also records every write request - its range and
	// bytes - as it happens (forensic mode). File contents are journaled
	// at close either way; this adds one event and one stored manifest
	// per write request.
	JournalWrites bool
	// KeepCopies bounds the disk space (bytes) of clean private copies
	// kept after the kernel forgets their files, so a later open reuses
	// one instead of copying the file out of the store again (kept.go).
	// 0: 8 GiB, or a quarter of the upper directory's free space at
	// mount if less; negative: keep none.
	KeepCopies int64
	// Debug logs every FUSE request (to Log).
	Debug bool
	// Log receives, a line each, what the mount could not do that no
	// caller hears of: the detail behind an EIO, a failed background
	// write, go-fuse's own complaints. nil: the standard logger. A
	// session must not leave it nil: the standard logger writes to
	// stderr, which may be the terminal the sandboxed program draws on.
	Log func(line string)
	// Op, when set, is the caller's operation (art run's): the mount's
	// changes are journaled under it and Unmount leaves it open for the
	// caller to end. Otherwise Mount begins and Unmount ends a "mount" op.
	Op *journal.Op
	// Owner, when set, is reported as the owner of every file: the
	// sandbox's user owns its home, whoever owned the host files.
	Owner *Owner
	// RecordOwner, when set, is the owner recorded for new files instead
	// of the caller's ids: the host workspace's owner, so a pull writes
	// the agent's files as the user's, not as the sandbox's uid.
	RecordOwner *Owner
	// Quota caps the bytes written through the mount (write requests,
	// fallocate, truncate growth); past it writes fail with ENOSPC and
	// statfs reports the remainder. 0 = no cap.
	Quota int64
	// NameCallers records, the first time a process changes something,
	// an exec event naming it (argv, cwd from /proc), so every change
	// can be attributed to a command (art blame) even when untraced.
	// Every event carries its caller's pid either way.
	NameCallers bool
	// CommitCloses makes every close commit the journal's transaction, as
	// before the redo log: by default a close appends the transaction's
	// new rows to the batch's redo log instead (journal.Batch.LogCloses),
	// and the transaction commits within milliseconds. For measuring.
	CommitCloses bool
	// Prime lists the tree once from the daemon right after the mount,
	// so that the kernel's dentry and attribute caches hold it before the
	// agent looks (prime.go).
	Prime bool
}

// Owner is a uid and gid.
type Owner struct{ UID, GID uint32 }

// FS is a mounted branch.
type FS struct {
	db            *journal.DB
	op            *journal.Op
	batch         *journal.Batch
	behind        *behind // unlinks written behind (behind.go); nil when read-only
	server        *fuse.Server
	rings         *fuseuring.Rings // requests over io_uring (uring.go), nil when served through /dev/fuse alone
	served        chan struct{}    // closed when the serve loop has ended: the kernel let go of the mount
	mountpoint    string
	mountID       uint64        // the kernel's id of our mount at mountpoint (0: unknown)
	conn          string        // the FUSE connection's name in the control file system (unmount.go)
	ctl           *fusectl.Conn // the connection's control files: opened by Mount (nil: they could not be), taken by Unmount
	aborted       atomic.Bool   // Unmount aborted the connection (unmount.go)
	upperDir      string
	releaseUpper  func() // removes the upper dir Mount made (nil: the caller's)
	statDir       string
	readOnly      bool
	journalWrites bool
	nameCallers   bool
	callers       sync.Map // pids already named (NameCallers)
	lower         string   // host workspace, "" for none
	lowerPfx      string   // its path in the store, "ws/"

	owner       *Owner
	recordOwner *Owner
	quota       atomic.Int64 // bytes writable through the mount; 0 = no cap
	used        atomic.Int64 // bytes written, against quota
	tailBytes   atomic.Int64 // buffer bytes of all nodes' tails (tail.go), at most tailBudget
	ownOp       bool         // Mount began the op; Unmount ends it

	changed atomic.Bool   // some transaction appended events
	gen     atomic.Uint64 // bumped by a change whose listing entries are unknown; voids every listing (listing.go)
	// dirsGone counts directory nodes dropped from nodes (the kernel
	// forgot them): a listing's directory rows hold only while it has
	// not moved since the listing was read (listing.go).
	dirsGone atomic.Uint64
	// dirMoves counts renames (statfid.go dirRecords.noneBelow).
	dirMoves atomic.Uint64
	snapIDs  atomic.Uint64 // numbers listings served to READDIR (readdir.go)
	stats    struct {
		lowerOpens, ptOpens, copies, reuses, readdirs, unlinksBehind atomic.Int64
		storeReads, lookups, getattrs, lookupQueries, lowerChecks    atomic.Int64
		listQueries, recordQueries, aheadQueries                     atomic.Int64
		streamed, streamStarts, streamBytes, streamReleased          atomic.Int64
	}
	streams  streams    // files being stored while written (stream.go)
	kept     keptCopies // clean private copies of forgotten files (kept.go)
	failures failures   // what a failed mount did not keep or refused (failed.go)

	ptOK atomic.Bool // the kernel takes backing files from upperDir (passthrough.go); false until probed

	log        func(string) // Options.Log, never nil
	counts     *opCounter   // ART_FUSE_COUNTS (opcount.go), else nil
	countsStop func()       // ends counts' SIGUSR1 dumps

	prime   *primer // the walk priming the kernel's caches (prime.go), nil without one
	refresh refresh // what it stats again in the agent's idle time (prime.go)

	recTreeOnce sync.Once
	recTree     *recordTree // the lower workspace's import records (statfid.go), nil: read per directory
	// others counts requests other than the priming walk's (LOOKUP,
	// GETATTR, OPEN, listings, and every request that changes the tree):
	// the walk waits for a quiet mount.
	others atomic.Int64
	// primeTid is the walk's thread (its requests carry it), 0 without one.
	primeTid atomic.Int32

	watchStop chan struct{} // closed by Unmount: the mapped-node watcher ends
	watchWG   sync.WaitGroup

	mu           sync.Mutex
	nodes        map[int64]*node    // live nodes by art inode, for journaling at unmount
	touched      map[*node]struct{} // directories whose entries changed (mtime to journal)
	mappedNodes  map[*node]struct{} // written through mappings the daemon cannot see (passthrough.go)
	watching     bool               // the watcher runs
	watchStopped bool
	// dirMTimes holds the mtimes of forgotten directories until they are
	// journaled (node.OnForget), for a node rebuilt meanwhile.
	dirMTimes map[int64]int64
	// claims maps each host inode number a live node reports to that
	// node's art inode number (statfid.go).
	claims map[uint64]int64
}

// Mount serves opts.Branch at mountpoint until Unmount.
func Mount(ctx context.Context, mountpoint string, opts Options) (*FS, error) {
	if opts.Branch == "" {
		// Resolved once at the edge (the CLI's flags, a request) and passed down.
		return nil, fmt.Errorf("mount %s: no branch given", mountpoint)
	}
	if opts.Description == "" {
		opts.Description = "mount " + mountpoint
	}
	if err := CleanStale(mountpoint); err != nil {
		return nil, err
	}
	f := &FS{db: opts.DB, nodes: map[int64]*node{}, touched: map[*node]struct{}{}, dirMTimes: map[int64]int64{}, claims: map[uint64]int64{}, mappedNodes: map[*node]struct{}{}, watchStop: make(chan struct{}), upperDir: opts.UpperDir, statDir: filepath.Dir(opts.DB.Path()), readOnly: opts.ReadOnly,
		journalWrites: opts.JournalWrites, owner: opts.Owner, recordOwner: opts.RecordOwner, nameCallers: opts.NameCallers}
	f.quota.Store(opts.Quota)
	f.log = opts.Log
	if f.log == nil {
		f.log = func(line string) { log.Print(line) }
	}
	if opts.Lower != "" {
		abs, err := filepath.Abs(opts.Lower)
		if err != nil {
			return nil, err
		}
		f.lower, f.lowerPfx = abs, filepath.Base(abs)+"/"
	}
	if f.upperDir == "" {
		CleanStaleUppers("") // best effort: what killed mounts left
		d, release, err := MakeUpperDir("")
		if err != nil {
			return nil, err
		}
		f.upperDir, f.releaseUpper = d, release
	}
	f.kept.max = keptMax(opts.KeepCopies, f.upperDir)
	op := opts.Op
	if op == nil {
		var err error
		if op, err = opts.DB.BeginOp(ctx, opts.Branch, "mount", opts.Description); err != nil {
			f.cleanup()
			return nil, err
		}
		f.ownOp = true
	}
	f.op = op
	// Group commit: namespace and metadata changes share a transaction
	// that commits within a few milliseconds, and always before an fsync
	// or unmount returns; a close is made durable by a redo record (or,
	// with CommitCloses, a commit). 25 ms instead of 5 was 3% of an npm
	// ci with closes logged, but another session of the store (a
	// parallel attempt) would wait up to that for every write it begins.
	f.batch = op.NewBatch(5*time.Millisecond, 1000)
	if !opts.CommitCloses {
		f.batch.LogCloses()
	}
	if !f.readOnly {
		f.behind = newBehind(f)
	}
	var jn journal.Node
	if err := f.tx(ctx, func(tx *journal.Tx) error {
		var err error
		jn, err = tx.Get(journal.RootIno)
		return err
	}); err != nil {
		f.end(ctx)
		return nil, err
	}
	root := f.newNode(jn)
	f.nodes[jn.Ino] = root // so link-count refreshes reach it like any node
	logger := log.New(lineWriter(f.fuseLog), "art fuse: ", 0)
	if f.counts = newOpCounter(); f.counts != nil {
		f.counts.queries = f.queryCounts
		f.countsStop = f.counts.onSignal()
		opts.Debug = true
		logger = log.New(lineWriter(f.counts.line), "", 0)
	}
	fsOpts := fuseOptions(opts, logger)
	raw := &rawFS{RawFileSystem: &inoFS{RawFileSystem: fs.NewNodeFS(root, fsOpts), f: f}, f: f}
	readers := fuseReaders()
	var server *fuse.Server
	var rings *fuseuring.Rings
	var err error
	if uringWanted() {
		server, rings, err = serveURing(raw, mountpoint, fsOpts.MountOptions, f.logf)
		if err != nil {
			f.logf("%s: requests over io_uring: %v; served through /dev/fuse", mountpoint, err)
			server, rings = nil, nil
		}
	}
	if server == nil {
		server, err = fuse.NewServer(raw, mountpoint, &fsOpts.MountOptions)
		if err == nil {
			go server.Serve()
			err = server.WaitMount() // on failure the serve loop ends with the device
		}
	}
	if err != nil {
		if f.countsStop != nil {
			f.countsStop()
		}
		f.end(ctx)
		if reason := fuseUnavailable(); reason != "" {
			return nil, fmt.Errorf("mount %s: %w (%s)", mountpoint, ErrNoFUSE, reason)
		}
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	f.server = server
	// Absolute, as go-fuse mounted it: the unmount must name the same
	// directory whatever the working directory is then.
	f.mountpoint = mountpoint
	if abs, err := filepath.Abs(mountpoint); err == nil {
		f.mountpoint = abs
	}
	f.mountID, f.conn = fusectl.MountID(f.mountpoint)
	if f.mountID != 0 {
		// The control files of the connection, opened while the mount
		// is certainly ours (its number cannot have been reused): now,
		// beside the sandbox's start, rather than on the unmount's path.
		f.ctl = fusectl.Open(f.conn)
	}
	f.served = make(chan struct{})
	// Ps for the readers blocked in read(2) on /dev/fuse, so that one
	// stays idle and Go's sysmon does not take a P back from a blocked
	// reader at nearly every request (internal/procs; measured in
	// docs/benchmarks.md, "The FUSE round trip"). Given back when the
	// readers are gone.
	releaseProcs := procs.Reserve(readers)
	f.rings = rings
	go func() {
		server.Wait()
		if rings != nil {
			if err := rings.Wait(); err != nil {
				f.logf("%v", err)
			}
		}
		releaseProcs()
		close(f.served)
	}()
	f.ptOK.Store(f.probePassthrough())
	if opts.Prime {
		f.startPrime()
	}
	return f, nil
}

// fuseReaders is how many goroutines go-fuse 2.12.1 may keep blocked
// in read(2) on the mount's /dev/fuse at once: its maxReaders, GOMAXPROCS
// at NewServer clamped to [2, 16], plus one (a reader starts another
// when it takes a request and none is left, up to one over the bound).
// Not exported by go-fuse: kept in step with fuse/server.go by hand.
func fuseReaders() int {
	return min(max(runtime.GOMAXPROCS(0), 2), 16) + 1
}

// fuseOptions is how the mount is served: go-fuse's options and the
// kernel's, each with the reason it is set.
func fuseOptions(opts Options, logger *log.Logger) *fs.Options {
	long := time.Hour // art is the only writer of its upper: the kernel's caches stay true
	negative := time.Hour
	return &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        "art",
			Name:          "art",
			AllowOther:    opts.AllowOther,
			MaxWrite:      1 << 20,
			MaxBackground: 64,
			// No EnableLocks: without FUSE's lock capabilities the kernel
			// keeps POSIX and flock locks itself, with exact per-process
			// semantics - right here, since every user of the mount is on
			// this machine. (Forwarded, they landed on per-open upper fds
			// as OFD locks, so two fds of one process conflicted.)
			DirectMount: true,
			// As root, mount and unmount with the syscalls only: the
			// fusermount fallback hides EBUSY behind "not found".
			DirectMountStrict: os.Geteuid() == 0,
			Debug:             opts.Debug,
			// go-fuse's own messages go where the mount's do.
			Logger: logger,
			// The kernel checks permissions against the modes we report.
			Options: mountOptions(opts.ReadOnly),
			// With HANDLE_KILLPRIV_V2 the kernel stops asking for
			// security.capability before every write (measured 10x on
			// 4 KiB writes); art clears setuid/setgid itself (node.changed).
			// With ATOMIC_O_TRUNC an open with O_TRUNC arrives as such
			// (open handles it): without it the kernel opened the file
			// plain - a big file's whole content copied out for a
			// passthrough writer - and truncated it after.
			ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_ATOMIC_O_TRUNC,
		},
		EntryTimeout:    &long,
		AttrTimeout:     &long,
		NegativeTimeout: &negative,
		RootStableAttr:  &fs.StableAttr{Ino: uint64(journal.RootIno)},
		NullPermissions: true,
		// Node ids are art inode numbers (never reused), so requests the
		// bridge does not serve find their node (readdir.go).
		ExternalNodeID: true,
	}
}

// lineWriter is a log.Logger's output as calls of fn, one per line.
type lineWriter func(string)

func (w lineWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w(l)
	}
	return len(p), nil
}

func mountOptions(ro bool) []string {
	o := []string{"default_permissions"}
	if ro {
		o = append(o, "ro")
	}
	return o
}

// CleanStale detaches a FUSE mount left at mountpoint by a daemon that
// died (its accesses fail with ENOTCONN), so a new mount can take its place.
func CleanStale(mountpoint string) error {
	// statfs, not stat: the kernel answers stat of the root from its
	// attribute cache (an hour here) without asking the dead daemon.
	var st unix.Statfs_t
	err := unix.Statfs(mountpoint, &st)
	if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		return nil
	}
	if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("clean stale mount at %s: %w", mountpoint, err)
	}
	return nil
}

// Stats counts how file opens were served.
type Stats struct {
	LowerOpens int64 // read-only opens served from the host file
	PtOpens    int64 // opens served by passthrough to a private copy
	Copies     int64 // files copied out of the store into a private copy
	// Reuses counts private copies taken over from the kept copies of
	// forgotten files instead of copied out (kept.go); Kept and
	// KeptBytes are what is kept now (bytes on disk).
	Reuses    int64
	Kept      int
	KeptBytes int64
	Readdirs  int64 // READDIR requests: listings the kernel had not cached
	// Lookups and GetAttrs count the kernel's LOOKUPs and GETATTRs (names
	// and attributes it had not cached) but the priming walk's (prime.go).
	Lookups, GetAttrs int64
	// LookupQueries counts lookups answered by a query of their own,
	// not from a directory's listing (node.go Lookup).
	LookupQueries int64
	// ListQueries counts directory listings read from the journal
	// (node.go listUpTo), RecordQueries reads of a directory's import
	// records (statfid.go records).
	ListQueries, RecordQueries int64
	// AheadQueries counts those of ListQueries that listed a directory's
	// subdirectories at once (node.go listAhead).
	AheadQueries int64
	// StoreReads counts reads served straight from the store, without a
	// private copy (file.go readStore).
	StoreReads int64
	// LowerChecks counts queries of a file's import record at a read-only
	// open (file.go openLowerLocked): at most one per file and path, none
	// for a file from the branch (its parent's records have it).
	LowerChecks int64
	// UnlinksBehind counts unlinks answered before the journal had them
	// (behind.go).
	UnlinksBehind int64
	// StreamStarts counts files that began to be stored while written
	// (stream.go); Streamed those whose journaling used the stream, and
	// StreamedBytes the bytes it had stored ahead of their journaling.
	// StreamReleased counts bytes of private copies a stream sent to disk
	// and dropped from the page cache behind itself (stream.go).
	StreamStarts, Streamed, StreamedBytes, StreamReleased int64
	// Commits counts the journal's commits, CloseRecords the closes made
	// durable by a record in the redo log instead (journal.Batch.Persist).
	Commits, CloseRecords int64
}

// queryCounts is the daemon's metadata queries so far, for
// ART_FUSE_COUNTS (opcount.go).
func (f *FS) queryCounts() string {
	s := fmt.Sprintf("queries: lookups %d, listings %d (of them %d of a directory's subdirectories at once), records %d; commits %d",
		f.stats.lookupQueries.Load(), f.stats.listQueries.Load(), f.stats.aheadQueries.Load(), f.stats.recordQueries.Load(), f.batch.Commits())
	if p := f.prime; p != nil {
		p.mu.Lock()
		s += fmt.Sprintf("\nprime: %d entries in %d directories listed in %v; then %d stats in %d refresh rounds", p.listed, p.dirs, p.took.Round(time.Millisecond), p.stated, p.rounds)
		p.mu.Unlock()
	}
	return s
}

// Stats reports counters since the mount.
func (f *FS) Stats() Stats {
	kept, keptBytes := f.kept.usage()
	return Stats{LowerOpens: f.stats.lowerOpens.Load(), PtOpens: f.stats.ptOpens.Load(), Copies: f.stats.copies.Load(),
		Reuses: f.stats.reuses.Load(), Kept: kept, KeptBytes: keptBytes,
		Readdirs: f.stats.readdirs.Load(), Lookups: f.stats.lookups.Load(), GetAttrs: f.stats.getattrs.Load(), LookupQueries: f.stats.lookupQueries.Load(),
		ListQueries: f.stats.listQueries.Load(), RecordQueries: f.stats.recordQueries.Load(), AheadQueries: f.stats.aheadQueries.Load(), StoreReads: f.stats.storeReads.Load(), LowerChecks: f.stats.lowerChecks.Load(), UnlinksBehind: f.stats.unlinksBehind.Load(),
		StreamStarts: f.stats.streamStarts.Load(), Streamed: f.stats.streamed.Load(), StreamedBytes: f.stats.streamBytes.Load(), StreamReleased: f.stats.streamReleased.Load(),
		Commits: f.batch.Commits(), CloseRecords: f.batch.Logged()}
}

// FastPaths describes the performance features in force on this mount.
func (f *FS) FastPaths() []string {
	in := f.server.KernelSettings()
	flags := in.Flags64()
	var out []string
	out = append(out, "max_write=1MiB", "max_background=64", "entry/attr timeout=1h", "negative entries cached",
		"directory listings cached by the kernel (cache_dir)", "small new files in memory until close",
		"small writes gathered (1 MiB per file) before the private copy",
		"reads of files held only in the store from the chunks they touch (no copy-out up to 8 MiB read)")
	if flags&fuse.CAP_NO_OPENDIR_SUPPORT != 0 {
		out = append(out, "directories opened by the kernel (no_opendir)")
	}
	if f.behind != nil {
		out = append(out, "unlinks journaled behind")
	}
	if f.rings != nil && !f.rings.Refused() {
		out = append(out, "requests over io_uring (a queue per CPU)")
	}
	for _, c := range []struct {
		flag uint64
		name string
	}{
		{fuse.CAP_HANDLE_KILLPRIV_V2, "handle_killpriv_v2"},
		{fuse.CAP_ATOMIC_O_TRUNC, "atomic_o_trunc"},
		{fuse.CAP_PARALLEL_DIROPS, "parallel_dirops"},
		{fuse.CAP_READDIRPLUS, "readdirplus"},
		{fuse.CAP_ASYNC_READ, "async_read"},
	} {
		if flags&c.flag != 0 {
			out = append(out, c.name)
		}
	}
	if f.journalWrites {
		out = append(out, "forensic mode: every write request journaled (slower)")
	}
	if f.lower != "" {
		out = append(out, "lower-layer reads from the host file (FUSE passthrough when the kernel accepts it)")
	}
	if !f.journalWrites && f.quota.Load() == 0 {
		out = append(out, "reads and writes of private copies by FUSE passthrough (when the kernel accepts it)")
	}
	return out
}

// Wait blocks until the filesystem is unmounted.
func (f *FS) Wait() { f.server.Wait() }

// Unmount detaches the filesystem, journals any file still dirty and ends
// the mount's operation. Safe to call twice. It returns once the kernel
// has let go of the file system and every request it sent is done, in
// bounded time even when another mount namespace holds a copy of the
// mount (unmount.go).
func (f *FS) Unmount(ctx context.Context) error {
	var err error
	f.stopPrime() // its open directory would make the unmount fail
	if f.server != nil {
		// The control files of the connection: Mount's, or - after an
		// unmount that failed and closed them - opened again while the
		// mount is certainly ours (its number cannot have been reused):
		// the mount is still where Mount put it.
		ctl := f.ctl
		f.ctl = nil
		if ctl == nil {
			if id, _ := fusectl.MountID(f.mountpoint); id != 0 && id == f.mountID {
				ctl = fusectl.Open(f.conn)
			}
		}
		endDetach := phase.Start("unmount: detach, requests done")
		detached := false
		for i, delay := 0, 5*time.Millisecond; i < 50; i++ {
			if err = detach(f.mountpoint); err == nil {
				detached = true
				break
			}
			select {
			case <-f.served:
				// Unmounted from outside (fusermount -u, umount): the
				// kernel has let go, nothing can reach the mount any
				// more, and what is dirty is journaled below as after
				// our own unmount.
				err = nil
			default:
			}
			if err == nil {
				break
			}
			time.Sleep(delay)
			delay = min(2*delay, 200*time.Millisecond)
		}
		if err != nil {
			if ctl != nil {
				ctl.Close()
			}
			// Still in use: leave everything as it is (mounted, op open)
			// so the caller can retry, rather than journal behind a live
			// mount.
			return fmt.Errorf("unmount: %w", err)
		}
		if detached {
			f.awaitServed(ctl)
		}
		endDetach()
		if ctl != nil {
			ctl.Close()
		}
		f.server = nil
		if f.counts != nil {
			f.countsStop()
			f.counts.write()
		}
	}
	f.stopWatch()
	if f.behind != nil {
		if berr := f.behind.close(); err == nil {
			err = berr
		}
	}
	if jerr := f.journalAll(ctx); err == nil {
		err = jerr
	}
	if err != nil {
		// Something the sandbox changed is not in the store: the mount
		// failed (failed.go), whatever failed first.
		f.fail(err)
	}
	if f.changed.Load() && f.op != nil && f.ownOp && f.failure() == nil { // a caller's op snapshots itself
		// The session's end state is a snapshot, so art log shows it and
		// main~1 is the state before it.
		serr := f.batch.Update(ctx, func(tx *journal.Tx) error {
			_, err := tx.Snapshot(f.op.Description)
			return err
		})
		if err == nil {
			err = serr
		}
	}
	if f.batch != nil {
		if cerr := f.batch.Close(); err == nil {
			err = cerr
		}
	}
	if eerr := f.end(ctx); err == nil {
		err = eerr
	}
	if ferr := f.failedError(); ferr != nil {
		return ferr
	}
	return err
}

func (f *FS) end(ctx context.Context) error {
	f.haltStreams()
	var err error
	if f.behind != nil {
		err = f.behind.close()
	}
	if f.op != nil && f.ownOp {
		var eerr error
		if fe, ok := f.failedError().(*FailedError); ok {
			eerr = f.endFailed(ctx, fe)
		} else {
			eerr = f.op.End(ctx, nil)
		}
		if err == nil {
			err = eerr
		}
	}
	f.op = nil
	f.cleanup()
	return err
}

// endFailed ends the mount's own op after the mount failed (failed.go):
// the pack a failed write left is abandoned (the mount was the store's
// writer in this process, and its streams and batch are done), and the
// op's end event says why it failed (journal.FailedPrefix).
func (f *FS) endFailed(ctx context.Context, fe *FailedError) error {
	_, aerr := f.db.AbandonFailedPack()
	err := f.op.Update(ctx, func(tx *journal.Tx) error {
		return tx.Record(journal.Event{Kind: journal.EvEnd, Text: journal.FailedPrefix + fe.Reason()})
	})
	if err == nil {
		err = f.op.End(ctx, nil)
	}
	if err != nil {
		return errors.Join(aerr, err)
	}
	return nil
}

func (f *FS) cleanup() {
	f.kept.clear() // also from a caller's upper directory
	if f.releaseUpper != nil {
		f.releaseUpper()
		f.releaseUpper = nil
	}
}

// journalAll journals every dirty file and the mtimes of directories
// whose entries changed (at unmount). Directory mtimes are recorded once
// here rather than as an extra event on every create and unlink.
func (f *FS) journalAll(ctx context.Context) error {
	f.mu.Lock()
	nodes := make([]*node, 0, len(f.nodes))
	for _, n := range f.nodes {
		nodes = append(nodes, n)
	}
	dirs := make([]*node, 0, len(f.touched))
	for d := range f.touched {
		dirs = append(dirs, d)
	}
	clear(f.touched)
	f.mu.Unlock()
	var errs []error
	endFiles := phase.Start("journal: dirty files")
	for _, n := range nodes {
		if n.ptUnseen() {
			n.dirty.Store(true) // written by passthrough or a mapping, unseen
		}
		dirty := n.dirty.Load()
		if err := n.journal(ctx, false); err != nil {
			errs = append(errs, err)
			if dirty {
				f.notKept(n.nodePath())
			}
		}
	}
	endFiles()
	endDirs := phase.Start("journal: directory mtimes")
	for _, d := range dirs {
		if err := d.journalMTime(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	endDirs()
	return errors.Join(errs...)
}

// live returns the node for ino if the kernel still holds it, else nil.
func (f *FS) live(ino int64) *node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[ino]
}

// tx runs fn in one journal transaction of the mount's operation. On a
// read-only mount a transaction that would append an event fails with
// EROFS and changes nothing (the kernel's "ro" refuses most earlier).
//
// Events are attributed to the request's caller pid.
func (f *FS) tx(ctx context.Context, fn func(*journal.Tx) error) error {
	if err := f.caughtUp(); err != nil && f.failure() == nil {
		return err
	} // failed: the batch still reads (failed.go)
	pid := callerPid(ctx)
	appended := false
	defer func() {
		if appended {
			f.noteCaller(ctx, pid)
		}
	}()
	return f.batch.Update(ctx, func(tx *journal.Tx) error {
		tx.SetPID(pid)
		defer tx.SetPID(0) // the Tx is shared with later updates
		before := tx.Appended()
		if err := fn(tx); err != nil {
			return err
		}
		appended = tx.Appended() > before
		if tx.Appended() > 0 {
			if f.readOnly {
				return syscall.EROFS
			}
			f.changed.Store(true)
		}
		return nil
	})
}

// caughtUp waits until every unlink answered so far is in the batch
// (behind.go): the first step of every other journal access.
func (f *FS) caughtUp() error {
	if f.behind == nil {
		return nil
	}
	return f.behind.wait()
}

// commit commits every change made so far.
func (f *FS) commit() error {
	if err := f.caughtUp(); err != nil {
		return err
	}
	return f.batch.Commit()
}

// persist makes every change made so far survive a crash of this process:
// a record in the batch's redo log, or a commit (journal.Batch.Persist).
// What a close needs; an fsync needs sync.
func (f *FS) persist() error {
	if err := f.caughtUp(); err != nil {
		return err
	}
	return f.batch.Persist()
}

// sync commits every change made so far and makes it durable. A failed
// fsync of the store fails the mount (failed.go): what it was to make
// durable may be gone.
func (f *FS) sync() error {
	if err := f.commit(); err != nil {
		return err
	}
	if err := f.db.Sync(); err != nil {
		f.fail(err)
		return err
	}
	return nil
}

// emptyManifest stores the empty file's manifest inside tx and returns its
// id. It is stored by every create that needs it (an INSERT OR IGNORE of a
// few bytes), never cached: a cache filled inside an update that then
// rolled back would name a row that is gone, and every later empty file
// would name a missing manifest.
func (f *FS) emptyManifest(tx *journal.Tx, ctx context.Context) (cas.ID, error) {
	id, _, err := tx.Objects().PutManifest(ctx, &cas.Manifest{})
	return id, err
}

// newUpper creates a fresh private file for content.
func (f *FS) newUpper() (*os.File, error) {
	return os.CreateTemp(f.upperDir, "u-")
}

// statfs reports the space of the filesystem that holds the store.
func (f *FS) statfs(out *fuse.StatfsOut) syscall.Errno {
	var st unix.Statfs_t
	if err := unix.Statfs(f.statDir, &st); err != nil {
		return f.errno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = st.Blocks, st.Bfree, st.Bavail
	out.Files, out.Ffree = st.Files, st.Ffree
	out.Bsize, out.Frsize = uint32(st.Bsize), uint32(st.Frsize)
	if quota := f.quota.Load(); quota > 0 && st.Frsize > 0 {
		// The quota is the filesystem's size, what is left of it the free
		// space (never more than the disk really has).
		bs := uint64(st.Frsize)
		left := max(quota-f.used.Load(), 0)
		out.Blocks = uint64(quota) / bs
		out.Bfree = min(out.Bfree, uint64(left)/bs)
		out.Bavail = min(out.Bavail, uint64(left)/bs)
	}
	out.NameLen = 255
	return 0
}

// reserve counts n more bytes written against the quota and returns how
// many of them fit (all, without a quota).
func (f *FS) reserve(n int64) int64 {
	quota := f.quota.Load()
	if quota == 0 || n <= 0 {
		return n
	}
	for {
		used := f.used.Load()
		fit := min(n, max(quota-used, 0))
		if fit == 0 || f.used.CompareAndSwap(used, used+fit) {
			return fit
		}
	}
}

// Used is the number of bytes written through the mount (counted only
// with a quota).
func (f *FS) Used() int64 { return f.used.Load() }

// SetOp journals every later change under op (nil: the mount's own op
// again), after committing what is pending. Call it between sessions of
// a long-lived mount (art exec --jsonl: one op per request), when no file
// of the previous session is open: a file still open is journaled at its
// close, under whichever op is current then.
func (f *FS) SetOp(op *journal.Op) error {
	if op == nil {
		op = f.op
	}
	if err := f.caughtUp(); err != nil {
		return err
	}
	return f.batch.SetOp(op)
}

// Flush journals every file still dirty (content written through a
// mapping, say, after its last close) and commits every change made so
// far: a snapshot taken after it sees them all.
func (f *FS) Flush(ctx context.Context) error {
	if err := f.journalAll(ctx); err != nil {
		return err
	}
	return f.commit()
}

// SetQuota starts counting bytes written afresh against a new quota (0:
// none), for a long-lived mount that serves requests with limits of
// their own.
func (f *FS) SetQuota(n int64) {
	f.used.Store(0)
	f.quota.Store(n)
}
