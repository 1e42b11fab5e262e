package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A store in a directory the sandboxed uid cannot search (root's store in
// /root, mode 0700) is out of the command's reach already; covering it
// made bwrap, setting up as that uid, fail with "Can't create file at".
func TestHideSkipsWhatTheCommandCannotReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as root only: otherwise the command runs as the caller, who reaches the store")
	}
	base := t.TempDir()
	closed := filepath.Join(base, "closed")
	open := filepath.Join(base, "open")
	for _, d := range []string{closed, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	hidden, reachable := filepath.Join(closed, "s.db"), filepath.Join(open, "s.db")
	for _, p := range []string{hidden, reachable} {
		if err := os.WriteFile(p, []byte("SQLite format 3\x00"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if searchableBy("/", hidden, 65534, 65534) {
		t.Errorf("%s: searchable by 65534 under a 0700 directory", hidden)
	}
	if !searchableBy("/", reachable, 0, 0) {
		t.Errorf("%s: not searchable by its directories' owner", reachable)
	}
	if !searchableBy("/", hidden, 0, 0) {
		t.Errorf("%s: not searchable by its directory's owner", hidden)
	}

	// In the workspace, so the cover would be at /home/agent/ws/closed/s.db
	// (a host path under /tmp gets none: /tmp is the sandbox's own).
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o755); err != nil { // only closed/ keeps 65534 out
		t.Fatal(err)
	}
	inWS := filepath.Join(ws, "closed", "s.db")
	if err := os.Mkdir(filepath.Dir(inWS), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inWS, []byte("SQLite format 3\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Config{Workspace: ws, Name: "ws", UID: 65534, GID: 65534, Command: []string{"true"}, Hide: []string{inWS}}
	if searchableBy(ws, inWS, 65534, 65534) {
		t.Errorf("%s: searchable by 65534 from the workspace", inWS)
	}
	if !searchableBy(ws, filepath.Join(ws, "s.db"), 65534, 65534) {
		t.Errorf("a file at the workspace's top: not searchable by 65534 from the workspace (mode 0755)")
	}
	for _, a := range c.Args(-1) {
		if strings.HasSuffix(a, "closed/s.db") {
			t.Errorf("args cover %s, which uid 65534 cannot reach: %q", a, c.Args(-1))
		}
	}
	// A bind's source below a closed directory is reached through the
	// bind, which skips the directories above its source: covered there.
	sub := filepath.Join(filepath.Dir(inWS), "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(sub, "s.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Hide = []string{db}
	c.Binds = []Bind{{Host: sub, Guest: "/mnt/sub", ReadOnly: true}}
	if !slices.Contains(c.Args(-1), "/mnt/sub/s.db") {
		t.Errorf("a store reached through a bind is not covered: %q", c.Args(-1))
	}
}

func TestSearchBit(t *testing.T) {
	for _, c := range []struct {
		mode     uint32
		uid, gid int
		want     bool
	}{
		{0o700, 1, 2, true}, {0o700, 9, 2, false}, {0o070, 9, 2, true}, {0o007, 9, 9, true},
		{0o770, 9, 9, false}, {0o607, 1, 2, false}, // the owner's bits decide for the owner
	} {
		st := unix.Stat_t{Mode: unix.S_IFDIR | c.mode, Uid: 1, Gid: 2}
		if got := searchBit(st, c.uid, c.gid); got != c.want {
			t.Errorf("mode %o uid %d gid %d: searchable %v, want %v", c.mode, c.uid, c.gid, got, c.want)
		}
	}
}
