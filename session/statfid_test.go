package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// TestRunGitIndexStaysValid: git's index written on the host by the
// workspace's owner is valid inside art run: git status there finds every
// file clean by its stat alone, so it rewrites nothing (the run changes no
// path), and git diff-files agrees (docs/architecture.md, "Stat
// fidelity"). Before, every file's inode number and ctime differed, git
// re-read them all and wrote the index again.
func TestRunGitIndexStaysValid(t *testing.T) {
	testutil.RequireFUSE(t)
	testutil.Require(t, "bwrap")
	testutil.Require(t, "git")
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := testWorkspace(t)
	ws := o.Workspace
	for i := 0; i < 30; i++ {
		p := filepath.Join(ws, fmt.Sprintf("d%d", i%5), fmt.Sprintf("f%d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("// %d\n", i), i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("main.py", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UnixNano() // neither git nor the capture takes them as racy
	home := filepath.Join(filepath.Dir(ws), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(filepath.Dir(ws), func(p string, _ os.FileInfo, _ error) error {
		if p != filepath.Dir(ws) {
			os.Lchown(p, o.UID, o.GID)
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{unix.NsecToTimespec(old), unix.NsecToTimespec(old)}, unix.AT_SYMLINK_NOFOLLOW)
	})
	// git on the host, as the workspace's owner (the sandbox's uid).
	hostGit := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = ws
		cmd.Env = []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C", "PATH=" + os.Getenv("PATH"),
			"GIT_AUTHOR_NAME=art", "GIT_AUTHOR_EMAIL=art@example.com", "GIT_COMMITTER_NAME=art", "GIT_COMMITTER_EMAIL=art@example.com"}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.UID), Gid: uint32(o.GID)}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	hostGit("init", "-q", "-b", "main")
	hostGit("add", "-A")
	hostGit("commit", "-q", "-m", "first")
	if got := hostGit("status", "--porcelain"); got != "" {
		t.Fatalf("host git status: %q", got)
	}
	var stdout, warn bytes.Buffer
	o.Warn = &warn
	res, err := Run(ctx, o, Command{Argv: []string{"sh", "-c", "git status --porcelain && git diff-files --quiet && echo clean"},
		Net: sandbox.NetNone, Stdout: &stdout, Stderr: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || stdout.String() != "clean\n" {
		t.Fatalf("git in art: exit %d, stdout %q, stderr %q", res.ExitCode, stdout.String(), warn.String())
	}
	if res.Changed != 0 {
		t.Errorf("git status in art changed %d paths (the index rewritten: its stat data did not match)", res.Changed)
	}
}
