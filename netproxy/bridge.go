package netproxy

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
)

// Route is one bridged port: connections to Listen (a TCP address on the
// sandbox's loopback) are carried to the UNIX socket Socket.
type Route struct {
	Listen string
	Socket string
}

// Bridge forwards TCP connections to UNIX sockets, byte for byte. It runs
// inside the sandbox, where the Proxy's sockets are bound, and knows
// nothing of the protocols: every decision is the Proxy's.
type Bridge struct {
	lns  []net.Listener
	done chan struct{}
	tracker
}

// Routes returns the standard routes for the sockets of a Proxy whose
// directory is bound at dir in the sandbox.
func Routes(httpAddr, socksAddr, dir string) []Route {
	return []Route{
		{Listen: httpAddr, Socket: filepath.Join(dir, HTTPSocket)},
		{Listen: socksAddr, Socket: filepath.Join(dir, SOCKSSocket)},
	}
}

// StartBridge listens on every route's address and serves until Close.
func StartBridge(routes []Route) (*Bridge, error) {
	b := &Bridge{done: make(chan struct{})}
	for _, r := range routes {
		ln, err := net.Listen("tcp", r.Listen)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("bridge listen %s: %w", r.Listen, err)
		}
		b.lns = append(b.lns, ln)
	}
	for i, ln := range b.lns {
		b.wg.Add(1)
		go b.accept(ln, routes[i].Socket)
	}
	return b, nil
}

// Addr returns the address route i listens on (useful with port 0).
func (b *Bridge) Addr(i int) net.Addr { return b.lns[i].Addr() }

// Done is closed when the bridge has stopped.
func (b *Bridge) Done() <-chan struct{} { return b.done }

// Close stops listening, closes every connection and waits. Idempotent.
func (b *Bridge) Close() error {
	if !b.shut() {
		return nil
	}
	for _, ln := range b.lns {
		ln.Close()
	}
	b.wg.Wait()
	close(b.done)
	return nil
}

func (b *Bridge) accept(ln net.Listener, socket string) {
	defer b.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !b.track(c, true) {
			return
		}
		go func() {
			defer b.wg.Done()
			defer b.untrack(c)
			up, err := net.Dial("unix", socket)
			if err != nil {
				return // the client sees its connection closed
			}
			if !b.track(up, false) {
				return
			}
			defer b.untrack(up)
			splice(c, up, c.Read)
		}()
	}
}
