package netproxy

import (
	"net"
	"sync"
)

// tracker keeps a server's open connections and counts its goroutines,
// so that Close can end every connection and wait for every goroutine.
// Bridge and Proxy embed it; its zero value is ready.
type tracker struct {
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// enter counts one goroutine in wg; false once shut. Holding mu keeps
// Add from racing with shut's caller's Wait.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// track registers c (and with count, one goroutine in wg); false, with c
// closed, once shut.
func (t *tracker) track(c net.Conn, count bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.conns[c] = struct{}{}
	if count {
		t.wg.Add(1)
	}
	return true
}

// untrack closes c and forgets it.
func (t *tracker) untrack(c net.Conn) {
	c.Close()
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// shut refuses new connections and closes the open ones; false if it
// was already shut. The caller then closes its listeners and waits (wg).
func (t *tracker) shut() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	return true
}
