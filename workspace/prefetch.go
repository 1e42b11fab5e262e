package workspace

import (
	"context"
	"os"
	"sync"
	"sync/atomic"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/procs"
	"golang.org/x/sys/unix"
)

// Prefetching: the importer owns the store's one write transaction, so
// everything it does runs on one goroutine. Reading, chunking, hashing and
// compressing a file is most of a new file's cost and needs no
// transaction: for the small files of a directory it is done on worker
// goroutines ahead of the importer (cas.Store.PrepareSparseFile), which
// then only inserts the prepared rows (cas.Store.PutPrepared). Big files
// keep cas's own pipeline, which already spreads their chunks over cores.
const (
	// prefetchMaxFile is the largest file prepared ahead: its whole
	// compressed content waits in memory.
	prefetchMaxFile = 1 << 20
	// prefetchAhead bounds how many files are prepared (or being
	// prepared) and not yet taken, so memory stays under
	// prefetchAhead * prefetchMaxFile whatever the directory holds.
	prefetchAhead = 16
)

// Item states. Whoever moves an item out of itemPending owns its work: a
// worker prepares it; the importer, finding it not started, reads it
// itself (never waiting on work nobody has begun).
const (
	itemPending int32 = iota
	itemRunning
	itemClaimed // taken by the importer before a worker began
)

type prefetchItem struct {
	path  string
	state atomic.Int32
	done  chan struct{} // closed when a worker finished
	st    unix.Stat_t   // the stat the content was read with
	p     *cas.Prepared
	err   error
	taken bool  // the importer has it (its slot is free again)
	dir   int64 // lookahead: the sequence number of its directory's listing
}

// prefetcher prepares one directory's candidate files in order.
type prefetcher struct {
	items map[string]*prefetchItem
	order []*prefetchItem
	slots chan struct{} // one per item prepared and not yet taken
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startPrefetch begins preparing the files at paths (host paths, in the
// order the importer will want them). Finish must be called.
func startPrefetch(ctx context.Context, objs *cas.Store, paths []string) *prefetcher {
	pf := &prefetcher{items: make(map[string]*prefetchItem, len(paths)),
		slots: make(chan struct{}, prefetchAhead), stop: make(chan struct{})}
	for _, p := range paths {
		it := &prefetchItem{path: p, done: make(chan struct{})}
		pf.items[p] = it
		pf.order = append(pf.order, it)
	}
	jobs := make(chan *prefetchItem)
	workers := min(procs.Workers(), len(paths))
	pf.wg.Add(workers + 1)
	for range workers {
		go func() {
			defer pf.wg.Done()
			for it := range jobs {
				it.p, it.err = prepareItem(ctx, objs, it)
				close(it.done)
			}
		}()
	}
	go func() { // the feeder: in order, never more than prefetchAhead ahead
		defer pf.wg.Done()
		defer close(jobs)
		for _, it := range pf.order {
			select {
			case pf.slots <- struct{}{}:
			case <-pf.stop:
				return
			}
			if !it.state.CompareAndSwap(itemPending, itemRunning) {
				<-pf.slots // the importer read it itself
				continue
			}
			select {
			case jobs <- it:
			case <-pf.stop:
				it.err = context.Canceled // never started: nothing to wait for
				close(it.done)
				<-pf.slots
				return
			}
		}
	}()
	return pf
}

// prepareItem opens, checks and prepares one file as importer.read does.
func prepareItem(ctx context.Context, objs *cas.Store, it *prefetchItem) (*cas.Prepared, error) {
	f, err := openHostFile(it.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Fstat(int(f.Fd()), &it.st); err != nil {
		return nil, err
	}
	if kindOf(it.st.Mode) != cas.EntryFile || it.st.Size > prefetchMaxFile {
		return nil, errNotPrefetched
	}
	return objs.PrepareSparseFile(ctx, f)
}

// take returns the prepared content of path and the stat it was read
// with, or nil if the caller must read it itself (not a candidate, not
// started yet, preparing it failed - the caller's own read reports
// whatever is wrong - or the file's stat is no longer want, the lstat the
// importer decides with: content read before a change is never used).
func (pf *prefetcher) take(path string, want *unix.Stat_t) (*cas.Prepared, *unix.Stat_t) {
	if pf == nil {
		return nil, nil
	}
	it := pf.items[path]
	if it == nil || it.taken {
		return nil, nil
	}
	it.taken = true
	if it.state.CompareAndSwap(itemPending, itemClaimed) {
		return nil, nil
	}
	<-it.done
	<-pf.slots
	p := it.p
	it.p = nil
	if it.err != nil || !sameStat(&it.st, want) {
		return nil, nil
	}
	return p, &it.st
}

// sameStat says whether two stats of a file show no change between them:
// any write moves the ctime.
func sameStat(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mode == b.Mode &&
		a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// finish stops preparing and waits for the workers: nothing of pf runs
// after it returns.
func (pf *prefetcher) finish() {
	if pf == nil {
		return
	}
	close(pf.stop)
	for _, it := range pf.order {
		if it.taken || it.state.CompareAndSwap(itemPending, itemClaimed) {
			continue
		}
		<-it.done
		it.p = nil
	}
	pf.wg.Wait()
}

// errNotPrefetched: the file is not one to prepare ahead (it changed
// kind or grew since its lstat); the importer reads it.
var errNotPrefetched = os.ErrInvalid
