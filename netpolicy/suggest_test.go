package netpolicy

import (
	"encoding/json"
	"testing"
)

func TestSuggest(t *testing.T) {
	at := func(host string, port int, allow bool, rule, reason string) Attempt {
		return Attempt{Proto: "connect", Host: host, Port: port, Allow: allow, Rule: rule, Reason: reason}
	}
	s := Suggest([]Attempt{
		at("api.example.com", 443, true, "api.example.com:443", ""),
		at("api.example.com", 443, true, "api.example.com:443", ""),
		at("a.pkg.org", 443, false, "", "no rule allows a.pkg.org:443"),
		at("B.pkg.org.", 443, false, "", "no rule allows b.pkg.org:443"),
		at("c.pkg.org", 443, false, "", "no rule allows c.pkg.org:443"),
		at("c.pkg.org", 80, false, "", "no rule allows c.pkg.org:80"),
		at("169.254.169.254", 80, false, "169.254.169.254", "denied by rule"),
		at("::ffff:192.0.2.1", 8080, false, "", "no rule"),
	})
	var entries []string
	for _, a := range s.Allow {
		entries = append(entries, a.Entry+"/"+a.Domain)
	}
	want := []string{"192.0.2.1:8080/192.0.2.1", "api.example.com:443/example.com", "a.pkg.org:443/pkg.org",
		"b.pkg.org:443/pkg.org", "c.pkg.org:443/pkg.org", "c.pkg.org:80/pkg.org"}
	if got, _ := json.Marshal(entries); string(got) != mustJSON(want) {
		t.Fatalf("allow = %s, want %s", got, mustJSON(want))
	}
	if s.Allow[1].Attempts != 2 || s.Allow[1].Allowed != 2 || s.Allow[2].Denied != 1 || s.Allow[2].Reason == "" {
		t.Fatalf("counts: %+v", s.Allow)
	}
	if len(s.Wildcards) != 1 || s.Wildcards[0].Entry != "*.pkg.org:443" || len(s.Wildcards[0].Names) != 3 {
		t.Fatalf("wildcards = %+v", s.Wildcards)
	}
	if len(s.KeptDenied) != 1 || s.KeptDenied[0].Entry != "169.254.169.254:80" {
		t.Fatalf("kept denied = %+v", s.KeptDenied)
	}
	// The proposal must itself parse and allow what it lists.
	c := s.Config()
	p, err := c.Policy("suggestion")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules()) != len(s.Allow) || c.Mode != "allow" {
		t.Fatalf("config = %+v", c)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
