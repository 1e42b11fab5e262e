package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// A real program serves on a UNIX socket in ~/ inside art run: ssh-agent
// binds ~/agent.sock on the overlay and ssh-add talks to it. The socket is
// live state: the run's snapshot does not hold one left behind.
func TestRunSocketInHome(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	for _, p := range []string{"ssh-agent", "ssh-add"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is needed (scripts/deps.sh installs openssh-client): %v", p, err)
		}
	}
	base := t.TempDir()
	ws, db := filepath.Join(base, "ws"), filepath.Join(base, "ws.db")
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	script := `ssh-agent -a ~/agent.sock -D >/dev/null 2>&1 & pid=$!
for i in $(seq 100); do [ -S ~/agent.sock ] && break; sleep 0.05; done
SSH_AUTH_SOCK=~/agent.sock ssh-add -l; echo "ssh-add exit $?"
kill $pid; wait $pid 2>/dev/null
python3 -c 'import os, socket; socket.socket(socket.AF_UNIX).bind(os.path.expanduser("~/left.sock"))'
ls -l ~/left.sock`
	cmd := exec.Command(artBinary(t), "run", "-d", db, "-m", ws, "-i=false", "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("art run: %v\n%s", err, out)
	}
	// Exit 1 with "no identities" is a conversation with the agent; 2 is
	// "Error connecting to agent".
	if !strings.Contains(string(out), "The agent has no identities.") || !strings.Contains(string(out), "ssh-add exit 1") || !strings.Contains(string(out), "srw") {
		t.Fatalf("ssh-add through a socket in ~/:\n%s", out)
	}
	ls, err := exec.Command(artBinary(t), "ls", "-d", db, "-r", "main").CombinedOutput()
	if err != nil || strings.Contains(string(ls), ".sock") || !strings.Contains(string(ls), "a.txt") {
		t.Errorf("the snapshot after the run: %v\n%s", err, ls)
	}
}
