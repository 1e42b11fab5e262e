package tracer

import (
	"sync"
	"time"
)

// recordQueue hands records from the ptrace thread to the flusher. The
// ptrace thread never blocks on it beyond a mutex: records wait in memory
// while the sink is slow.
type recordQueue struct {
	mu     sync.Mutex
	recs   []Record
	closed bool
	max    int
	kick   chan struct{} // non-blocking "a batch is full / closed"
}

func (q *recordQueue) init(max int) {
	q.max = max
	q.kick = make(chan struct{}, 1)
}

func (q *recordQueue) push(r Record) {
	q.mu.Lock()
	q.recs = append(q.recs, r)
	full := len(q.recs) >= q.max
	q.mu.Unlock()
	if full {
		q.poke()
	}
}

func (q *recordQueue) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *recordQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.poke()
}

// take returns the queued records and whether the queue is closed.
func (q *recordQueue) take() ([]Record, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rs := q.recs
	q.recs = nil
	return rs, q.closed
}

func (t *Tracer) emit(r Record) { t.buf.push(r) }

// flusher delivers records to the sink every FlushInterval or MaxBatch.
func (t *Tracer) flusher() {
	defer close(t.flushed)
	tick := time.NewTicker(t.opts.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-t.buf.kick:
		}
		rs, closed := t.buf.take()
		if len(rs) > 0 && t.opts.Sink != nil {
			t.opts.Sink.Records(rs)
		}
		if closed {
			// close happened before take: nothing can follow.
			return
		}
	}
}
