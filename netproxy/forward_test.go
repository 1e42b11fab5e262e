package netproxy

import (
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artrt/art/netpolicy"
)

// A host loopback service named exactly by an allow rule is reached
// through its forward socket; each connection is decided and reported
// (proto "forward"), and a deny rule for the same port wins.
func TestForwardToHostLoopback(t *testing.T) {
	_, port := serve(t, "model", false)
	for _, tc := range []struct {
		name  string
		deny  []string
		allow bool
	}{
		{"allowed", nil, true},
		{"deny wins", []string{"127.0.0.1:" + strconv.Itoa(port)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := netpolicy.Parse([]string{"127.0.0.1:" + strconv.Itoa(port)}, tc.deny, "")
			if err != nil {
				t.Fatal(err)
			}
			fw := pol.LoopbackForwards()
			if len(fw) != 1 {
				t.Fatalf("forwards: %v", fw)
			}
			var mu sync.Mutex
			var attempts []netpolicy.Attempt
			dir := t.TempDir()
			p, err := Start(dir, Options{Policy: pol, Forwards: fw, DialTimeout: 2 * time.Second, Report: func(a netpolicy.Attempt) error {
				mu.Lock()
				defer mu.Unlock()
				attempts = append(attempts, a)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			routes := ForwardRoutes(dir)
			if len(routes) != 1 || routes[0].Listen != "127.0.0.1:"+strconv.Itoa(port) {
				t.Fatalf("routes from %s: %+v", dir, routes)
			}
			// In the sandbox the bridge listens at the service's own
			// address; here the service holds it, so dial the socket.
			c, err := net.Dial("unix", routes[0].Socket)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "GET /v1 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
			body, _ := io.ReadAll(c)
			got := strings.Contains(string(body), "hello from model /v1")
			if got != tc.allow {
				t.Errorf("response %q, want served=%v", body, tc.allow)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(attempts) != 1 || attempts[0].Proto != "forward" || attempts[0].Allow != tc.allow || attempts[0].Port != port {
				t.Errorf("reported %+v", attempts)
			}
		})
	}
}

// ForwardRoutes takes only well-formed loopback names from the directory.
func TestForwardRoutesNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fwd-127.0.0.1-11434.sock", "fwd-::1-8080.sock", "fwd-8.8.8.8-53.sock",
		"fwd-127.0.0.1-0.sock", "fwd-127.0.0.1-70000.sock", "fwd-garbage.sock", "http.sock", "fwd-127.0.0.2-5.txt"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	var got []string
	for _, r := range ForwardRoutes(dir) {
		got = append(got, r.Listen+" "+filepath.Base(r.Socket))
	}
	sort.Strings(got)
	want := []string{"127.0.0.1:11434 fwd-127.0.0.1-11434.sock", "[::1]:8080 fwd-::1-8080.sock"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ForwardRoutes = %v, want %v", got, want)
	}
	if ForwardSocket(netpolicy.Forward{Host: "localhost", Addr: netip.AddrFrom4([4]byte{127, 0, 0, 1}), Port: 5432}) != "fwd-127.0.0.1-5432.sock" {
		t.Error("ForwardSocket name")
	}
}
