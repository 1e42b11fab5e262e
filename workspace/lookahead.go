package workspace

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/procs"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// Lookahead: the per-directory prefetcher (prefetch.go) drains at every
// directory - the importer finds a directory's first files not yet begun
// and reads them itself, and a directory of one small file is never
// prepared ahead - so on a tree of many small directories (Go's src/:
// 11,478 files in ~1,000 directories) much of the compression still ran on
// the importer's goroutine, the one that must only insert. A lookahead
// walks the host tree on its own goroutine in the order the importer visits
// it (each directory's entries sorted, files before subdirectories,
// depth first), hands the importer each directory's listing and import
// cache records, and keeps the workers preparing the new or changed small
// files of the directories ahead, at most prefetchAhead files at a time.
//
// It needs the whole import cache in memory (importer.cache) to know which
// files the importer will read; without it the importer keeps the
// per-directory prefetcher.
//
// The importer's directories are a subsequence of the walk's (it never
// enters a directory the walk did not list: the listings are the walk's),
// so it takes listings in order, dropping those of directories it skips.
// Everything prepared for a directory the importer has left, or skipped,
// is released then: the walk never waits on slots the importer will not
// free.
type lookahead struct {
	ctx   context.Context
	objs  *cas.Store
	root  string          // host path of the workspace
	skip  map[string]bool // importer.skip: read-only
	cache map[string]map[string]journal.StatCache

	dirs           chan *walkedDir    // walk order; closed when the walk ends
	ents           entryBudget        // entries of the listings handed over and not done with
	jobs           chan *prefetchItem // to the workers
	slots          chan struct{}      // one per item running or prepared and not released
	stop           chan struct{}
	walkWG, workWG sync.WaitGroup

	mu    sync.Mutex
	items map[string]*prefetchItem // by host path, not yet released
	queue []*prefetchItem          // the same, in walk order

	// The importer's side (its goroutine only).
	cur  int64 // sequence number of the listing it is in
	held int   // its entries, counted in ents
}

// walkedDir is one host directory as the walk read it.
type walkedDir struct {
	host  string
	seq   int64
	size  int // entries counted in lookahead.ents
	ents  []hostEntry
	cache map[string]journal.StatCache // the import cache records of its entries
	err   error
}

// lookaheadDirs bounds the listings read and not yet taken.
const lookaheadDirs = 4

// lookaheadEntries bounds the entries of the listings the walk has read
// and the importer is not done with (about 250 bytes each), unless one
// directory alone has more: then that directory is all the walk holds.
var lookaheadEntries = 1 << 16 // a variable for tests

// entryBudget counts the entries of the listings held.
type entryBudget struct {
	mu      sync.Mutex
	cond    sync.Cond
	used    int
	stopped bool
}

// acquire waits until n more entries fit (or none are held), false if
// stopped first.
func (b *entryBudget) acquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+n > lookaheadEntries && !b.stopped {
		b.cond.Wait()
	}
	if b.stopped {
		return false
	}
	b.used += n
	return true
}

func (b *entryBudget) release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *entryBudget) stop() {
	b.mu.Lock()
	b.stopped = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// startLookahead begins walking root, whose store path is store. cache is
// the whole import cache by store directory; the walk owns it from now
// on. finish must be called.
func startLookahead(ctx context.Context, objs *cas.Store, root, store string, skip map[string]bool,
	cache map[string]map[string]journal.StatCache) *lookahead {
	la := &lookahead{ctx: ctx, objs: objs, root: root, skip: skip, cache: cache,
		dirs: make(chan *walkedDir, lookaheadDirs), jobs: make(chan *prefetchItem),
		slots: make(chan struct{}, prefetchAhead), stop: make(chan struct{}),
		items: map[string]*prefetchItem{}}
	la.ents.cond.L = &la.ents.mu
	workers := procs.Workers()
	la.workWG.Add(workers)
	for range workers {
		go func() {
			defer la.workWG.Done()
			for it := range la.jobs {
				it.p, it.err = prepareItem(ctx, objs, it)
				close(it.done)
			}
		}()
	}
	la.walkWG.Add(1)
	go func() {
		defer la.walkWG.Done()
		defer close(la.dirs)
		defer close(la.jobs)
		var seq int64
		la.walk(root, store, &seq)
	}()
	return la
}

// walk lists hostPath, queues its files and walks its subdirectories; false
// when it must stop (stopped, or a directory could not be read: the
// importer then stops with that error).
func (la *lookahead) walk(hostPath, store string, seq *int64) bool {
	*seq++
	l := &walkedDir{host: hostPath, seq: *seq}
	l.ents, l.err = readHostDir(hostPath)
	l.size = max(len(l.ents), 1)
	if !la.ents.acquire(l.size) {
		return false
	}
	l.cache = la.cache[store]
	delete(la.cache, store)
	if l.cache == nil {
		l.cache = map[string]journal.StatCache{}
	}
	var queued []*prefetchItem
	if l.err == nil {
		// Registered before the listing is handed over, so the importer
		// never misses a file that is still to be prepared.
		pl := &place{host: hostPath, store: store}
		if hostPath != la.root {
			pl.parent = &place{} // only the root skips staging directories
		}
		cands := prefetchCandidates(pl, hostPath, l.ents, l.cache, la.skip)
		// The xattrs of the files the importer will read, listed here
		// rather than on its goroutine; a change after the lstat moves
		// the ctime, as when the importer lists them after it.
		for i := range l.ents {
			e := &l.ents[i]
			if e.kind != cas.EntryFile {
				continue
			}
			if xs, err := readXattrs(filepath.Join(hostPath, string(e.name))); err == nil {
				e.xattrs, e.hasXattrs = xs, true
			} // else the importer lists them and reports what is wrong
		}
		la.mu.Lock()
		for _, p := range cands {
			if la.items[p] != nil {
				continue // cannot happen (one walk, one name per path); never share an item
			}
			it := &prefetchItem{path: p, done: make(chan struct{}), dir: l.seq}
			la.items[p] = it
			la.queue = append(la.queue, it)
			queued = append(queued, it)
		}
		la.mu.Unlock()
	}
	select {
	case la.dirs <- l:
	case <-la.stop:
		la.ents.release(l.size)
		return false
	}
	if l.err != nil {
		return false
	}
	for _, it := range queued {
		select {
		case la.slots <- struct{}{}:
		case <-la.stop:
			return false
		}
		if !it.state.CompareAndSwap(itemPending, itemRunning) {
			<-la.slots // the importer read it itself, or released it
			continue
		}
		select {
		case la.jobs <- it:
		case <-la.stop:
			it.err = context.Canceled // never started: nothing to wait for
			close(it.done)
			return false
		}
	}
	for i := range l.ents {
		e := &l.ents[i]
		if e.kind != cas.EntryDir {
			continue
		}
		hp := filepath.Join(hostPath, string(e.name))
		if la.skip[hp] || (hostPath == la.root && strings.HasPrefix(string(e.name), stagingPrefix)) {
			continue // as importer.ignored
		}
		if !la.walk(hp, store+"/"+string(e.name), seq) {
			return false
		}
	}
	return true
}

// next returns the listing of hostPath, or nil if the walk has none (it
// stopped early); the importer then reads the directory itself. Items of
// the directories before it are released.
func (la *lookahead) next(hostPath string) *walkedDir {
	if la == nil {
		return nil
	}
	la.releaseUpTo(la.cur)
	// The importer is done with the entries of the directories before
	// (it moves to the next one only after handling every entry).
	la.ents.release(la.held)
	la.held = 0
	for l := range la.dirs {
		if l.host == hostPath {
			la.cur, la.held = l.seq, l.size
			la.releaseUpTo(l.seq - 1)
			return l
		}
		// A directory the importer skipped: it never comes back to it.
		la.ents.release(l.size)
		la.releaseUpTo(l.seq)
	}
	return nil
}

// releaseUpTo drops every item of the directories up to sequence number
// seq that the importer did not take, freeing their slots.
func (la *lookahead) releaseUpTo(seq int64) {
	la.mu.Lock()
	n := 0
	for n < len(la.queue) && la.queue[n].dir <= seq {
		n++
	}
	drop := append([]*prefetchItem(nil), la.queue[:n]...)
	la.queue = la.queue[n:]
	for _, it := range drop {
		delete(la.items, it.path)
	}
	la.mu.Unlock()
	for _, it := range drop {
		la.release(it)
	}
}

// release frees an item the importer does not take.
func (la *lookahead) release(it *prefetchItem) {
	if it.taken {
		return
	}
	it.taken = true
	if it.state.CompareAndSwap(itemPending, itemClaimed) {
		return // never started: holds no slot
	}
	<-it.done
	<-la.slots
	it.p = nil
}

// take is prefetcher.take for the lookahead's items: the prepared content
// of path and the stat it was read with, or nil if the caller must read
// it itself.
func (la *lookahead) take(path string, want *unix.Stat_t) (*cas.Prepared, *unix.Stat_t) {
	if la == nil {
		return nil, nil
	}
	la.mu.Lock()
	it := la.items[path]
	la.mu.Unlock()
	if it == nil || it.taken || it.dir != la.cur {
		return nil, nil
	}
	it.taken = true
	if it.state.CompareAndSwap(itemPending, itemClaimed) {
		return nil, nil
	}
	<-it.done
	<-la.slots
	p := it.p
	it.p = nil
	if it.err != nil || !sameStat(&it.st, want) {
		return nil, nil
	}
	return p, &it.st
}

// finish stops the walk and waits for it and the workers: nothing of la
// runs after it returns.
func (la *lookahead) finish() {
	if la == nil {
		return
	}
	close(la.stop)
	la.ents.stop()
	// Every wait of the walk also waits on stop: it ends, closing jobs,
	// and queues nothing more.
	la.walkWG.Wait()
	la.mu.Lock()
	rest := la.queue
	la.queue, la.items = nil, nil
	la.mu.Unlock()
	for _, it := range rest {
		if it.taken || it.state.CompareAndSwap(itemPending, itemClaimed) {
			continue
		}
		<-it.done
		it.p = nil
	}
	la.workWG.Wait()
}
