package overlay

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artrt/art/internal/dirent"
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

// primer is a running walk.
type primer struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	// listed and dirs count what the walk listed, took how long (tests
	// and ART_FUSE_COUNTS), set when it ends.
	listed, dirs int
	took         time.Duration
}

// startPrime starts the walk of f's mount.
func (f *FS) startPrime() {
	ctx, cancel := context.WithCancel(context.Background())
	p := &primer{cancel: cancel}
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
		listed, dirs := primeWalk(ctx, f.mountpoint, primeMax, func() bool { return f.quiet(ctx, &seen) })
		p.mu.Lock()
		p.listed, p.dirs, p.took = listed, dirs, time.Since(start)
		p.mu.Unlock()
	}()
	f.prime = p
}

// stopPrime stops the walk, if any, and waits for it.
func (f *FS) stopPrime() {
	if p := f.prime; p != nil {
		p.cancel()
		p.done.Wait()
	}
}

// quiet returns at once when the mount served no request but the walk's
// since it last returned, else once it has served none for primeQuiet;
// false if ctx ends first. Only the walk calls it.
func (f *FS) quiet(ctx context.Context, seen *int64) bool {
	for {
		now := f.others.Load()
		if now == *seen {
			return true
		}
		*seen = now
		t := time.NewTimer(primeQuiet)
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
	rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, 0
	}
	defer unix.Close(rfd)
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	}
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
			if fd, err = unix.Openat2(rfd, dir, &how); err != nil {
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
