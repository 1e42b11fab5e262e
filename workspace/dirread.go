package workspace

import (
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/procs"
)

// Reading the host tree ahead: a push that finds nothing changed is
// mostly getdents and one lstat per entry (as git status is, which
// preloads its index stats on threads), and the comparison needs no
// store transaction. So worker goroutines list the directories of the
// tree - each one's subdirectories as soon as it is listed - while the
// walker runs the store's queries and compares, taking each listing in
// its own depth-first order. A listing nobody has begun when the walker
// wants it is read by the walker itself: it never waits on work not
// started.

// readAhead bounds the directories listed (or queued to be) that the
// walker has not taken yet, so memory stays bounded whatever the tree's
// shape; beyond it the walker lists directories itself when it reaches
// them.
const readAhead = 256

// Listing states, as prefetchItem's: whoever moves a listing out of
// listPending reads it.
const (
	listPending int32 = iota
	listRunning
	listClaimed // taken by the walker before a worker began
)

// listing is one host directory's entries, read by a worker or by the
// walker.
type listing struct {
	path string
	skip bool // a store path: never captured, never read
	// queued: counted in treeReader.pending until the walker takes it.
	queued bool
	state  atomic.Int32
	done   chan struct{} // closed when a worker finished reading
	host   []hostEntry
	err    error
	// kids are the listings of the subdirectories, by name, made by
	// whoever read this one.
	kids map[string]*listing
}

// treeReader lists a host tree ahead of a depth-first walker.
type treeReader struct {
	skip map[string]bool
	// seen, if set, is called with each listing read (by any
	// goroutine), before the walker can take it.
	seen    func(path string, host []hostEntry)
	queue   chan *listing
	stop    chan struct{}
	wg      sync.WaitGroup
	pending atomic.Int64 // queued or read, not taken: <= readAhead
}

// startTreeReader begins listing the tree at root. Close must be called.
func startTreeReader(root string, skip map[string]bool, seen func(string, []hostEntry)) (*treeReader, *listing) {
	r := &treeReader{skip: skip, seen: seen, queue: make(chan *listing, readAhead), stop: make(chan struct{})}
	top := r.newListing(root)
	workers := procs.Workers()
	r.wg.Add(workers)
	for range workers {
		go func() {
			defer r.wg.Done()
			for {
				select {
				case <-r.stop:
					return
				case l := <-r.queue:
					if l.state.CompareAndSwap(listPending, listRunning) {
						r.read(l)
						close(l.done)
					}
				}
			}
		}()
	}
	r.enqueue(top)
	return r, top
}

func (r *treeReader) newListing(path string) *listing {
	return &listing{path: path, skip: r.skip[path], done: make(chan struct{})}
}

// enqueue offers l to the workers if read-ahead allows; otherwise it
// stays pending for the walker.
func (r *treeReader) enqueue(l *listing) {
	if l.skip {
		return
	}
	if r.pending.Add(1) > readAhead {
		r.pending.Add(-1)
		return
	}
	l.queued = true // before the send: the worker may take it at once
	select {
	case r.queue <- l:
	default:
		l.queued = false
		r.pending.Add(-1)
	}
}

// read lists l and makes (and offers) its subdirectories' listings.
func (r *treeReader) read(l *listing) {
	l.host, l.err = readHostDir(l.path)
	if l.err != nil {
		return
	}
	if r.seen != nil {
		r.seen(l.path, l.host)
	}
	for i := range l.host {
		e := &l.host[i]
		if e.kind != cas.EntryDir {
			continue
		}
		if l.kids == nil {
			l.kids = map[string]*listing{}
		}
		k := r.newListing(filepath.Join(l.path, string(e.name)))
		l.kids[string(e.name)] = k
	}
	for i := range l.host {
		if k := l.kids[string(l.host[i].name)]; k != nil {
			r.enqueue(k)
		}
	}
}

// take returns l's entries, reading them now if no worker has begun.
func (r *treeReader) take(l *listing) ([]hostEntry, error) {
	if l.state.CompareAndSwap(listPending, listClaimed) {
		r.read(l)
	} else {
		<-l.done
	}
	if l.queued {
		r.pending.Add(-1)
	}
	return l.host, l.err
}

// kid returns the listing of subdirectory name of l (taken), or a new one
// if the reader of l did not see it as a directory.
func (r *treeReader) kid(l *listing, name []byte) *listing {
	if k := l.kids[string(name)]; k != nil {
		return k
	}
	return r.newListing(filepath.Join(l.path, string(name)))
}

// Close stops the workers and waits for them (each finishes the listing
// it is reading).
func (r *treeReader) Close() {
	close(r.stop)
	r.wg.Wait()
}
