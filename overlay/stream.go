package overlay

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// Storing while writing (docs/store-format.md, "Storing while writing").
//
// A file written from its start to its end through the daemon - a
// download, cp, a linker's output - is chunked, hashed, compressed and
// packed by a goroutine that follows the writer, reading the private copy
// back moments after each write (cas.Stream). At fsync or close only the
// last few MiB are left to store, where before the whole file was read and
// stored then (issue 16: a new 1 GiB file spent most of its cp + sync in
// that close).
//
// The private copy stays the truth. A stream is used only if every change
// of the file since it was emptied was an append seen by handle.Write at
// the end the node tracks (seqEnd): any other change - a write elsewhere,
// truncate, fallocate, a passthrough writer, a mapping - sets seqEnd to -1
// and drops the stream, and journal then reads the whole copy as before.
// What the stream did outside the journaling transaction is checked in it:
// if a gc completed since the stream began, a chunk it found present may
// be gone; if the batch rolled a transaction back, rows the stream
// inserted, or found in the batch's open transaction, may be; either way
// the stream is not used.

// streamFrom is the length at which a file being appended to starts
// streaming: smaller ones are stored at close in one go, where the head
// start would save little.
const streamFrom = 8 << 20

// streamStep is how much more must be written before the stream's
// goroutine is woken again.
const streamStep = 2 << 20

// maxStreams bounds the files a mount streams at once (each holds a
// goroutine, a descriptor and a 4 MiB read buffer).
const maxStreams = 4

// Flush a stream's rows into the journal's batch past these, so that
// what it holds in memory stays small whatever the file's size.
const (
	streamFlushRows  = 2048
	streamFlushBytes = 1 << 20
)

// fileStream is one file being stored while it is written.
type fileStream struct {
	fsys *FS
	st   *cas.Stream
	f    *os.File // the private copy (its path is f.Name()), read-only
	gen  int64    // gc generation when it began
	lost int64    // the batch's Rollbacks when it began

	end    atomic.Int64 // written so far, as published by handle.Write
	kicked int64        // end at the last wake-up; guarded by the node's mu
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	err    error // the goroutine's, read after done
	closed sync.Once
	// The private copy's bytes sent to disk (sync_file_range) and dropped
	// from the page cache so far, and whether a writeback error ended
	// that (releasePages); only the goroutine's.
	written, dropped int64
	noRelease        bool
}

// streams is the set of running streams of a mount, for unmount.
type streams struct {
	mu  sync.Mutex
	set map[*fileStream]struct{}
}

// startStreamLocked begins streaming n's private copy, written up to
// n.seqEnd; nothing happens if the mount streams too many files already
// or the copy cannot be opened. The caller holds n.mu.
func (n *node) startStreamLocked() {
	f := n.fsys
	gen, err := f.db.GCGeneration(context.Background())
	if err != nil {
		return
	}
	up, err := os.Open(n.upper)
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &fileStream{fsys: f, st: f.db.Objects().NewStream(up), f: up, gen: gen, lost: f.batch.Rollbacks(),
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	f.streams.mu.Lock()
	if len(f.streams.set) >= maxStreams {
		f.streams.mu.Unlock()
		cancel()
		up.Close()
		return
	}
	if f.streams.set == nil {
		f.streams.set = map[*fileStream]struct{}{}
	}
	f.streams.set[s] = struct{}{}
	f.streams.mu.Unlock()
	n.stream = s
	f.stats.streamStarts.Add(1)
	s.wrote(n.writtenLocked())
	go s.run()
}

// wrote publishes that the file is written up to end and wakes the
// goroutine every streamStep bytes. The caller holds the node's mu.
func (s *fileStream) wrote(end int64) {
	s.end.Store(end)
	if end-s.kicked >= streamStep || s.kicked == 0 {
		s.kicked = end
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *fileStream) run() {
	defer func() {
		s.fsys.streams.mu.Lock()
		delete(s.fsys.streams.set, s)
		s.fsys.streams.mu.Unlock()
		close(s.done)
	}()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		if err := s.fsys.failure(); err != nil {
			s.err = err // nothing is kept any more (failed.go): store no more bytes
			return
		}
		if err := s.st.AdvanceLooking(s.ctx, s.end.Load(), s.lookup); err != nil {
			if !errors.Is(err, context.Canceled) {
				s.err = err
			}
			return
		}
		s.releasePages()
		if rows, mem := s.st.Rows(); rows >= streamFlushRows || mem >= streamFlushBytes {
			// Never cancelled: interrupting a statement would roll back
			// the shared batch, other files' changes with it.
			err := s.fsys.tx(context.Background(), func(tx *journal.Tx) error {
				return s.st.Flush(context.Background(), tx.Objects())
			})
			if err != nil {
				s.err = err
				return
			}
		}
	}
}

// A big file's private copy need not stay in memory behind the stream:
// the kernel's page cache of the FUSE file holds what was written for
// readers, and the copy's own pages - as many again as the file - are
// read back once, by the stream. Left alone they stay dirty until the
// kernel's writeback, which the dirty limits then impose on the writer;
// on a virtual machine whose free memory goes back to the host, every
// one of them is also memory the host must provide afresh (a 2 GiB dd
// wrote 2 GiB of FUSE cache and 2 GiB of private copy where natively it
// writes 2 GiB; measured in docs/benchmarks.md, "A big file's private
// copy"). So once a file is past releaseFrom, the goroutine sends what it
// has stored to disk releaseLag behind itself, and drops from the page
// cache what was sent another releaseLag before, after waiting for that
// writeback to end (it normally has). The copy stays the truth: its bytes
// are on disk and read back from there if asked. Best effort: a failure
// only leaves pages cached, as before - and a writeback error ends the
// releases for the file, so no page whose write may have failed is ever
// dropped (the error is reported once per descriptor, perhaps on a range
// other than the failed one). Every range starts and ends on a multiple
// of releaseAlign, the largest page-cache folio (x86-64: 2 MiB): the
// kernel drops no folio that crosses a range's end, and the stream's
// positions are content-defined cuts (ranges ending on them left three
// pages in four of a 16 MiB file cached). A close or fsync that stops the
// goroutine may have to wait while it waits for a writeback (of at most
// releaseLag bytes, normally done by then).
const (
	releaseFrom  = 64 << 20
	releaseLag   = 32 << 20
	releaseAlign = 2 << 20
)

// releasePages is one step of that, after the stream stored up to Pos.
func (s *fileStream) releasePages() {
	pos := s.st.Pos()
	if s.noRelease || pos < releaseFrom {
		return
	}
	fd := int(s.f.Fd())
	if w := (pos - releaseLag) &^ (releaseAlign - 1); w > s.written {
		if syncFileRange(fd, s.written, w-s.written, unix.SYNC_FILE_RANGE_WRITE) != nil {
			s.noRelease = true
			return
		}
		s.written = w
	}
	if d := s.written - releaseLag; d > s.dropped {
		n := d - s.dropped
		if syncFileRange(fd, s.dropped, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER) != nil {
			s.noRelease = true
			return
		}
		if unix.Fadvise(fd, s.dropped, n, unix.FADV_DONTNEED) == nil {
			s.fsys.stats.streamReleased.Add(n)
		}
		s.dropped = d
	}
}

// syncFileRange is sync_file_range(2), or EIO where a test says the
// private copy's writeback fails.
func syncFileRange(fd int, off, n int64, flags int) error {
	if hooks.writebackFails.Load() > 0 && hooks.writebackFails.Add(-1) >= 0 {
		return unix.EIO
	}
	return unix.SyncFileRange(fd, off, n, flags)
}

// lookup looks chunks up through the journal's batch: in its open
// transaction, whose connection keeps the index pages in its cache. Each
// statement of the database's pool found its cache emptied by the
// commits since its last and read the pages back: a 2 GiB write's
// lookups cost as much CPU as its row inserts. As an Update each lookup
// would start the batch's commit timer, and commit (syncing the packs)
// every few MiB. What it finds is a hint, as before: a row of the open
// transaction may be rolled back, which finish checks.
func (s *fileStream) lookup(ctx context.Context, ids []cas.ID) ([]bool, error) {
	var present []bool
	err := s.fsys.batch.ReadObjects(ctx, func(objs *cas.Store) error {
		var err error
		present, err = objs.HasMany(ctx, ids)
		return err
	})
	return present, err
}

// close lets go of the private copy's descriptor, once the goroutine is
// done and nobody will Finish the stream.
func (s *fileStream) close() {
	s.closed.Do(func() { s.f.Close() })
}

// halt stops the goroutine and waits for it; it reports whether the
// stream is still good to Finish (the caller closes it after). Never
// called with the node's mu held: the goroutine may be waiting for the
// journal's batch.
func (s *fileStream) halt() bool {
	s.cancel()
	<-s.done
	if s.err != nil {
		if s.fsys.failure() == nil { // else Unmount's report says it
			s.fsys.logf("storing %s while written: %v (stored at close instead)", s.f.Name(), s.err)
		}
		return false
	}
	return true
}

// finish stores the file through tx from where the stream got to, if
// nothing the stream did outside tx can have been undone since: no gc
// completed (it may have collected an object the stream found present)
// and the batch rolled nothing back (rows the stream inserted or found in
// its open transaction). ok is
// false when the caller must store the file whole instead.
func (s *fileStream) finish(ctx context.Context, tx *journal.Tx) (id cas.ID, st cas.FileStats, ok bool, err error) {
	if g, err := tx.GCGeneration(); err != nil || g != s.gen || s.fsys.batch.Rollbacks() != s.lost {
		return cas.ID{}, cas.FileStats{}, false, nil
	}
	ahead := s.st.Pos()
	if id, st, err = s.st.Finish(ctx, tx.Objects()); err != nil {
		return cas.ID{}, st, false, err
	}
	s.fsys.stats.streamed.Add(1)
	s.fsys.stats.streamBytes.Add(ahead)
	return id, st, true, nil
}

// dropStreamLocked ends streaming for n: a change the stream cannot
// follow, or the content about to be journaled. The goroutine is stopped
// without waiting (the caller holds n.mu); what it stored is garbage for
// gc. The caller holds n.mu.
func (n *node) dropStreamLocked() {
	n.appending = false
	if s := n.stream; s != nil {
		n.stream = nil
		s.cancel()
		go func() {
			<-s.done
			s.close()
		}()
	}
}

// takeStreamLocked detaches n's stream for journal and says whether it
// may be used: every change since the file was emptied was an append seen
// here, on the private copy journal is about to store. Streaming ends
// either way. The caller holds n.mu.
func (n *node) takeStreamLocked() (*fileStream, bool) {
	s := n.stream
	ok := s != nil && n.appending && s.f.Name() == n.upper && !n.inMem &&
		n.ptWriters == 0 && !n.ptWritten && !n.mapped
	n.stream = nil
	// An empty file journaled (a truncation to zero, a flush of another
	// descriptor before the first write) is still a start for appends.
	n.appending = n.appending && n.seqEnd == 0
	return s, ok
}

// appendedLocked notes a write of w bytes at off through the daemon: an
// append at the tracked end extends it (and feeds or starts the stream),
// anything else ends streaming. The caller holds n.mu.
func (n *node) appendedLocked(off int64, w int) {
	if !n.appending || off != n.seqEnd {
		n.dropStreamLocked()
		return
	}
	n.seqEnd += int64(w)
	if n.inMem || n.upper == "" {
		return
	}
	if n.stream == nil && n.seqEnd >= streamFrom && !n.fsys.readOnly {
		n.startStreamLocked()
		return
	}
	if n.stream != nil {
		n.stream.wrote(n.writtenLocked())
	}
}

// writtenLocked is how far the private copy holds the appended bytes: a
// gathered tail (tail.go) is not in it yet. The caller holds n.mu.
func (n *node) writtenLocked() int64 {
	if len(n.tail) > 0 {
		return min(n.seqEnd, n.tailOff)
	}
	return n.seqEnd
}

// haltStreams stops every stream of the mount (unmount).
func (f *FS) haltStreams() {
	f.streams.mu.Lock()
	all := make([]*fileStream, 0, len(f.streams.set))
	for s := range f.streams.set {
		all = append(all, s)
	}
	f.streams.mu.Unlock()
	for _, s := range all {
		s.cancel()
		<-s.done
		s.close()
	}
}
