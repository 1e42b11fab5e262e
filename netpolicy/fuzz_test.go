package netpolicy

import (
	"context"
	"net/netip"
	"testing"
)

// FuzzParseRule: any input either fails with ErrBadRule or yields a rule
// that parses again to the same rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "*", "10.0.0.0/8:22", "[::1]:80", "2001:db8::/32", "a:b", "[x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s, false)
		if err != nil {
			return
		}
		r2, err := ParseRule(r.Text, false)
		if err != nil || r2 != r {
			t.Fatalf("%q: %+v, then %+v, %v", s, r, r2, err)
		}
		if !r.Any && r.Name == "" && !r.Prefix.IsValid() {
			t.Fatalf("%q: a rule matching nothing: %+v", s, r)
		}
	})
}

// FuzzCheckSpecial: under "--allow '*'", no loopback, private or
// link-local address is ever allowed, however it is written.
func FuzzCheckSpecial(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1", "10.1.1.1", "[fe80::1]", "0.0.0.0", "0x7f.1", "169.254.169.254", "LOCALHOST", "1.1.1.1"} {
		f.Add(s, uint16(80))
	}
	p, _ := Parse([]string{"*"}, nil, "")
	// Every name resolves to loopback: only an explicit rule may allow it.
	lookup := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	f.Fuzz(func(t *testing.T, host string, port uint16) {
		d := p.Check(context.Background(), host, int(port), lookup)
		if !d.Allow {
			return
		}
		for _, a := range d.Addrs {
			if specialClass(a) != "" {
				t.Fatalf("%q:%d allowed to %s by %q", host, port, a, d.Rule)
			}
		}
		if len(d.Addrs) == 0 {
			t.Fatalf("%q:%d allowed with no address", host, port)
		}
	})
}
