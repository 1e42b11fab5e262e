package netpolicy

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// hosts is a resolver over a fixed table, so decisions about names do not
// depend on the machine's DNS.
func hosts(t map[string][]string) Lookup {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range t[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if out == nil {
			return nil, errors.New("no such host")
		}
		return out, nil
	}
}

var table = hosts(map[string][]string{
	"api.example.com":    {"93.184.216.34"},
	"cdn.example.com":    {"93.184.216.35"},
	"example.com":        {"93.184.216.36"},
	"db.internal":        {"10.1.2.3"},
	"sneaky.example.com": {"93.184.216.37", "127.0.0.1"},
	"meta.example.com":   {"169.254.169.254"},
	"v6.example.com":     {"::ffff:10.0.0.9"},
	"other.org":          {"198.51.100.7"},
})

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		allow, deny []string
		host        string
		port        int
		want        bool
		rule        string
		reason      string // substring
	}{
		{[]string{"api.example.com:443"}, nil, "api.example.com", 443, true, "api.example.com:443", ""},
		{[]string{"api.example.com:443"}, nil, "api.example.com", 80, false, "", "no rule allows"},
		{[]string{"api.example.com:443"}, nil, "API.Example.COM.", 443, true, "api.example.com:443", ""},
		{[]string{"api.example.com"}, nil, "api.example.com", 8080, true, "api.example.com", ""},
		{[]string{"*.example.com"}, nil, "cdn.example.com", 443, true, "*.example.com", ""},
		{[]string{"*.example.com"}, nil, "example.com", 443, false, "", "no rule allows"},
		{[]string{"*.example.com"}, []string{"cdn.example.com"}, "cdn.example.com", 443, false, "cdn.example.com", "denied"},
		{[]string{"*"}, []string{"93.184.216.0/24:443"}, "api.example.com", 443, false, "93.184.216.0/24:443", "denied by rule (address"},
		{[]string{"*"}, []string{"93.184.216.0/24:443"}, "api.example.com", 80, true, "*", ""},
		{[]string{"*"}, nil, "other.org", 22, true, "*", ""},
		{nil, nil, "other.org", 443, false, "", "no rule"},
		// Private, loopback, link-local: only with an explicit rule and port.
		{[]string{"db.internal"}, nil, "db.internal", 5432, false, "", "private address 10.1.2.3"},
		{[]string{"db.internal:5432"}, nil, "db.internal", 5432, true, "db.internal:5432", ""},
		{[]string{"*.internal:5432"}, nil, "db.internal", 5432, false, "", "needs a rule naming it"},
		{[]string{"10.0.0.0/8:5432"}, nil, "10.1.2.3", 5432, true, "10.0.0.0/8:5432", ""},
		{[]string{"10.0.0.0/8"}, nil, "10.1.2.3", 5432, false, "", "private address"},
		{[]string{"0.0.0.0/0:443"}, nil, "127.0.0.1", 443, false, "", "loopback"},
		{[]string{"0.0.0.0/0:443"}, nil, "8.8.8.8", 443, true, "0.0.0.0/0:443", ""},
		{[]string{"*"}, nil, "meta.example.com", 80, false, "", "link-local"},
		{[]string{"*"}, nil, "sneaky.example.com", 443, false, "", "loopback address 127.0.0.1"},
		{[]string{"*"}, nil, "v6.example.com", 443, false, "", "private address 10.0.0.9"},
		{[]string{"*"}, nil, "0.0.0.0", 80, false, "", "unspecified"},
		{[]string{"*"}, nil, "::1", 80, false, "", "loopback"},
		{[]string{"[::1]:80"}, nil, "::1", 80, true, "[::1]:80", ""},
		{[]string{"*"}, nil, "100.64.1.1", 80, false, "", "CGNAT"},
		{[]string{"*"}, nil, "nosuch.example.com", 80, false, "", "resolve"},
		{[]string{"*"}, nil, "bad_host!", 80, false, "", "not a valid host name"},
		{[]string{"*"}, nil, "other.org", 0, false, "", "out of range"},
		// A name is never resolved unless some rule allows it.
		{[]string{"93.184.216.34"}, nil, "api.example.com", 443, false, "", "no rule allows api.example.com:443"},
	} {
		p, err := Parse(tc.allow, tc.deny, "")
		if err != nil {
			t.Fatal(err)
		}
		d := p.Check(context.Background(), tc.host, tc.port, table)
		if d.Allow != tc.want || d.Rule != tc.rule || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("allow %q deny %q: %s:%d = %+v, want allow=%v rule %q reason ~%q", tc.allow, tc.deny, tc.host, tc.port, d, tc.want, tc.rule, tc.reason)
		}
		if d.Allow && len(d.Addrs) == 0 {
			t.Errorf("%s:%d allowed without addresses", tc.host, tc.port)
		}
	}
}

func TestCheckDoesNotResolveUnlistedNames(t *testing.T) {
	p, _ := Parse([]string{"api.example.com:443"}, nil, "")
	called := false
	p.Check(context.Background(), "exfil-data.attacker.org", 443, func(context.Context, string) ([]netip.Addr, error) {
		called = true
		return nil, errors.New("no")
	})
	if called {
		t.Fatal("a name no rule allows was resolved: DNS would leak it")
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" = error expected
	}{
		{"example.com", "name=example.com port=0"},
		{"Example.COM.:443", "name=example.com port=443"},
		{"*.example.com:8443", "*name=example.com port=8443"},
		{"*", "any port=0"},
		{"*:443", "any port=443"},
		{"10.0.0.0/8", "prefix=10.0.0.0/8 port=0"},
		{"10.1.2.3/8:22", "prefix=10.0.0.0/8 port=22"},
		{"192.0.2.1:80", "prefix=192.0.2.1/32 port=80"},
		{"2001:db8::1", "prefix=2001:db8::1/128 port=0"},
		{"[2001:db8::1]:443", "prefix=2001:db8::1/128 port=443"},
		{"[2001:db8::/32]:443", "prefix=2001:db8::/32 port=443"},
		{"", ""},
		{"example.com:0", ""},
		{"example.com:65536", ""},
		{"example.com:https", ""},
		{"example.com:+80", ""},
		{"ex*ample.com", ""},
		{"*example.com", ""},
		{"a..b", ""},
		{"10.0.0.0/33", ""},
		{"[::1", ""},
		{"[::1]x", ""},
		{"fe80::1%eth0", ""},
	} {
		r, err := ParseRule(tc.in, false)
		if tc.want == "" {
			if err == nil || !errors.Is(err, ErrBadRule) {
				t.Errorf("ParseRule(%q) = %+v, %v; want ErrBadRule", tc.in, r, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		var got string
		switch {
		case r.Any:
			got = "any"
		case r.Name != "":
			got = "name=" + r.Name
			if r.Suffix {
				got = "*" + got
			}
		default:
			got = "prefix=" + r.Prefix.String()
		}
		got += " port=" + strconv.Itoa(r.Port)
		if got != tc.want {
			t.Errorf("ParseRule(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseNamesTheEntry(t *testing.T) {
	_, err := Parse([]string{"ok.com", "bad:port"}, nil, "/home/u/.config/art/config.json")
	if err == nil || !strings.Contains(err.Error(), `"bad:port"`) || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("err = %v, want the entry and the file named", err)
	}
}

func TestLoopbackForwards(t *testing.T) {
	p, err := Parse([]string{"127.0.0.1:11434", "localhost:5432", "[::1]:8080", "127.0.0.0/8:9000", "127.0.0.1",
		"*.example.com:443", "127.0.0.1:11434", "10.0.0.1:80", "example.com:443"}, []string{"127.0.0.1:22"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range p.LoopbackForwards() {
		got = append(got, f.Host+"@"+netip.AddrPortFrom(f.Addr, uint16(f.Port)).String())
	}
	want := []string{"127.0.0.1@127.0.0.1:11434", "localhost@127.0.0.1:5432", "::1@[::1]:8080"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("LoopbackForwards = %v, want %v", got, want)
	}
}
