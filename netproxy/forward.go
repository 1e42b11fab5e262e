package netproxy

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/artrt/art/netpolicy"
)

// Loopback services of the host (an allow rule naming 127.0.0.1:11434,
// localhost:5432, [::1]:8080). The sandbox's loopback is its own, and
// NO_PROXY keeps programs from asking the proxy for loopback, so such a
// service is reached at its own address inside: the Bridge listens there
// and carries each connection to the Proxy's forward socket, where it is
// decided, reported and connected like any proxied connection.

const forwardPrefix, forwardSuffix = "fwd-", ".sock"

// ForwardSocket is the socket name of forward f in the Proxy's directory:
// it names the address and port the Bridge listens on inside
// (fwd-127.0.0.1-11434.sock, fwd-::1-8080.sock).
func ForwardSocket(f netpolicy.Forward) string {
	return forwardPrefix + f.Addr.String() + "-" + strconv.Itoa(f.Port) + forwardSuffix
}

// ForwardRoutes returns a route for every forward socket in dir (the
// Proxy's directory as bound in the sandbox: read-only, made by art), each
// listening at the address its name gives.
func ForwardRoutes(dir string) []Route {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Route
	for _, e := range ents {
		name := e.Name()
		body, ok := strings.CutPrefix(name, forwardPrefix)
		if !ok {
			continue
		}
		body, ok = strings.CutSuffix(body, forwardSuffix)
		i := strings.LastIndexByte(body, '-')
		if !ok || i < 0 {
			continue
		}
		addr, err := netip.ParseAddr(body[:i])
		port, perr := strconv.Atoi(body[i+1:])
		if err != nil || perr != nil || port < 1 || port > 65535 || !addr.IsLoopback() {
			continue
		}
		out = append(out, Route{Listen: netip.AddrPortFrom(addr, uint16(port)).String(), Socket: filepath.Join(dir, name)})
	}
	return out
}

// serveForward carries one connection from the Bridge to forward f.
func (p *Proxy) serveForward(c net.Conn, f netpolicy.Forward) {
	up, _, err := p.open("forward", f.Host, f.Port, peerPID(c))
	if err != nil || up == nil {
		return // refused, unreachable, or not recorded: the client sees a close
	}
	defer p.untrack(up)
	splice(c, up, c.Read)
}
