package session

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/artrt/art/execapi"
	"github.com/artrt/art/sandbox"
)

// lookCommand checks that the request's command exists in the sandbox,
// so a missing one is E3001 rather than bwrap's exit 1.
func lookCommand(cfg *sandbox.Config) *execapi.Error {
	name := cfg.Command[0]
	path := sandbox.DefaultPath
	for _, kv := range cfg.Env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	cwd := cfg.Cwd
	if cwd == "" {
		cwd = sandbox.GuestHome + "/" + cfg.Name
	}
	var candidates []string
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(cwd, name)
		}
		candidates = []string{name}
	} else {
		for _, d := range filepath.SplitList(path) {
			candidates = append(candidates, filepath.Join(d, name))
		}
	}
	for _, c := range candidates {
		host := c
		for _, b := range cfg.Binds {
			if rel, ok := strings.CutPrefix(c, filepath.Clean(b.Guest)+"/"); ok {
				host = filepath.Join(b.Host, rel)
			}
		}
		if host != c {
			// reached through a bind
		} else if rel, ok := strings.CutPrefix(c, sandbox.GuestHome+"/"); ok {
			if cfg.Home != "" {
				host = filepath.Join(cfg.Home, rel)
			} else if wrel, ok := strings.CutPrefix(rel, cfg.Name+"/"); ok {
				host = filepath.Join(cfg.Workspace, wrel) // direct mode: the workspace bind
			} else {
				return nil // direct mode's /home/agent is a private tmpfs: let it try
			}
		} else if strings.HasPrefix(c, "/tmp/") || strings.HasPrefix(c, "/run/") || c == sandbox.GuestHome {
			return nil // private to the sandbox: let it try
		}
		if st, err := os.Stat(host); err == nil && !st.IsDir() {
			if st.Mode()&0o111 == 0 {
				return execapi.Errorf(execapi.CodeNoExec, "%s is not executable", c)
			}
			return nil
		}
	}
	return execapi.Errorf(execapi.CodeNotFound, "command not found: %s (PATH=%s)", cfg.Command[0], path)
}
