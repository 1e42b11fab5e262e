package netproxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artrt/art/netpolicy"
)

// world is a set of loopback servers, a proxy in front of them and a
// bridge in front of the proxy, as in a sandbox.
type world struct {
	a, b    *httptest.Server // plain HTTP on two ports
	tls     *httptest.Server // HTTPS; its certificate names example.com and 127.0.0.1
	portA   int
	portB   int
	portTLS int
	proxy   *Proxy
	bridge  *Bridge

	mu       sync.Mutex
	attempts []netpolicy.Attempt
	failWith error
}

func serve(t testing.TB, name string, tlsOn bool) (*httptest.Server, int) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s %s host=%s", name, r.URL.Path, r.Host)
	})
	var s *httptest.Server
	if tlsOn {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s, s.Listener.Addr().(*net.TCPAddr).Port
}

// names resolves test names to loopback and anything else with the
// host's resolver (localhost, IP literals).
func names(ctx context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "allowed.test", "other.test", "blocked.test", "example.com":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return netpolicy.SystemLookup(ctx, host)
}

// newWorld starts the servers and a proxy whose rules are made by rules
// from the servers' ports.
func newWorld(t testing.TB, rules func(w *world) (allow, deny []string)) *world {
	t.Helper()
	w := &world{}
	w.a, w.portA = serve(t, "A", false)
	w.b, w.portB = serve(t, "B", false)
	w.tls, w.portTLS = serve(t, "TLS", true)
	allow, deny := rules(w)
	pol, err := netpolicy.Parse(allow, deny, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w.proxy, err = Start(dir, Options{Policy: pol, Lookup: names, DialTimeout: 2 * time.Second, Report: func(a netpolicy.Attempt) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.failWith != nil {
			return w.failWith
		}
		w.attempts = append(w.attempts, a)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.proxy.Close() })
	w.bridge, err = StartBridge(Routes("127.0.0.1:0", "127.0.0.1:0", dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.bridge.Close() })
	return w
}

func (w *world) recorded() []netpolicy.Attempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]netpolicy.Attempt(nil), w.attempts...)
}

// client is an HTTP client using the bridge's HTTP port as its proxy and
// trusting the TLS server's certificate.
func (w *world) client() *http.Client {
	u, _ := url.Parse("http://" + w.bridge.Addr(0).String())
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(u),
		TLSClientConfig:   w.tls.Client().Transport.(*http.Transport).TLSClientConfig,
		DisableKeepAlives: true,
	}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// socks opens a SOCKS5 CONNECT to host:port through the bridge and returns
// the reply code and, on success, the tunnel.
func (w *world) socks(t testing.TB, host string, port int) (byte, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", w.bridge.Addr(1).String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}
	req = append(req, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [12]byte
	if _, err := io.ReadFull(c, rep[:12]); err != nil {
		t.Fatalf("socks reply: %v", err)
	}
	if rep[0] != 5 || rep[1] != 0 || rep[2] != 5 {
		t.Fatalf("socks reply % x", rep)
	}
	if rep[3] != 0 {
		c.Close()
		return rep[3], nil
	}
	c.SetDeadline(time.Time{})
	return 0, c
}

func TestProxy(t *testing.T) {
	w := newWorld(t, func(w *world) ([]string, []string) {
		return []string{
				"allowed.test:" + strconv.Itoa(w.portA),
				"example.com:" + strconv.Itoa(w.portTLS),
				"blocked.test:" + strconv.Itoa(w.portA),
			}, []string{
				"blocked.test",
			}
	})
	c := w.client()
	a, b, tlsPort := strconv.Itoa(w.portA), strconv.Itoa(w.portB), strconv.Itoa(w.portTLS)

	t.Run("http allowed", func(t *testing.T) {
		code, body := get(t, c, "http://allowed.test:"+a+"/x")
		if code != 200 || body != "hello from A /x host=allowed.test:"+a {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("http other port refused", func(t *testing.T) {
		if code, body := get(t, c, "http://allowed.test:"+b+"/"); code != 403 || !strings.Contains(body, "no rule allows allowed.test:"+b) {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("http unlisted host refused", func(t *testing.T) {
		if code, body := get(t, c, "http://other.test:"+a+"/"); code != 403 || strings.Contains(body, "hello") {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("deny beats allow", func(t *testing.T) {
		if code, body := get(t, c, "http://blocked.test:"+a+"/"); code != 403 || !strings.Contains(body, "denied by rule") {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("origin-form request by Host header", func(t *testing.T) {
		for _, tc := range []struct {
			host string
			want string
		}{{"allowed.test:" + a, "HTTP/1.1 200"}, {"other.test:" + a, "HTTP/1.1 403"}} {
			conn, err := net.Dial("tcp", w.bridge.Addr(0).String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET /h HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tc.host)
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if !strings.HasPrefix(line, tc.want) {
				t.Fatalf("Host %s: %q, want %s", tc.host, line, tc.want)
			}
		}
	})
	t.Run("https CONNECT allowed", func(t *testing.T) {
		code, body := get(t, c, "https://example.com:"+tlsPort+"/s")
		if code != 200 || !strings.HasPrefix(body, "hello from TLS /s") {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("https CONNECT other port refused", func(t *testing.T) {
		if code, body := get(t, c, "https://example.com:"+a+"/"); code != 0 || !strings.Contains(body, "Forbidden") {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("socks5 allowed", func(t *testing.T) {
		rep, conn := w.socks(t, "allowed.test", w.portA)
		if rep != 0 {
			t.Fatalf("reply %d", rep)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /s5 HTTP/1.0\r\nHost: allowed.test\r\n\r\n")
		data, _ := io.ReadAll(conn)
		if !strings.Contains(string(data), "hello from A /s5") {
			t.Fatalf("%q", data)
		}
	})
	t.Run("socks5 refused", func(t *testing.T) {
		for _, target := range []struct {
			host string
			port int
		}{{"allowed.test", w.portB}, {"other.test", w.portA}, {"127.0.0.1", w.portA}, {"blocked.test", w.portA}} {
			if rep, _ := w.socks(t, target.host, target.port); rep != socksNotAllowed {
				t.Fatalf("%s:%d: reply %d, want %d (not allowed)", target.host, target.port, rep, socksNotAllowed)
			}
		}
	})
	t.Run("every attempt recorded", func(t *testing.T) {
		got := map[string]int{}
		for _, at := range w.recorded() {
			got[fmt.Sprintf("%s %s:%d %v %s", at.Proto, at.Host, at.Port, at.Allow, at.Rule)]++
			if at.PID != os.Getpid() {
				t.Errorf("attempt %+v: pid %d, want the bridge's (%d)", at, at.PID, os.Getpid())
			}
			if at.Allow && (at.Addr != "127.0.0.1:"+strconv.Itoa(at.Port) || at.Error != "") {
				t.Errorf("allowed attempt %+v: addr %q error %q", at, at.Addr, at.Error)
			}
			if !at.Allow && at.Reason == "" {
				t.Errorf("denied attempt %+v without a reason", at)
			}
			if at.Time.IsZero() {
				t.Errorf("attempt %+v without a time", at)
			}
		}
		want := map[string]int{
			"http allowed.test:" + a + " true allowed.test:" + a:              2,
			"http allowed.test:" + b + " false ":                              1,
			"http other.test:" + a + " false ":                                2,
			"http blocked.test:" + a + " false blocked.test":                  1,
			"connect example.com:" + tlsPort + " true example.com:" + tlsPort: 1,
			"connect example.com:" + a + " false ":                            1,
			"socks5 allowed.test:" + a + " true allowed.test:" + a:            1,
			"socks5 allowed.test:" + b + " false ":                            1,
			"socks5 other.test:" + a + " false ":                              1,
			"socks5 127.0.0.1:" + a + " false ":                               1,
			"socks5 blocked.test:" + a + " false blocked.test":                1,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("recorded:\n%v\nwant:\n%v", got, want)
		}
	})
}

func TestLoopbackNameNeedsRuleWithPort(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want int
	}{
		{"localhost", 403},
		{"*:%d", 403},
		{"localhost:%d", 200},
	} {
		w := newWorld(t, func(w *world) ([]string, []string) {
			if strings.Contains(tc.rule, "%d") {
				return []string{fmt.Sprintf(tc.rule, w.portA)}, nil
			}
			return []string{tc.rule}, nil
		})
		code, body := get(t, w.client(), "http://localhost:"+strconv.Itoa(w.portA)+"/")
		if code != tc.want {
			t.Errorf("--allow %s: localhost: %d %q, want %d", tc.rule, code, body, tc.want)
		}
		if tc.want == 403 && !strings.Contains(body, "loopback address") {
			t.Errorf("--allow %s: reason %q does not say loopback", tc.rule, body)
		}
	}
}

func TestUnrecordableAttemptIsRefused(t *testing.T) {
	w := newWorld(t, func(w *world) ([]string, []string) {
		return []string{"allowed.test:" + strconv.Itoa(w.portA)}, nil
	})
	w.failWith = errors.New("journal full")
	if code, body := get(t, w.client(), "http://allowed.test:"+strconv.Itoa(w.portA)+"/"); code != 503 || strings.Contains(body, "hello") {
		t.Fatalf("%d %q: an attempt that could not be recorded went ahead", code, body)
	}
	if rep, _ := w.socks(t, "allowed.test", w.portA); rep != socksFailure {
		t.Fatalf("socks reply %d, want general failure", rep)
	}
}

func TestCloseEndsOpenTunnels(t *testing.T) {
	w := newWorld(t, func(w *world) ([]string, []string) {
		return []string{"allowed.test:" + strconv.Itoa(w.portA)}, nil
	})
	rep, conn := w.socks(t, "allowed.test", w.portA)
	if rep != 0 {
		t.Fatalf("reply %d", rep)
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() { w.proxy.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a tunnel open")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("tunnel not closed: %v", err)
	}
	if err := w.proxy.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestEnv(t *testing.T) {
	env := strings.Join(Env("127.0.0.1:3128", "127.0.0.1:1080"), "\n")
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:1080", "no_proxy=localhost,127.0.0.1,::1"} {
		if !strings.Contains(env, want) {
			t.Errorf("Env lacks %s:\n%s", want, env)
		}
	}
}
