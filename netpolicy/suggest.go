package netpolicy

import (
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Attempt is the record of one connection attempt through art's proxy:
// what was asked for, what the policy decided, and what happened. Its JSON
// form is stored in the journal (docs/network.md) and only grows.
type Attempt struct {
	Time   time.Time `json:"time"`
	Proto  string    `json:"proto"` // "http" (plain, by URI or Host), "connect" (HTTP CONNECT), "socks5"
	Host   string    `json:"host"`  // as the client asked: a name or an IP address
	Port   int       `json:"port"`
	Allow  bool      `json:"allow"`
	Rule   string    `json:"rule,omitempty"`   // the rule that decided, as written
	Reason string    `json:"reason,omitempty"` // why, in words
	Addr   string    `json:"addr,omitempty"`   // allowed: the address connected to
	Error  string    `json:"error,omitempty"`  // allowed, but connecting failed
	PID    int       `json:"pid,omitempty"`    // the proxy client's pid on the host (SO_PEERCRED): the in-sandbox bridge
}

// Target is host:port as one string.
func (a Attempt) Target() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// Suggested is one proposed allow entry and the attempts behind it.
type Suggested struct {
	Entry    string `json:"entry"` // HOST:PORT, ready for --allow
	Domain   string `json:"domain"`
	Attempts int    `json:"attempts"`
	Allowed  int    `json:"allowed"`
	Denied   int    `json:"denied"`
	Reason   string `json:"reason,omitempty"` // the last denial's reason
}

// Wildcard proposes one *.DOMAIN:PORT entry for several names seen below it.
type Wildcard struct {
	Entry string   `json:"entry"`
	Names []string `json:"names"`
}

// Suggestion is an allow-list proposed from recorded attempts.
type Suggestion struct {
	Allow      []Suggested `json:"allow"`       // every target reached or refused for want of a rule
	Wildcards  []Wildcard  `json:"wildcards"`   // alternatives where 3+ names share a domain and port
	KeptDenied []Suggested `json:"kept_denied"` // refused by a deny rule: not proposed
}

// Config returns the suggestion as a config file "net" section.
func (s Suggestion) Config() Config {
	c := Config{Mode: "allow", Allow: []string{}}
	for _, a := range s.Allow {
		c.Allow = append(c.Allow, a.Entry)
	}
	return c
}

// Suggest proposes the narrowest allow-list that would have let every
// attempt through: one HOST:PORT entry per target, grouped by domain, with
// the port always given (a private address needs it, and it keeps the list
// tight). Targets a deny rule refused are reported apart and not proposed.
func Suggest(attempts []Attempt) Suggestion {
	byTarget := map[string]*Suggested{}
	kept := map[string]*Suggested{}
	for _, a := range attempts {
		host := strings.TrimSuffix(strings.ToLower(a.Host), ".")
		if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			host = ip.Unmap().String()
		}
		entry := net.JoinHostPort(host, strconv.Itoa(a.Port))
		m := byTarget
		if !a.Allow && a.Rule != "" {
			m = kept
		}
		s := m[entry]
		if s == nil {
			s = &Suggested{Entry: entry, Domain: domainOf(host)}
			m[entry] = s
		}
		s.Attempts++
		if a.Allow {
			s.Allowed++
		} else {
			s.Denied++
			s.Reason = a.Reason
		}
	}
	out := Suggestion{Allow: sorted(byTarget), KeptDenied: sorted(kept), Wildcards: []Wildcard{}}
	groups := map[string][]string{}
	for _, s := range out.Allow {
		host, port, _ := net.SplitHostPort(s.Entry)
		if _, err := netip.ParseAddr(host); err == nil || host == s.Domain {
			continue
		}
		k := "*." + s.Domain + ":" + port
		groups[k] = append(groups[k], host)
	}
	for k, names := range groups {
		if len(names) >= 3 {
			out.Wildcards = append(out.Wildcards, Wildcard{Entry: k, Names: names})
		}
	}
	sort.Slice(out.Wildcards, func(i, j int) bool { return out.Wildcards[i].Entry < out.Wildcards[j].Entry })
	return out
}

func sorted(m map[string]*Suggested) []Suggested {
	out := make([]Suggested, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Domain != out[j].Domain {
			return out[i].Domain < out[j].Domain
		}
		return out[i].Entry < out[j].Entry
	})
	return out
}

// domainOf groups a host under its last two labels (an IP address is its
// own group). Without a public-suffix list, example.co.uk groups under
// co.uk; the grouping is for reading, and entries stay exact.
func domainOf(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	labels := strings.Split(host, ".")
	if len(labels) <= 2 {
		return host
	}
	return strings.Join(labels[len(labels)-2:], ".")
}
