package netpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Config is the "net" section of the host user's art config file
// (~/.config/art/config.json, or $XDG_CONFIG_HOME/art/config.json):
//
//	{
//	  "net": {
//	    "mode":  "allow",
//	    "allow": ["api.anthropic.com:443", "*.pythonhosted.org:443", "pypi.org:443"],
//	    "deny":  ["169.254.169.254"]
//	  }
//	}
//
// Every key is optional. Mode is the default of `art run --net` ("host",
// "none" or "allow"); the rules are added before those given as flags. Other
// top-level keys belong to other parts of art and are ignored here; unknown
// keys inside "net" are an error, so a misspelt "alow" cannot silently open
// or close anything.
//
// The file is read from the invoking user's home on the host, never from a
// workspace: policy must not come from data the agent can write.
type Config struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// DefaultConfigPath returns the host user's config file path.
func DefaultConfigPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find config directory: %w", err)
	}
	return filepath.Join(dir, "art", "config.json"), nil
}

// LoadConfig reads the "net" section of the config file at path. A missing
// file is an empty Config, not an error.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	var top struct {
		Net json.RawMessage `json:"net"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return Config{}, fmt.Errorf("%w %s: %v", ErrBadConfig, path, err)
	}
	var c Config
	if len(top.Net) == 0 || string(top.Net) == "null" {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(top.Net))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w %s: net: %v", ErrBadConfig, path, err)
	}
	switch c.Mode {
	case "", "host", "none", "allow":
	default:
		return Config{}, fmt.Errorf("%w %s: net.mode %q is not host, none or allow", ErrBadConfig, path, c.Mode)
	}
	return c, nil
}

// Policy parses the config's rules; errors name the file.
func (c Config) Policy(path string) (*Policy, error) {
	return Parse(c.Allow, c.Deny, path)
}
