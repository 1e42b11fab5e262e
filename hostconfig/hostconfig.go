// Package hostconfig reads the host user's art config file
// (~/.config/art/config.json, or $XDG_CONFIG_HOME/art/config.json), the one
// place that finds, reads and decodes it; the packages a section configures
// take its parsed values (netpolicy.Config for "net", retention.Auto for
// "retention"):
//
//	{
//	  "net": {
//	    "mode":  "allow",
//	    "allow": ["api.anthropic.com:443", "pypi.org:443"],
//	    "deny":  ["169.254.169.254"]
//	  },
//	  "retention": {
//	    "max_store_size": "20G",
//	    "keep_last": 10,
//	    "keep_daily": 7,
//	    "keep_within": "24h",
//	    "grace": "1h"
//	  }
//	}
//
// Every key is optional and a missing file is no settings. Unknown
// top-level keys are ignored (they may belong to a newer art); an unknown
// key inside a section is an error, so a misspelt "alow" or "keep_lsat"
// cannot silently open, close or keep less than meant.
//
// The file is read from the invoking user's home on the host, never from a
// workspace or a store: network policy and how much history to keep are the
// host user's policy, not data the agent can write.
package hostconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/units"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/retention"
)

// ErrBadConfig is returned (wrapped, with the file's path) for a config file
// that is not valid JSON of the documented shape. A retention section that
// does not parse wraps retention.ErrBadConfig instead.
var ErrBadConfig = errclass.New(errclass.Invalid, "bad config file")

// DefaultPath returns the host user's config file path.
func DefaultPath() (string, error) { return DefaultPathEnv(os.Getenv) }

// DefaultPathEnv is DefaultPath with the environment read through getenv
// (a warm daemon's, its client's): os.UserConfigDir's rule on Linux,
// $XDG_CONFIG_HOME (absolute) else $HOME/.config.
func DefaultPathEnv(getenv func(string) string) (string, error) {
	dir := getenv("XDG_CONFIG_HOME")
	switch {
	case dir != "" && !filepath.IsAbs(dir):
		return "", errors.New("find config directory: path in $XDG_CONFIG_HOME is relative")
	case dir == "":
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("find config directory: neither $XDG_CONFIG_HOME nor $HOME are defined")
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "art", "config.json"), nil
}

// Config is the config file, read once.
type Config struct {
	Path string           // the file it was read from
	Net  netpolicy.Config // the "net" section, its mode checked; zero when absent
	// retention is the "retention" section as written: parsed by
	// Retention, only by the commands it applies to (art run with a
	// store), as it always was.
	retention json.RawMessage
}

// Load reads the config file at path and parses its "net" section. A
// missing file is the zero Config (with Path), not an error.
func Load(path string) (Config, error) {
	c := Config{Path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	var top struct {
		Net       json.RawMessage `json:"net"`
		Retention json.RawMessage `json:"retention"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return Config{}, fmt.Errorf("%w %s: %v", ErrBadConfig, path, err)
	}
	c.retention = top.Retention
	if err := decodeSection(top.Net, &c.Net); err != nil {
		return Config{}, fmt.Errorf("%w %s: net: %v", ErrBadConfig, path, err)
	}
	switch c.Net.Mode {
	case "", "host", "none", "allow":
	default:
		return Config{}, fmt.Errorf("%w %s: net.mode %q is not host, none or allow", ErrBadConfig, path, c.Net.Mode)
	}
	return c, nil
}

// decodeSection decodes a section into v, refusing unknown keys; an absent
// or null section leaves v as it is.
func decodeSection(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// retentionSection is the "retention" section as written.
type retentionSection struct {
	MaxStoreSize string `json:"max_store_size"`
	KeepLast     int    `json:"keep_last"`
	KeepWithin   string `json:"keep_within"`
	KeepHourly   int    `json:"keep_hourly"`
	KeepDaily    int    `json:"keep_daily"`
	KeepWeekly   int    `json:"keep_weekly"`
	KeepMonthly  int    `json:"keep_monthly"`
	Grace        string `json:"grace"`
}

// Retention parses the "retention" section. A missing section is the zero
// Auto (off). Errors wrap retention.ErrBadConfig: an unknown key, a size
// without a rule (it would keep nothing) and a rule without a size (it
// would never apply).
func (c Config) Retention() (retention.Auto, error) {
	if len(c.retention) == 0 || string(c.retention) == "null" {
		return retention.Auto{}, nil
	}
	var s retentionSection
	if err := decodeSection(c.retention, &s); err != nil {
		return retention.Auto{}, fmt.Errorf("%w %s: retention: %v", retention.ErrBadConfig, c.Path, err)
	}
	bad := func(format string, a ...any) (retention.Auto, error) {
		return retention.Auto{}, fmt.Errorf("%w %s: retention: %s", retention.ErrBadConfig, c.Path, fmt.Sprintf(format, a...))
	}
	var a retention.Auto
	var err error
	if s.MaxStoreSize != "" {
		if a.MaxBytes, err = units.ParseSize(s.MaxStoreSize); err != nil || a.MaxBytes <= 0 {
			return bad("max_store_size %q: want a positive size such as 20G", s.MaxStoreSize)
		}
	}
	for _, n := range []int{s.KeepLast, s.KeepHourly, s.KeepDaily, s.KeepWeekly, s.KeepMonthly} {
		if n < 0 {
			return bad("keep_* counts must not be negative")
		}
	}
	a.Policy = journal.Retention{Last: s.KeepLast, Hourly: s.KeepHourly, Daily: s.KeepDaily, Weekly: s.KeepWeekly, Monthly: s.KeepMonthly}
	if s.KeepWithin != "" {
		if a.Policy.Within, err = units.ParseAge(s.KeepWithin); err != nil {
			return bad("keep_within %q: %v", s.KeepWithin, err)
		}
	}
	a.Grace = time.Hour
	if s.Grace != "" {
		if a.Grace, err = time.ParseDuration(s.Grace); err != nil || a.Grace < 0 {
			return bad("grace %q: want a duration such as 1h", s.Grace)
		}
	}
	switch {
	case a.MaxBytes > 0 && a.Policy.Empty():
		return bad("max_store_size is set but no keep_* rule: it would keep no snapshot")
	case a.MaxBytes == 0 && !a.Policy.Empty():
		return bad("keep_* rules without max_store_size would never apply")
	}
	return a, nil
}
