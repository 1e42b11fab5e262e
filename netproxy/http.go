package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"

	"github.com/artrt/art/netpolicy"
	"strings"
	"sync/atomic"
)

// serveHTTP handles one request on http.sock: CONNECT tunnels, anything
// else is forwarded to a plain-HTTP origin.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		http.Error(w, "art: proxy closing", http.StatusServiceUnavailable)
		return
	}
	defer p.wg.Done()
	pid, _ := r.Context().Value(pidKey{}).(int)
	if r.Method == http.MethodConnect {
		p.connect(w, r, pid)
		return
	}
	host, port, err := forwardTarget(r)
	if err != nil {
		http.Error(w, "art: "+err.Error(), http.StatusBadRequest)
		return
	}
	up, a, err := p.open("http", host, port, pid)
	if !p.proceed(w, up, a, err) {
		return
	}
	defer p.untrack(up)
	var used atomic.Bool
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort(host, fmt.Sprint(port))
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del("Proxy-Connection")
			pr.Out.Header.Del("Proxy-Authorization")
		},
		// One request, one upstream connection: the one the policy
		// decided on, never a pooled or redialled one.
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(_ context.Context, _, _ string) (net.Conn, error) {
				if used.Swap(true) {
					return nil, errors.New("one connection per request")
				}
				return up, nil
			},
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "art: upstream: "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// forwardTarget is the origin of a plain-HTTP proxy request: its absolute
// URI, or else its Host header; port 80 unless given.
func forwardTarget(r *http.Request) (string, int, error) {
	hostport := r.Host
	if r.URL.IsAbs() {
		if r.URL.Scheme != "http" {
			return "", 0, fmt.Errorf("only http:// URLs are forwarded; use CONNECT for %s", r.URL.Scheme)
		}
		hostport = r.URL.Host
	}
	if hostport == "" {
		return "", 0, errors.New("request names no host")
	}
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		host, ps = strings.Trim(hostport, "[]"), "80"
	}
	port, err := portOf(ps)
	return host, port, err
}

// connect opens a CONNECT tunnel.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, pid int) {
	host, ps, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, "art: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	port, err := portOf(ps)
	if err != nil {
		http.Error(w, "art: "+err.Error(), http.StatusBadRequest)
		return
	}
	up, a, err := p.open("connect", host, port, pid)
	if !p.proceed(w, up, a, err) {
		return
	}
	defer p.untrack(up)
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "art: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	if !p.track(c, false) {
		return
	}
	defer p.untrack(c)
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// Bytes the client sent after the request are in rw's buffer.
	splice(c, up, rw.Reader.Read)
}

// proceed answers a request that cannot go ahead and reports false; true
// means up is open and the caller carries on.
func (p *Proxy) proceed(w http.ResponseWriter, up net.Conn, a netpolicy.Attempt, err error) bool {
	switch {
	case err != nil:
		http.Error(w, "art: "+err.Error(), http.StatusServiceUnavailable)
		return false
	case !a.Allow:
		w.Header().Set("X-Art-Denied", "1")
		http.Error(w, fmt.Sprintf("art: connection to %s denied: %s", a.Target(), a.Reason), http.StatusForbidden)
		return false
	case up == nil:
		http.Error(w, fmt.Sprintf("art: connect to %s: %s", a.Target(), a.Error), http.StatusBadGateway)
		return false
	}
	return true
}
