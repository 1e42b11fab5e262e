package hostconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/retention"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadNet was netpolicy's TestLoadConfig: the "net" section parses
// into the policy's rules, and a bad file or section names the file.
func TestLoadNet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if c, err := Load(path); err != nil || c.Net.Mode != "" || c.Net.Allow != nil || c.Path != path {
		t.Fatalf("missing file: %+v, %v; want empty config", c, err)
	}
	path = writeConfig(t, `{"editor": "vi", "net": {"mode": "allow", "allow": ["api.example.com:443"], "deny": ["169.254.169.254"]}}`)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Net.Mode != "allow" || len(c.Net.Allow) != 1 || len(c.Net.Deny) != 1 {
		t.Fatalf("config = %+v", c)
	}
	p, err := c.Net.Policy(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	if rs := p.Rules(); len(rs) != 2 || rs[0].Source != path || !rs[1].Deny {
		t.Fatalf("rules = %+v", rs)
	}
	for _, bad := range []string{
		`{"net": {"alow": ["x.com"]}}`,
		`{"net": {"mode": "open"}}`,
		`{"net": {"allow": "x.com"}}`,
		`not json`,
		`{"retention":`,
	} {
		path := writeConfig(t, bad)
		if _, err := Load(path); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want ErrBadConfig naming the file", bad, err)
		}
	}
}

func TestDefaultPathIsTheHostUsers(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/host/home/u/.config")
	p, err := DefaultPath()
	if err != nil || p != "/host/home/u/.config/art/config.json" {
		t.Fatalf("DefaultPath = %q, %v", p, err)
	}
}

// TestRetention was retention's TestLoad: the section parses into an
// Auto, a missing one is off, and every bad value is an error.
func TestRetention(t *testing.T) {
	load := func(body string) (retention.Auto, error) {
		c, err := Load(writeConfig(t, body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return c.Retention()
	}
	c, err := Load(filepath.Join(t.TempDir(), "missing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := c.Retention(); err != nil || a.Enabled() {
		t.Fatalf("missing file: %+v %v", a, err)
	}
	if a, err := load(`{"net":{"mode":"none"}}`); err != nil || a.Enabled() || a.Grace != 0 {
		t.Fatalf("no retention section: %+v %v", a, err)
	}
	a, err := load(`{"retention":{"max_store_size":"2G","keep_last":3,"keep_daily":7,"keep_within":"2d","grace":"10m"}}`)
	if err != nil || a.MaxBytes != 2<<30 || a.Policy.Last != 3 || a.Policy.Daily != 7 || a.Policy.Within != 48*time.Hour || a.Grace != 10*time.Minute {
		t.Fatalf("full config: %+v %v", a, err)
	}
	for _, bad := range []string{
		`{"retention":{"max_store_size":"2G","keep_lsat":3}}`, // misspelt rule
		`{"retention":{"max_store_size":"2G"}}`,               // keeps nothing
		`{"retention":{"keep_last":3}}`,                       // never applies
		`{"retention":{"max_store_size":"big","keep_last":3}}`,
		`{"retention":{"max_store_size":"2G","keep_last":-1}}`,
		`{"retention":{"max_store_size":"2G","keep_within":"soon"}}`,
		`{"retention":{"max_store_size":"2G","keep_last":1,"grace":"-1h"}}`,
	} {
		if _, err := load(bad); !errors.Is(err, retention.ErrBadConfig) || !strings.Contains(err.Error(), "config.json: retention: ") {
			t.Errorf("%s: %v, want ErrBadConfig naming the file and section", bad, err)
		}
	}
}
