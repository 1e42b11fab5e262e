// Package testutil holds helpers shared by art's tests.
package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TreeOptions choose what DescribeTree compares.
type TreeOptions struct {
	DirMTimes bool // include directories' mtimes
	Owners    bool // include uid/gid
}

// DescribeTree returns one line per entry below dir (relative path ->
// description of kind, mode, size, ns mtime, content hash, link target,
// user.* xattrs and hard-link structure), for comparing two trees.
func DescribeTree(t testing.TB, dir string, opts TreeOptions) map[string]string {
	t.Helper()
	out := map[string]string{}
	firstName := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		var b strings.Builder
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			fmt.Fprintf(&b, "file mode=%04o size=%d mtime=%d sha=%s", st.Mode&0o7777, st.Size, st.Mtim.Nano(), hex.EncodeToString(sum[:8]))
			if st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if first, ok := firstName[key]; ok {
					fmt.Fprintf(&b, " hardlink-of=%q", first)
				} else {
					firstName[key] = rel
				}
			}
		case unix.S_IFDIR:
			fmt.Fprintf(&b, "dir mode=%04o", st.Mode&0o7777)
			if opts.DirMTimes {
				fmt.Fprintf(&b, " mtime=%d", st.Mtim.Nano())
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "symlink -> %q mtime=%d", target, st.Mtim.Nano())
		case unix.S_IFIFO:
			fmt.Fprintf(&b, "fifo mode=%04o", st.Mode&0o7777)
		default:
			fmt.Fprintf(&b, "special %o", st.Mode&unix.S_IFMT)
		}
		if opts.Owners {
			fmt.Fprintf(&b, " owner=%d:%d", st.Uid, st.Gid)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			fmt.Fprintf(&b, " xattrs=%s", xattrs(p))
		}
		out[rel] = b.String()
		return nil
	})
	if err != nil {
		t.Fatalf("describe %s: %v", dir, err)
	}
	return out
}

func xattrs(p string) string {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return "?"
	}
	var parts []string
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		if !bytes.HasPrefix(name, []byte("user.")) {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, string(name), v)
		if err != nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%q", name, v[:m]))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, ",") + "]"
}

// DiffTrees reports the differences between two DescribeTree results, or "".
func DiffTrees(a, b map[string]string) string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out strings.Builder
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		switch {
		case !oka:
			fmt.Fprintf(&out, "only in second: %q %s\n", k, vb)
		case !okb:
			fmt.Fprintf(&out, "only in first:  %q %s\n", k, va)
		case va != vb:
			fmt.Fprintf(&out, "differs: %q\n   first:  %s\n   second: %s\n", k, va, vb)
		}
	}
	return out.String()
}

// Blocks returns the 512-byte blocks allocated to path (to check holes).
func Blocks(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks
}

// XattrsSupported reports whether dir's filesystem takes user.* xattrs.
func XattrsSupported(dir string) bool {
	f := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		return false
	}
	defer os.Remove(f)
	err := unix.Setxattr(f, "user.probe", []byte("1"), 0)
	return err == nil || !errors.Is(err, unix.ENOTSUP)
}
