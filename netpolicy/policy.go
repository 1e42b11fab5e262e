// Package netpolicy decides which network connections a sandboxed agent may
// make in art's "--net allow" mode.
//
// A Policy is a list of allow and deny rules, each HOST[:PORT] where HOST is
// a name (api.example.com), a wildcard (*.example.com: any name below
// example.com, not example.com itself), "*" (any host), an IP address or a
// CIDR prefix; without a port a rule covers every port. Deny rules win over
// allow rules; what no allow rule covers is denied.
//
// Names are resolved on the host (by the proxy, through Check), never in the
// sandbox. A connection whose address is loopback, private, link-local,
// unspecified, multicast or shared (CGNAT) is refused unless a rule names that
// host or address explicitly, with the port: "--allow db.internal:5432" or
// "--allow 10.1.2.3:5432" or "--allow 10.0.0.0/8:5432", but not
// "--allow '*'", "--allow '*.internal'", "--allow 0.0.0.0/0:443" or
// "--allow db.internal". A name with several addresses is refused when any
// of them is refused, so a DNS answer cannot smuggle an internal address in
// beside a public one.
//
// The package is a leaf: it imports no other art package but
// internal/errclass (the error classes). Its types are
// safe for concurrent use once built.
package netpolicy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one parsed --allow or --deny entry.
type Rule struct {
	Text   string       // as written, for reports
	Deny   bool         // a deny rule
	Name   string       // lowercased host name without a trailing dot; "" for IP rules
	Suffix bool         // Name is a wildcard: it matches names ending in "."+Name
	Any    bool         // "*": every host
	Prefix netip.Prefix // IP and CIDR rules (an address is a full-length prefix)
	Port   int          // 0: any port
	Source string       // where the rule came from ("--allow", a config file path)
}

// String returns the rule as written.
func (r Rule) String() string { return r.Text }

// ParseRule parses one HOST[:PORT] entry. IPv6 addresses with a port are
// written in brackets: [2001:db8::1]:443, [2001:db8::/32]:443.
func ParseRule(text string, deny bool) (Rule, error) {
	r := Rule{Text: text, Deny: deny}
	s := strings.TrimSpace(text)
	if s == "" {
		return r, fmt.Errorf("%w: empty entry", ErrBadRule)
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return r, fmt.Errorf("%w %q: %v", ErrBadRule, text, err)
	}
	r.Port = port
	switch {
	case host == "*":
		r.Any = true
	case strings.Contains(host, "/"):
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return r, fmt.Errorf("%w %q: %v", ErrBadRule, text, err)
		}
		if p.Addr().Zone() != "" {
			return r, fmt.Errorf("%w %q: zones are not supported", ErrBadRule, text)
		}
		r.Prefix = p.Masked()
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			if a.Zone() != "" {
				return r, fmt.Errorf("%w %q: zones are not supported", ErrBadRule, text)
			}
			a = a.Unmap()
			r.Prefix = netip.PrefixFrom(a, a.BitLen())
			break
		}
		name, suffix := host, false
		if strings.HasPrefix(name, "*.") {
			name, suffix = name[2:], true
		}
		name = strings.TrimSuffix(strings.ToLower(name), ".")
		if err := checkName(name); err != nil {
			return r, fmt.Errorf("%w %q: %v", ErrBadRule, text, err)
		}
		r.Name, r.Suffix = name, suffix
	}
	return r, nil
}

// splitHostPort splits HOST[:PORT], where HOST may be a bracketed IPv6
// address or prefix, or a bare IPv6 address or prefix (then without port).
func splitHostPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("missing ]")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if rest[0] != ':' {
			return "", 0, fmt.Errorf("unexpected %q after ]", rest)
		}
		p, err := parsePort(rest[1:])
		return host, p, err
	}
	if strings.Count(s, ":") > 1 { // bare IPv6: no port
		return s, 0, nil
	}
	host, ps, ok := strings.Cut(s, ":")
	if !ok {
		return host, 0, nil
	}
	p, err := parsePort(ps)
	return host, p, err
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || s[0] == '+' {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return p, nil
}

// checkName accepts DNS names: dot-separated labels of letters, digits,
// '-' and '_', each 1-63 bytes, 253 bytes in all.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("host name must be 1 to 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("empty or over-long label in %q", name)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q not allowed in a host name (wildcards only as a leading \"*.\")", c)
			}
		}
	}
	return nil
}

// Policy is an ordered set of rules. The zero Policy denies everything.
type Policy struct {
	rules []Rule
}

// New builds a policy from parsed rules.
func New(rules ...Rule) *Policy { return &Policy{rules: append([]Rule(nil), rules...)} }

// Parse builds a policy from --allow and --deny entries, reporting the
// first entry that does not parse. source names where they came from.
func Parse(allow, deny []string, source string) (*Policy, error) {
	p := &Policy{}
	for _, list := range []struct {
		entries []string
		deny    bool
	}{{allow, false}, {deny, true}} {
		for _, s := range list.entries {
			r, err := ParseRule(s, list.deny)
			if err != nil {
				if source != "" {
					return nil, fmt.Errorf("%s: %w", source, err)
				}
				return nil, err
			}
			r.Source = source
			p.rules = append(p.rules, r)
		}
	}
	return p, nil
}

// Merge returns a policy with the rules of p followed by those of q.
func (p *Policy) Merge(q *Policy) *Policy {
	out := &Policy{rules: append([]Rule(nil), p.rules...)}
	if q != nil {
		out.rules = append(out.rules, q.rules...)
	}
	return out
}

// Rules returns the rules in order.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// Decision is the outcome of checking one connection.
type Decision struct {
	Allow  bool
	Rule   string       // the rule that decided, as written; "" when no rule matched
	Reason string       // why, in words
	Addrs  []netip.Addr // allowed: the addresses to connect to, in resolver order
}

// Lookup resolves a host name to its addresses.
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

// SystemLookup resolves with the host's resolver.
func SystemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Check decides whether a connection to host:port may be made, resolving
// host with lookup when it is a name. A failed lookup is a denial.
func (p *Policy) Check(ctx context.Context, host string, port int, lookup Lookup) Decision {
	if port < 1 || port > 65535 {
		return Decision{Reason: fmt.Sprintf("port %d out of range", port)}
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if a.Zone() != "" {
			return Decision{Reason: "addresses with a zone are refused"}
		}
		return p.checkAddrs("", port, []netip.Addr{a.Unmap()})
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if err := checkName(name); err != nil {
		return Decision{Reason: "not a valid host name: " + err.Error()}
	}
	// The name first: a name no rule allows is never resolved, so the
	// agent cannot use the host's resolver as a channel.
	if r, ok := p.match(func(r *Rule) bool { return r.Deny && r.matchName(name, port) }); ok {
		return Decision{Rule: r.Text, Reason: "denied by rule"}
	}
	if _, ok := p.match(func(r *Rule) bool { return !r.Deny && (r.matchName(name, port) || r.Any && r.matchPort(port)) }); !ok {
		return Decision{Reason: "no rule allows " + net.JoinHostPort(name, strconv.Itoa(port))}
	}
	addrs, err := lookup(ctx, name)
	if err != nil {
		return Decision{Reason: "resolve: " + err.Error()}
	}
	if len(addrs) == 0 {
		return Decision{Reason: "resolve: no addresses"}
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap().WithZone("")
	}
	return p.checkAddrs(name, port, addrs)
}

// checkAddrs decides for the addresses of name (or of an IP literal when
// name is ""): every one must pass.
func (p *Policy) checkAddrs(name string, port int, addrs []netip.Addr) Decision {
	var decided Rule
	for _, a := range addrs {
		if r, ok := p.match(func(r *Rule) bool { return r.Deny && (r.matchAddr(a, port) || r.Any && r.matchPort(port)) }); ok {
			return Decision{Rule: r.Text, Reason: "denied by rule (address " + a.String() + ")"}
		}
		if class := specialClass(a); class != "" {
			r, ok := p.match(func(r *Rule) bool {
				return !r.Deny && r.Port == port && (name != "" && !r.Suffix && r.Name == name || r.Prefix.IsValid() && r.Prefix.Bits() > 0 && r.Prefix.Contains(a))
			})
			if !ok {
				what := "address"
				if name != "" {
					what = name + " resolves to"
				}
				return Decision{Reason: fmt.Sprintf("%s %s %s, which needs a rule naming it with port %d", what, class, a, port)}
			}
			decided = r
			continue
		}
		r, ok := p.match(func(r *Rule) bool {
			return !r.Deny && (name != "" && r.matchName(name, port) || r.matchAddr(a, port) || r.Any && r.matchPort(port))
		})
		if !ok {
			return Decision{Reason: "no rule allows " + net.JoinHostPort(a.String(), strconv.Itoa(port))}
		}
		if decided.Text == "" {
			decided = r
		}
	}
	return Decision{Allow: true, Rule: decided.Text, Reason: "allowed by rule", Addrs: addrs}
}

// match returns the first rule satisfying f.
func (p *Policy) match(f func(*Rule) bool) (Rule, bool) {
	for i := range p.rules {
		if f(&p.rules[i]) {
			return p.rules[i], true
		}
	}
	return Rule{}, false
}

func (r *Rule) matchPort(port int) bool { return r.Port == 0 || r.Port == port }

func (r *Rule) matchName(name string, port int) bool {
	if r.Name == "" || !r.matchPort(port) {
		return false
	}
	if r.Suffix {
		return strings.HasSuffix(name, "."+r.Name)
	}
	return name == r.Name
}

func (r *Rule) matchAddr(a netip.Addr, port int) bool {
	return r.Prefix.IsValid() && r.matchPort(port) && r.Prefix.Contains(a)
}

var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8") // connecting to 0.x reaches the local host
	benchmark = netip.MustParsePrefix("198.18.0.0/15")
)

// specialClass names the class of an address that must be allowed
// explicitly, or returns "" for an ordinary public unicast address.
func specialClass(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback address"
	case a.IsPrivate():
		return "private address"
	case a.IsLinkLocalUnicast():
		return "link-local address"
	case a.IsUnspecified(), thisNet.Contains(a):
		return "unspecified address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast address"
	case cgnat.Contains(a):
		return "shared (CGNAT) address"
	case benchmark.Contains(a):
		return "benchmarking address"
	case a.Is4() && a.As4()[0] >= 240:
		return "reserved address"
	}
	return ""
}

// Forward is a service on the host's loopback that an allow rule names
// exactly, address (or localhost) and port: the sandbox, whose loopback is
// its own, reaches it at the same address through art's proxy.
type Forward struct {
	Host string     // as the rule names it: "localhost" or the address
	Addr netip.Addr // where the sandbox reaches it (127.0.0.1 for localhost)
	Port int
}

// LoopbackForwards lists the loopback services the allow rules name
// exactly - 127.0.0.0/8 or ::1 addresses and localhost, each with a port
// - once each, in rule order. Wider rules (a CIDR, a wildcard, no port)
// forward nothing: every other loopback port stays the sandbox's own.
// Whether a connection may go through is still decided per connection by
// Check, so a deny rule wins as everywhere.
func (p *Policy) LoopbackForwards() []Forward {
	var out []Forward
	seen := map[Forward]bool{}
	for _, r := range p.rules {
		if r.Deny || r.Port == 0 || r.Any || r.Suffix {
			continue
		}
		var f Forward
		switch {
		case r.Name == "localhost":
			f = Forward{Host: "localhost", Addr: netip.AddrFrom4([4]byte{127, 0, 0, 1}), Port: r.Port}
		case r.Name == "" && r.Prefix.IsSingleIP() && r.Prefix.Addr().IsLoopback():
			f = Forward{Host: r.Prefix.Addr().String(), Addr: r.Prefix.Addr(), Port: r.Port}
		default:
			continue
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}
