package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// readBindsFile reads the host workspace's .art/config/binds.json. Only
// the host file counts: the agent can never write it.
func readBindsFile(ws string) ([]sandbox.Bind, error) {
	p := filepath.Join(ws, sandbox.PolicyRel, "binds.json")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Binds []sandbox.Bind `json:"binds"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, usagef("%s: %v", p, err)
	}
	for i, b := range doc.Binds {
		if b.Host != "" && !filepath.IsAbs(b.Host) {
			doc.Binds[i].Host = filepath.Join(ws, b.Host)
		}
		if err := sandbox.ValidateBind(doc.Binds[i]); err != nil {
			return nil, usagef("%s: %v", p, errors.Unwrap(err))
		}
		if _, err := os.Stat(doc.Binds[i].Host); err != nil {
			return nil, usagef("%s: bind source: %v", p, err)
		}
	}
	return doc.Binds, nil
}

// DefaultUser is the host uid and gid a sandbox over workspace ws runs
// as when nobody chose: art's own user, or as root the sudo user, else
// the workspace's owner, else nobody (never root).
func DefaultUser(ws string) (int, int) {
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid()
	}
	if u, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && u > 0 {
		g, err := strconv.Atoi(os.Getenv("SUDO_GID"))
		if err != nil || g <= 0 {
			g = u
		}
		return u, g
	}
	var st unix.Stat_t
	if unix.Stat(ws, &st) == nil && st.Uid > 0 && st.Gid > 0 {
		return int(st.Uid), int(st.Gid)
	}
	return 65534, 65534 // nobody
}

// protectPolicy creates the host workspace's .art when the sandbox could
// otherwise create it: where it can write the host workspace (direct
// mode, or a read-write bind of a directory above it), an .art of the
// host's own must exist, to be covered read-only inside; otherwise the
// agent could create one and plant a binds.json for the next run.
func protectPolicy(direct bool, ws string, cfg *sandbox.Config) error {
	writable := direct
	for _, b := range cfg.Binds {
		if rel, err := filepath.Rel(b.Host, ws); err == nil && !b.ReadOnly && rel != ".." && !strings.HasPrefix(rel, "../") {
			writable = true
		}
	}
	if !writable {
		return nil
	}
	if err := os.Mkdir(cfg.PolicyDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("protect sandbox policy: %w", err)
	}
	return nil
}

// bindMountPoints lists, deepest last, the directories bwrap will create
// in the overlay as mount points for binds below /home/agent: they are
// scaffolding, not the agent's work (removeMountPoints takes them out
// again, so they never reach the branch's snapshot or the host).
func bindMountPoints(cfg *sandbox.Config) []string {
	var made []string
	for _, b := range cfg.Binds {
		rel, ok := strings.CutPrefix(filepath.Clean(b.Guest), sandbox.GuestHome+"/")
		if !ok {
			continue
		}
		p := cfg.Home
		for _, part := range strings.Split(rel, "/") {
			p = filepath.Join(p, part)
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) && !slices.Contains(made, p) {
				made = append(made, p)
			}
		}
	}
	return made
}

// removeMountPoints removes the scaffolding directories, deepest first;
// one the agent put something in stays.
func removeMountPoints(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		os.Remove(made[i])
	}
}
