package netpolicy

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
// "none" or "allow"); the rules are added before those given as flags.
// Package hostconfig reads and checks the file (unknown keys inside "net"
// are an error, so a misspelt "alow" cannot silently open or close
// anything); it is read from the invoking user's home on the host, never
// from a workspace: policy must not come from data the agent can write.
type Config struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Policy parses the config's rules; errors name the file.
func (c Config) Policy(path string) (*Policy, error) {
	return Parse(c.Allow, c.Deny, path)
}
