package overlay

import (
	"context"
	"fmt"
	"sync"

	"github.com/artrt/art/journal"
)

// Unlinks written behind.
//
// An unlink of a file the directory's listing knows (listing.go: a name
// with its node cached is a file with one link) cannot fail in the journal,
// so Unlink answers the kernel at once and leaves the journal update to one
// background writer, in order. rm -rf then overlaps its own work with the
// daemon's SQL instead of waiting for each statement (on two cores, ~1.5x).
//
// Order is the invariant: every other journal access - any transaction,
// commit, sync, op switch, record - first waits until the queue is empty,
// so it sees every unlink answered before it, and a close or fsync still
// commits everything before it. A crash loses at most the unlinks queued
// and the batch's few uncommitted milliseconds: a prefix of the changes
// survives, as before. A queued unlink that fails after all (the store's
// disk failing) fails the mount (failed.go): every later change fails
// with that error, and Unmount's report names the unlinks, because the
// kernel was told they succeeded.
type behind struct {
	f    *FS
	mu   sync.Mutex
	cond sync.Cond
	q    []behindOp
	busy bool  // the writer is applying ops taken off q
	err  error // the first failure: the mount is broken
	stop bool
	done chan struct{}
}

type behindOp struct {
	pid int64
	fn  func(*journal.Tx) error
}

func newBehind(f *FS) *behind {
	b := &behind{f: f, done: make(chan struct{})}
	b.cond.L = &b.mu
	go b.run()
	return b
}

// push queues fn for the caller pid; false when the mount is broken or
// stopping (the caller then journals it itself and meets the error).
func (b *behind) push(pid int64, fn func(*journal.Tx) error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.stop {
		return false
	}
	b.q = append(b.q, behindOp{pid, fn})
	b.cond.Broadcast()
	return true
}

// wait returns once every queued op is in the batch, with the failure
// that broke the mount, if any.
func (b *behind) wait() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.q) > 0 || b.busy {
		b.cond.Wait()
	}
	return b.err
}

// close applies what is queued and stops the writer.
func (b *behind) close() error {
	b.mu.Lock()
	b.stop = true
	b.cond.Broadcast()
	b.mu.Unlock()
	<-b.done
	return b.wait()
}

func (b *behind) run() {
	defer close(b.done)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.q) == 0 && !b.stop {
			b.cond.Wait()
		}
		if len(b.q) == 0 {
			return
		}
		ops := b.q
		b.q = nil
		b.busy = true
		b.mu.Unlock()
		err := b.f.batch.Update(context.Background(), func(tx *journal.Tx) error {
			defer tx.SetPID(0) // the Tx is shared with later updates
			for _, op := range ops {
				tx.SetPID(op.pid)
				if err := op.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		b.mu.Lock()
		b.busy = false
		if err != nil && b.err == nil {
			// Answered, and not kept: the mount fails (failed.go), and
			// Unmount's report names them.
			b.err = fmt.Errorf("journal %d unlinks already answered: %w", len(ops), err)
			b.f.fail(b.err)
		}
		b.cond.Broadcast()
	}
}
