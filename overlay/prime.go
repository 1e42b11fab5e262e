package overlay

import (
	"context"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/artrt/art/internal/dirent"
	"github.com/artrt/art/journal"
)

// Priming the kernel's caches.
//
// A fresh mount knows nothing of the tree: the first `git status` of a
// session looks each of a repository's 15,000 files up, one round trip
// each, where the second answers from the kernel's dentry and attribute
// caches. A listing the kernel asks for with READDIRPLUS fills those
// caches for a whole directory in one round trip (entries and attributes,
// art answers it from its in-memory listing). So once the mount is up the
// daemon lists the tree, depth first in name order (git's index order),
// until primeMax entries: what the agent then stats, opens or lists under
// a listed directory costs no LOOKUP.
//
// A READDIRPLUS is no cheap round trip: each entry it returns makes an
// inode in the kernel and a node in the daemon, about as much work as the
// LOOKUP it saves (a cold `find` over 33,000 entries costs 0.7-0.8 s
// either way). What priming saves is the agent's time, not work, so the
// walk runs while the agent does nothing with the mount: before each
// directory it waits until no other request has come for primeQuiet (an
// agent's first command usually comes seconds after the start, a model's
// turn). A command that starts at once and keeps the mount busy (a build,
// `npm ci`) runs as if there were no walk.
//
// The walk is read-only (a listing journals nothing) and runs on one
// thread of its own at a lower priority, one request at a time, so it
// never holds more than one of the mount's request threads. Doing it from
// the daemon's own process is safe: getdents copies into an ordinary
// buffer (no page of the mount is mapped, which is what can deadlock a
// FUSE server against its own garbage collector), and a thread blocked in
// a system call does not hold up the collector. Directories are opened
// with openat2 beneath the mount's root, never through a symbolic link
// and never into another mount, whatever the agent renamed meanwhile.
// Unmount stops the walk and waits for it: an open directory would make
// the unmount fail.
//
// Keeping the caches primed. The kernel drops an inode's attributes from
// its cache at reads of a writable FUSE mount's file (those it sends the
// daemon, and passthrough reads whose backing file's atime is not the one
// art reports), at every listing of a directory, even one it serves from
// its own cache (fs/fuse: fuse_invalidate_atime), and at writes: the
// agent's next stat of it asks again. `git grep` reads every file of a
// repository, so the `git status` after it costs a GETATTR per file
// (15,000 round trips, 160-200 ms against 50 natively); `find` lists
// every directory, so the `du` after it costs one per directory. Once the
// walk is done its thread stays: it waits for the agent to use the mount,
// then for the mount to be quiet again (refreshQuiet), and then stats, in
// path order, every file opened or created since its last round (the
// daemon sees each open, not the reads a passthrough open serves) and
// every directory the kernel holds (it cannot tell which listings the
// kernel served from its cache), primeMax at most. A stat the kernel
// answers from its cache costs no request; the others cost the GETATTR
// the agent's next stat would have cost, in the agent's idle time. Each
// stat goes through a directory opened with openat2 as the walk's are,
// and fstatat never follows the name's link.

// primeMax bounds the entries the walk lists. Each costs memory the
// agent's own lookup of it would cost too: about 1 KB in the kernel
// (inode and dentry, reclaimable) and 1.7 KB in the daemon (a live node;
// measured: 33,350 entries of Go's repository, peak RSS 63 -> 119 MB).
// 50,000 covers the repositories and node_modules trees agents work in.
const primeMax = 50_000

// primeNice is the walk's thread's nice value: behind the agent's work.
const primeNice = 10

// primeQuiet is how long the mount must have served no other request
// before the walk lists its next directory.
const primeQuiet = 20 * time.Millisecond

// refreshQuiet is how long the mount must have served no other request
// before a refresh round (and before each of its stats, once another
// came): longer than the
// walk's, so that a round waits for a command's end rather than a pause in
// it (a compile between two of a build's file operations).
const refreshQuiet = 500 * time.Millisecond

// refreshRest bounds the rest after a refresh round (nine times the
// round's work): the next round may wait that long.
const refreshRest = 500 * time.Millisecond

// primer is a running walk.
type primer struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	walked chan struct{} // closed when the walk ends (its refresh rounds follow)
	mu     sync.Mutex
	// listed and dirs count what the walk listed, took how long (tests
	// and ART_FUSE_COUNTS), set when it ends; rounds and stated count the
	// refresh rounds since and the stats they made.
	listed, dirs   int
	took           time.Duration
	rounds, stated int
}

// refresh is what the priming walk stats again in the agent's idle time:
// the files opened or created since its last round (by art inode), at
// most primeMax.
type refresh struct {
	on     atomic.Bool // the mount primes: opens are noted
	mu     sync.Mutex
	opened map[int64]struct{}
	// idle is set while the walk's thread waits for the agent; the first
	// request after it sends on kick.
	idle atomic.Bool
	kick chan struct{} // capacity 1
}

// noteOpen notes a file the agent opened (or created), whose attributes
// its reads or writes will drop from the kernel's cache.
func (f *FS) noteOpen(ino uint64) {
	r := &f.refresh
	if !r.on.Load() {
		return
	}
	r.mu.Lock()
	if len(r.opened) < primeMax {
		r.opened[int64(ino)] = struct{}{}
	}
	r.mu.Unlock()
	// Counted again once noted: a round that drained the set before
	// this open was noted is followed by another.
	f.noteAsked()
}

// noteAsked counts a request of the agent's (not the walk's) for the
// walk's quiet rule, and wakes the walk's thread if it waits for one.
func (f *FS) noteAsked() {
	f.others.Add(1)
	if r := &f.refresh; r.idle.Load() && r.idle.CompareAndSwap(true, false) {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// startPrime starts the walk of f's mount.
func (f *FS) startPrime() {
	ctx, cancel := context.WithCancel(context.Background())
	p := &primer{cancel: cancel, walked: make(chan struct{})}
	f.refresh.opened = map[int64]struct{}{}
	f.refresh.kick = make(chan struct{}, 1)
	f.refresh.on.Store(true)
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		// The thread ends with the goroutine (locked, never unlocked):
		// its priority is not handed on to other goroutines.
		runtime.LockOSThread()
		tid := unix.Gettid()
		unix.Setpriority(unix.PRIO_PROCESS, tid, primeNice)
		f.primeTid.Store(int32(tid)) // the kernel tags a request with its thread
		start := time.Now()
		seen := int64(-1) // the first directory too waits for a quiet mount
		listed, dirs := primeWalk(ctx, f.mountpoint, primeMax, func() bool { return f.quiet(ctx, &seen, primeQuiet) })
		p.mu.Lock()
		p.listed, p.dirs, p.took = listed, dirs, time.Since(start)
		p.mu.Unlock()
		close(p.walked)
		var waited time.Duration // in idle, during a round
		idle := func() bool {
			began := time.Now()
			defer func() { waited += time.Since(began) }()
			return f.quiet(ctx, &seen, refreshQuiet)
		}
		for f.awaitAgent(ctx, seen) && idle() {
			// What the agent asks during the round (it waits in idle
			// meanwhile) may drop what the round already stated: any
			// request since start makes another round.
			start, began := seen, time.Now()
			waited = 0
			n := f.refreshRound(ctx, idle)
			work := time.Since(began) - waited
			seen = start
			p.mu.Lock()
			p.rounds++
			p.stated += n
			p.mu.Unlock()
			// A program that touches the mount every so often (a
			// poller, a server) would start a round each time: a round
			// rests nine times its work (a tenth of the thread's time),
			// at most refreshRest.
			t := time.NewTimer(min(9*work, refreshRest))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	f.prime = p
}

// awaitAgent waits until the agent sends the mount a request (at once if
// the count of its requests moved from seen); false once ctx ends.
func (f *FS) awaitAgent(ctx context.Context, seen int64) bool {
	r := &f.refresh
	r.idle.Store(true)
	if f.others.Load() != seen { // asked meanwhile (noteAsked may have kicked too)
		r.idle.Store(false)
		select {
		case <-r.kick:
		default:
		}
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-r.kick:
		r.idle.Store(false) // a kick left from an earlier wait finds it true
		return true
	}
}

// refreshRound stats every file opened since the last round and every
// directory the kernel holds (primeMax at most), beneath the mount's
// root, through the kernel (see "Keeping the caches primed" above), and
// reports how many it stated. idle is asked before every stat (it
// waits for a quiet mount); the round ends when it returns false (ctx
// ended).
func (f *FS) refreshRound(ctx context.Context, idle func() bool) int {
	paths := f.refreshTargets()
	rfd, how, err := openBeneath(f.mountpoint, unix.O_PATH)
	if err != nil {
		return 0
	}
	defer unix.Close(rfd)
	var st unix.Stat_t
	unix.Fstat(rfd, &st) // the root itself
	stated := 1
	dfd, cur := rfd, "."
	defer func() {
		if dfd != rfd {
			unix.Close(dfd)
		}
	}()
	for i, t := range paths {
		// Before every stat: an atomic load while the mount is quiet,
		// and the agent's next command (a next session over a warm
		// mount) meets at most one of the round's requests.
		if ctx.Err() != nil || i > 0 && !idle() {
			break
		}
		if t.dir != cur {
			if dfd != rfd {
				unix.Close(dfd)
			}
			dfd, cur = rfd, "."
			if t.dir != "." {
				fd, err := unix.Openat2(rfd, t.dir, how)
				if err != nil {
					continue // moved or removed meanwhile
				}
				dfd, cur = fd, t.dir
			}
		}
		unix.Fstatat(dfd, t.name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT)
		stated++
	}
	return stated
}

// target is a name to stat beneath the mount's root: dir (".": the root)
// and the name in it.
type target struct{ dir, name string }

// refreshTargets takes the files opened since the last round and the
// directories the kernel holds, primeMax at most, as paths below the
// root in path order, for refreshRound.
func (f *FS) refreshTargets() []target {
	r := &f.refresh
	r.mu.Lock()
	opened := r.opened
	r.opened = map[int64]struct{}{}
	r.mu.Unlock()

	// The opened files first, then the directories, up to primeMax.
	// (Inode.IsDir reads a field set when the inode was made: no lock
	// of the node's is taken inside f.mu, where one held through a slow
	// open would stall the mount.)
	var targets, dirs []*node
	f.mu.Lock()
	root := f.nodes[journal.RootIno]
	for ino := range opened {
		if n := f.nodes[ino]; n != nil && len(targets) < primeMax {
			targets = append(targets, n)
		}
	}
	for _, n := range f.nodes {
		if len(targets)+len(dirs) >= primeMax {
			break
		}
		if _, ok := opened[n.ino]; !ok && n.IsDir() {
			dirs = append(dirs, n)
		}
	}
	f.mu.Unlock()
	if root == nil {
		return nil
	}
	targets = append(targets, dirs...)
	paths := make([]target, 0, len(targets))
	for _, n := range targets {
		if n == root {
			continue
		}
		if p, ok := pathBelow(&n.Inode, &root.Inode); ok {
			paths = append(paths, target{path.Dir(p), path.Base(p)})
		}
	}
	slices.SortFunc(paths, func(a, b target) int {
		if c := strings.Compare(a.dir, b.dir); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return paths
}

// openBeneath opens root, a directory (mode: O_RDONLY to list it, O_PATH
// to stat beneath it), and returns the openat2 how that opens its
// directories the same way: beneath it, never through a symbolic link,
// never into another mount.
func openBeneath(root string, mode int) (int, *unix.OpenHow, error) {
	flags := mode | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	fd, err := unix.Open(root, flags, 0)
	if err != nil {
		return -1, nil, err
	}
	return fd, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	}, nil
}

// pathBelow is n's path below root, false if n is not (or no longer)
// under it: an unlinked node keeps no parent.
func pathBelow(n, root *fs.Inode) (string, bool) {
	var names []string
	size := 0
	for p := n; p != root; {
		name, parent := p.Parent()
		// No parent: unlinked. Past PATH_MAX: openat2 would refuse
		// it, and an agent's deep chain must not cost a walk each.
		if size += len(name) + 1; parent == nil || size > unix.PathMax {
			return "", false
		}
		names = append(names, name)
		p = parent
	}
	slices.Reverse(names)
	return strings.Join(names, "/"), true
}

// stopPrime stops the walk, if any, and waits for it.
func (f *FS) stopPrime() {
	if p := f.prime; p != nil {
		p.cancel()
		p.done.Wait()
	}
}

// quiet returns at once when the mount served no request but the walk's
// since it last returned, else once it has served none for d; false if
// ctx ends first. Only the walk's thread calls it.
func (f *FS) quiet(ctx context.Context, seen *int64, d time.Duration) bool {
	for {
		now := f.others.Load()
		if now == *seen {
			return true
		}
		*seen = now
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// primeWalk lists the directories under root, depth first in name order,
// until it has listed max entries, ctx is cancelled or the tree is done;
// idle, when set, is asked before each directory and ends the walk when
// false. It reports the entries and directories listed. Errors (a
// directory removed or unreadable meanwhile) skip that directory.
func primeWalk(ctx context.Context, root string, max int, idle func() bool) (listed, dirs int) {
	rfd, how, err := openBeneath(root, unix.O_RDONLY)
	if err != nil {
		return 0, 0
	}
	defer unix.Close(rfd)
	buf := make([]byte, 64<<10)
	stack := []string{"."}
	var subdirs []string
	for len(stack) > 0 && listed < max && ctx.Err() == nil {
		if idle != nil && !idle() {
			break
		}
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fd := rfd
		if dir != "." {
			if fd, err = unix.Openat2(rfd, dir, how); err != nil {
				continue
			}
		}
		subdirs = subdirs[:0]
		for listed < max && ctx.Err() == nil {
			n, err := unix.Getdents(fd, buf)
			if err != nil || n <= 0 {
				break
			}
			err = dirent.Parse(buf[:n], func(name []byte, typ uint8) {
				listed++
				if typ != unix.DT_DIR {
					return
				}
				if dir == "." {
					subdirs = append(subdirs, string(name))
				} else {
					subdirs = append(subdirs, dir+"/"+string(name))
				}
			})
			if err != nil {
				break
			}
		}
		// The listing dropped the directory's atime from the kernel's
		// cache (a writable FUSE mount's listings and reads do), so the
		// agent's next stat of it would ask (git status stats every
		// directory: 1,706 GETATTRs): asked now, in the agent's idle time.
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		if fd != rfd {
			unix.Close(fd)
		}
		dirs++
		// Pushed in reverse: the first in name order is listed next.
		slices.Sort(subdirs)
		for i := len(subdirs) - 1; i >= 0; i-- {
			stack = append(stack, subdirs[i])
		}
	}
	return listed, dirs
}
