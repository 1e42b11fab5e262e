package netproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRequest measures one plain-HTTP request on a new connection,
// direct and through bridge and proxy (decision, report, dial included).
func BenchmarkRequest(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	w := newWorld(b, func(*world) ([]string, []string) { return []string{"allowed.test:" + port}, nil })
	proxied := w.client()
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct {
		name string
		c    *http.Client
		url  string
	}{{"direct", direct, srv.URL}, {"proxy", proxied, "http://allowed.test:" + port}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				resp, err := tc.c.Get(tc.url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkTunnel measures bulk throughput through a SOCKS5 tunnel.
func BenchmarkTunnel(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	w := newWorld(b, func(*world) ([]string, []string) { return []string{"allowed.test:" + strconv.Itoa(port)}, nil })
	rep, c := w.socks(b, "allowed.test", port)
	if rep != 0 {
		b.Fatalf("reply %d", rep)
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}
