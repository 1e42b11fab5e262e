package netproxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 constants (RFC 1928).
const (
	socksVersion     = 5
	socksNoAuth      = 0x00
	socksNoMethod    = 0xff
	socksCmdConnect  = 1
	socksAtypIPv4    = 1
	socksAtypDomain  = 3
	socksAtypIPv6    = 4
	socksOK          = 0
	socksFailure     = 1
	socksNotAllowed  = 2
	socksHostUnreach = 4
	socksCmdUnsupp   = 7
	socksAtypUnsupp  = 8
)

// serveSOCKS handles one SOCKS5 client: greeting, one CONNECT, then the
// tunnel.
func (p *Proxy) serveSOCKS(c net.Conn) {
	c.SetDeadline(time.Now().Add(30 * time.Second)) // the handshake only
	br := bufio.NewReader(c)
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != socksVersion {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	method := byte(socksNoMethod)
	for _, m := range methods {
		if m == socksNoAuth {
			method = socksNoAuth
		}
	}
	if _, err := c.Write([]byte{socksVersion, method}); err != nil || method != socksNoAuth {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != socksVersion {
		return
	}
	var host string
	switch req[3] {
	case socksAtypIPv4, socksAtypIPv6:
		b := make([]byte, 4)
		if req[3] == socksAtypIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, socksAtypUnsupp)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return
	}
	if req[1] != socksCmdConnect {
		socksReply(c, socksCmdUnsupp)
		return
	}
	c.SetDeadline(time.Time{})
	up, a, err := p.open("socks5", host, int(binary.BigEndian.Uint16(pb[:])), peerPID(c))
	switch {
	case err != nil:
		socksReply(c, socksFailure)
		return
	case !a.Allow:
		socksReply(c, socksNotAllowed)
		return
	case up == nil:
		socksReply(c, socksHostUnreach)
		return
	}
	defer p.untrack(up)
	if socksReply(c, socksOK) != nil {
		return
	}
	splice(c, up, br.Read)
}

// socksReply answers a request; the bound address is not meaningful for a
// proxied connection and is sent as 0.0.0.0:0.
func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
