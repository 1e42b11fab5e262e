// Package netproxy carries a sandboxed agent's network traffic in art's
// "--net allow" mode: a Proxy on the host decides every connection with a
// netpolicy.Policy, and a Bridge inside the sandbox forwards the sandbox's
// loopback ports to the Proxy's UNIX sockets. BridgeAndExec is the
// sandbox's first process in that mode (art net-bridge): it starts the
// Bridge as a detached copy of the binary, then becomes the command.
//
// The Proxy serves two protocols, each on its own UNIX socket in one
// directory that art binds into the sandbox:
//
//   - http.sock: an HTTP/1.1 forward proxy. CONNECT host:port opens a tunnel
//     (TLS passes through untouched); any other method is forwarded by its
//     absolute URI or, for an origin-form request, its Host header, to plain
//     http:// targets only.
//   - socks.sock: SOCKS5 (RFC 1928) CONNECT without authentication; domain
//     names (socks5h) are resolved on the host, like HTTP names.
//
// Every attempt, allowed or denied, is passed to Options.Report before any
// byte flows; an attempt that cannot be reported is not carried out. The
// only process identity available is SO_PEERCRED of the UNIX socket, which
// names the Bridge, not the program inside the sandbox that connected to it.
//
// The sandbox has no route out but these sockets (its network namespace
// holds only loopback), so the proxies are its only way to the network.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/artrt/art/netpolicy"
)

// Socket names inside the directory given to Start.
const (
	HTTPSocket  = "http.sock"
	SOCKSSocket = "socks.sock"
)

// Options configure a Proxy.
type Options struct {
	Policy *netpolicy.Policy // required
	Lookup netpolicy.Lookup  // resolves names on the host; nil: netpolicy.SystemLookup
	// Report receives every attempt, from the connection's goroutine, after
	// the decision and (when allowed) the connect. An error refuses the
	// connection: what cannot be recorded is not done. Nil: not reported.
	Report      func(netpolicy.Attempt) error
	DialTimeout time.Duration    // per address; 0: 10 s
	Now         func() time.Time // nil: time.Now
	// Forwards are host loopback services the sandbox reaches at their own
	// address (netpolicy.Policy.LoopbackForwards): each gets a socket,
	// ForwardSocket(f), whose connections go to f after the policy has
	// decided and the attempt is reported, like any other.
	Forwards []netpolicy.Forward
}

// Proxy serves the HTTP and SOCKS5 proxies. Close stops it.
type Proxy struct {
	opts Options
	dir  string
	lns  []net.Listener

	ctx    context.Context
	cancel context.CancelFunc

	httpSrv *http.Server
	tracker
}

// Start creates http.sock and socks.sock in dir (which must exist; stale
// sockets there are replaced) and serves them until Close. The sockets are
// made mode 0666 so the sandbox's user can connect: the directory's own
// mode and owner are what keep other host users out.
func Start(dir string, opts Options) (*Proxy, error) {
	if opts.Policy == nil {
		return nil, errors.New("netproxy: no policy")
	}
	if opts.Lookup == nil {
		opts.Lookup = netpolicy.SystemLookup
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{opts: opts, dir: dir, ctx: ctx, cancel: cancel}
	p.httpSrv = &http.Server{
		Handler: http.HandlerFunc(p.serveHTTP),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, pidKey{}, peerPID(c))
		},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	names := []string{HTTPSocket, SOCKSSocket}
	for _, f := range opts.Forwards {
		names = append(names, ForwardSocket(f))
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		os.Remove(path) // a socket left by a killed run
		ln, err := net.Listen("unix", path)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("listen %s: %w", path, err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(true)
		p.lns = append(p.lns, ln)
		if err := os.Chmod(path, 0o666); err != nil {
			p.Close()
			return nil, fmt.Errorf("chmod %s: %w", path, err)
		}
	}
	p.wg.Add(2 + len(opts.Forwards))
	go func() {
		defer p.wg.Done()
		p.httpSrv.Serve(p.lns[0])
	}()
	go p.accept(p.lns[1], p.serveSOCKS)
	for i, f := range opts.Forwards {
		go p.accept(p.lns[2+i], func(c net.Conn) { p.serveForward(c, f) })
	}
	return p, nil
}

// Dir returns the directory holding the sockets.
func (p *Proxy) Dir() string { return p.dir }

// Close stops accepting, closes every open connection and waits for the
// connection goroutines. It is idempotent.
func (p *Proxy) Close() error {
	if !p.shut() {
		return nil
	}
	p.cancel()
	p.httpSrv.Close()
	for _, ln := range p.lns {
		ln.Close()
	}
	p.wg.Wait()
	return nil
}

// accept serves ln's connections with serve, each on its own goroutine.
func (p *Proxy) accept(ln net.Listener, serve func(net.Conn)) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !p.enter() {
			c.Close()
			return
		}
		go func() {
			defer p.wg.Done()
			if p.track(c, false) {
				defer p.untrack(c)
				serve(c)
			}
		}()
	}
}

type pidKey struct{}

// open decides one attempt, connects when allowed, and reports. It returns
// the upstream connection (nil when refused or unreachable; the caller
// untracks it) and the
// attempt; err is a failed report, after which nothing may be carried out.
func (p *Proxy) open(proto, host string, port int, pid int) (net.Conn, netpolicy.Attempt, error) {
	a := netpolicy.Attempt{Time: p.opts.Now(), Proto: proto, Host: host, Port: port, PID: pid}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	d := p.opts.Policy.Check(ctx, host, port, p.opts.Lookup)
	a.Allow, a.Rule, a.Reason = d.Allow, d.Rule, d.Reason
	var up net.Conn
	if d.Allow {
		var err error
		up, err = p.dial(ctx, d.Addrs, port)
		if err != nil {
			a.Error = err.Error()
		} else {
			a.Addr = up.RemoteAddr().String()
		}
	}
	if p.opts.Report != nil {
		if err := p.opts.Report(a); err != nil {
			if up != nil {
				up.Close()
			}
			return nil, a, fmt.Errorf("record connection to %s: %w", a.Target(), err)
		}
	}
	if up != nil && !p.track(up, false) {
		return nil, a, ErrClosed
	}
	return up, a, nil
}

// dial connects to the first address that answers.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: p.opts.DialTimeout}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// peerPID returns the pid of the process at the other end of a UNIX socket
// (0 when unknown).
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// splice copies both ways until both directions end (or the proxy
// closes), passing each half-close on.
func splice(a, b net.Conn, aRead func([]byte) (int, error)) {
	done := make(chan struct{}, 2)
	cp := func(dst net.Conn, src func([]byte) (int, error)) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(b, aRead)
	cp(a, b.Read)
	<-done
}

func portOf(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return p, nil
}
