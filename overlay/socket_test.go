package overlay_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// Programs bind UNIX sockets in their home and working directories
// (gpg-agent, ssh ControlMaster, tmux -S, git's fsmonitor). A socket on
// the mount works as on ext4 - bind, connect, rename, unlink - and, being
// live state rather than content, never appears in a snapshot.
func TestUnixSocket(t *testing.T) {
	db, mnt, fsys := mount(t)
	ctx := context.Background()
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(mnt, "d", "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("bind a socket on the mount: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte("echo " + line))
			}()
		}
	}()
	echo := func(path string) string {
		t.Helper()
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("connect %s: %v", path, err)
		}
		defer c.Close()
		c.Write([]byte("hi\n"))
		got, _ := bufio.NewReader(c).ReadString('\n')
		return got
	}
	if got := echo(sock); got != "echo hi\n" {
		t.Fatalf("through the socket: %q", got)
	}
	var st unix.Stat_t
	if err := unix.Lstat(sock, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Fatalf("lstat socket: mode %#o, %v", st.Mode, err)
	}
	// A rename keeps the binding (the kernel's socket follows the inode).
	moved := filepath.Join(mnt, "d", "moved.sock")
	if err := os.Rename(sock, moved); err != nil {
		t.Fatal(err)
	}
	if got := echo(moved); got != "echo hi\n" {
		t.Fatalf("through the renamed socket: %q", got)
	}
	os.WriteFile(filepath.Join(mnt, "d", "f.txt"), []byte("content\n"), 0o644)

	// The snapshot holds the file and not the socket.
	if err := fsys.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := db.TakeSnapshot(ctx, journal.DefaultBranch, "with a socket")
	if err != nil {
		t.Fatal(err)
	}
	root, err := db.Objects().GetTree(ctx, snap.Root)
	if err != nil {
		t.Fatal(err)
	}
	var d *cas.Entry
	for i := range root.Entries {
		if string(root.Entries[i].Name) == "d" {
			d = &root.Entries[i]
		}
	}
	if d == nil {
		t.Fatal("the snapshot lacks d/")
	}
	sub, err := db.Objects().GetTree(ctx, d.Target)
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.Entries) != 1 || string(sub.Entries[0].Name) != "f.txt" {
		t.Errorf("snapshot of d/ holds %d entries (%v), want only f.txt", len(sub.Entries), sub.Entries)
	}
	// A replay of the journal reaches the same root: the socket's events
	// are in the chain, and leaving sockets out is the encoding's rule.
	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("verify --rebuild after a socket: %+v", rep)
	}
	ln.Close()
	if err := os.Remove(moved); err != nil {
		t.Fatalf("unlink the socket: %v", err)
	}
	if err := os.Remove(filepath.Join(mnt, "d", "f.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "d")); err != nil {
		t.Fatalf("rmdir after the socket went: %v", err)
	}
	// Devices stay refused.
	if err := unix.Mknod(filepath.Join(mnt, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != unix.EPERM {
		t.Errorf("mknod of a char device: %v, want EPERM", err)
	}
}
