package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	rel := filepath.Join(sandbox.PolicyRel, "binds.json")
	p := filepath.Join(ws, rel)
	data, err := readPolicyFile(ws, rel)
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

// maxPolicyFile bounds a policy file read into memory.
const maxPolicyFile = 1 << 20

// readPolicyFile reads ws/rel without following a symbolic link in any
// component below ws: a .art that is a link (pulled from a store, made by
// a tool) must never turn someone else's file into policy. The file must
// be a regular file owned by the invoking user or root that nobody else
// may write.
func readPolicyFile(ws, rel string) ([]byte, error) {
	p := filepath.Join(ws, rel)
	dir, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: ws, Err: err}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, usagef("%s: a symbolic link on the way: sandbox policy is only read from real directories and files", p)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, usagef("%s: not a regular file", p)
	case st.Uid != euid && st.Uid != 0:
		return nil, usagef("%s: owned by uid %d, not by you (uid %d) or root: not trusted as sandbox policy", p, st.Uid, euid)
	case st.Mode&0o002 != 0:
		return nil, usagef("%s: anyone may write it (mode %04o): not trusted as sandbox policy", p, st.Mode&0o7777)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPolicyFile {
		return nil, usagef("%s: larger than %d bytes", p, maxPolicyFile)
	}
	return data, nil
}

// DefaultUser is the host uid and gid a sandbox over workspace ws runs
// as when nobody chose: art's own user, or as root the sudo user, else
// the workspace's owner, else nobody (never root).
func DefaultUser(ws string) (int, int) { return DefaultUserEnv(ws, os.Getenv) }

// DefaultUserEnv is DefaultUser with the environment read through getenv
// (a warm daemon's, the client's).
func DefaultUserEnv(ws string, getenv func(string) string) (int, int) {
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid()
	}
	if u, g, ok := SudoUserEnv(getenv); ok {
		return u, g
	}
	var st unix.Stat_t
	if unix.Stat(ws, &st) == nil && st.Uid > 0 && st.Gid > 0 {
		return int(st.Uid), int(st.Gid)
	}
	return 65534, 65534 // nobody
}

// SudoUser returns the user who ran art through sudo: $SUDO_UID and
// $SUDO_GID (the gid defaults to the uid), ok false when unset, not a
// number or root. It is the one reader of these variables.
func SudoUser() (uid, gid int, ok bool) { return SudoUserEnv(os.Getenv) }

// SudoUserEnv is SudoUser with the environment read through getenv.
func SudoUserEnv(getenv func(string) string) (uid, gid int, ok bool) {
	u, err := strconv.Atoi(getenv("SUDO_UID"))
	if err != nil || u <= 0 {
		return 0, 0, false
	}
	g, err := strconv.Atoi(getenv("SUDO_GID"))
	if err != nil || g <= 0 {
		g = u
	}
	return u, g, true
}

// protectPolicy makes sure the host workspace's .art exists when the
// sandbox could otherwise create it: where it can write the host workspace
// (direct mode, or a read-write bind of a directory above it), an .art of
// the host's own must exist, to be covered read-only inside; otherwise the
// agent could create one and plant a binds.json for the next run.
//
// An .art made here is the session's scaffolding, not something the user
// asked for: release removes it again when still empty. Every session that
// relies on the directory holds a shared flock on it until release, and the
// one that made it removes it only under an exclusive one, so a concurrent
// session's cover is never taken away (an rmdir on the host would detach
// the read-only tmpfs in that session's mount namespace).
func protectPolicy(direct bool, ws string, cfg *sandbox.Config) (release func(), err error) {
	writable := direct
	for _, b := range cfg.Binds {
		if rel, err := filepath.Rel(b.Host, ws); err == nil && !b.ReadOnly && rel != ".." && !strings.HasPrefix(rel, "../") {
			writable = true
		}
	}
	if !writable {
		return func() {}, nil
	}
	for {
		made := true
		if err := os.Mkdir(cfg.PolicyDir, 0o755); errors.Is(err, fs.ErrExist) {
			made = false
		} else if err != nil {
			return nil, fmt.Errorf("protect sandbox policy: %w", err)
		}
		fd, err := unix.Open(cfg.PolicyDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			// Not a directory of ours to manage (a file or a link named
			// .art): the sandbox covers what is there, as before.
			return func() {}, nil
		}
		if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("protect sandbox policy: lock %s: %w", cfg.PolicyDir, err)
		}
		if !samePolicyDir(fd, cfg.PolicyDir) { // removed by its maker meanwhile
			unix.Close(fd)
			continue
		}
		return func() {
			if made && unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil && samePolicyDir(fd, cfg.PolicyDir) {
				_ = unix.Rmdir(cfg.PolicyDir) // fails, as it should, when not empty
			}
			unix.Close(fd)
		}, nil
	}
}

// samePolicyDir reports whether path still names the directory open as fd.
func samePolicyDir(fd int, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
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
