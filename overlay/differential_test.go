package overlay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/overlay"
	"golang.org/x/sys/unix"
)

// The differential suite runs one table of file operations on a plain
// directory (ext4 or tmpfs under t.TempDir, the oracle) and on an art
// mount, and requires the same results: every step's errno, the data it
// returned and the metadata it saw. A case also names the errno its last
// step is about, so a case that meant to test EEXIST cannot pass by
// succeeding on both sides.
//
// EXDEV cannot happen inside one mount (every rename and link stays in
// it); TestDifferentialEXDEV checks the kernel's answer across the mount
// boundary instead.

// result is what one case saw, one line per step.
type result []string

// rec runs and records the steps of one case under root.
type rec struct {
	root  string
	steps result
	last  error
}

func (r *rec) p(name string) string {
	if name == "" {
		return r.root
	}
	return r.root + "/" + name
}

// note records a step that returned v (when err is nil) or an errno.
func (r *rec) note(what string, v string, err error) {
	r.last = err
	s := what + " -> " + r.errName(err)
	if err == nil && v != "" {
		s += " " + v
	}
	r.steps = append(r.steps, s)
}

func (r *rec) do(what string, err error) bool { r.note(what, "", err); return err == nil }

func (r *rec) errName(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
		return fmt.Sprintf("errno(%d)", int(e))
	}
	return "error " + strings.ReplaceAll(err.Error(), r.root, "ROOT")
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if err != nil {
		return syscall.Errno(0xffff)
	}
	return 0
}

func (r *rec) mkdir(name string, mode uint32) bool {
	return r.do("mkdir "+name, unix.Mkdir(r.p(name), mode))
}

// write creates or replaces name with data (mode 0644 before umask).
func (r *rec) write(name, data string) bool {
	fd, err := unix.Open(r.p(name), unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err == nil {
		_, err = unix.Write(fd, []byte(data))
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
	}
	return r.do(fmt.Sprintf("write %s %d bytes", name, len(data)), err)
}

func (r *rec) open(name string, flags int, mode uint32) int {
	fd, err := unix.Open(r.p(name), flags|unix.O_CLOEXEC, mode)
	r.do(fmt.Sprintf("open %s %#o", name, flags), err)
	if err != nil {
		return -1
	}
	return fd
}

// close records closing fd but, being clean-up, leaves last alone.
func (r *rec) close(fd int) {
	if fd >= 0 {
		last := r.last
		r.do("close", unix.Close(fd))
		if r.last == nil {
			r.last = last
		}
	}
}

func (r *rec) symlink(target, name string) bool {
	return r.do("symlink "+name+" -> "+target, unix.Symlink(target, r.p(name)))
}
func (r *rec) link(old, name string) bool {
	return r.do("link "+old+" "+name, unix.Link(r.p(old), r.p(name)))
}
func (r *rec) unlink(name string) bool { return r.do("unlink "+name, unix.Unlink(r.p(name))) }
func (r *rec) rmdir(name string) bool  { return r.do("rmdir "+name, unix.Rmdir(r.p(name))) }
func (r *rec) rename(a, b string) bool { return r.do("rename "+a+" "+b, unix.Rename(r.p(a), r.p(b))) }
func (r *rec) rename2(a, b string, flags uint) bool {
	return r.do(fmt.Sprintf("renameat2 %s %s %#x", a, b, flags), unix.Renameat2(unix.AT_FDCWD, r.p(a), unix.AT_FDCWD, r.p(b), flags))
}

func describeStat(st *unix.Stat_t) string {
	s := fmt.Sprintf("%s %04o nlink=%d uid=%d gid=%d", kindName(st.Mode), st.Mode&0o7777, st.Nlink, st.Uid, st.Gid)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		s += fmt.Sprintf(" size=%d", st.Size)
	}
	return s
}

func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "chardev"
	}
	return fmt.Sprintf("type%o", mode&unix.S_IFMT)
}

// stat records lstat of name.
func (r *rec) stat(name string) (unix.Stat_t, bool) {
	var st unix.Stat_t
	err := unix.Lstat(r.p(name), &st)
	r.note("lstat "+name, describeStat(&st), err)
	return st, err == nil
}

// statf records stat (following symlinks) of name.
func (r *rec) statf(name string) {
	var st unix.Stat_t
	err := unix.Stat(r.p(name), &st)
	r.note("stat "+name, describeStat(&st), err)
}

func (r *rec) fstat(fd int) unix.Stat_t {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	r.note("fstat", describeStat(&st), err)
	return st
}

func (r *rec) read(name string) {
	b, err := os.ReadFile(r.p(name))
	r.note("read "+name, showData(b), err)
}

func (r *rec) pread(fd int, n int, off int64) {
	b := make([]byte, n)
	m, err := unix.Pread(fd, b, off)
	if m < 0 {
		m = 0
	}
	r.note(fmt.Sprintf("pread %d@%d", n, off), showData(b[:m]), err)
}

func (r *rec) pwrite(fd int, data string, off int64) {
	n, err := unix.Pwrite(fd, []byte(data), off)
	r.note(fmt.Sprintf("pwrite %d@%d", len(data), off), fmt.Sprintf("n=%d", n), err)
}

func showData(b []byte) string {
	if len(b) <= 64 {
		return strconv.Quote(string(b))
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("len=%d sha=%s", len(b), hex.EncodeToString(sum[:8]))
}

// ls records a directory's names and types, sorted.
func (r *rec) ls(name string) {
	des, err := os.ReadDir(r.p(name))
	var parts []string
	for _, d := range des {
		parts = append(parts, strconv.Quote(d.Name())+":"+typeChar(d.Type()))
	}
	sort.Strings(parts)
	r.note("ls "+name, "["+strings.Join(parts, " ")+"]", err)
}

func typeChar(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "d"
	case m&fs.ModeSymlink != 0:
		return "l"
	case m&fs.ModeNamedPipe != 0:
		return "p"
	case m.IsRegular():
		return "f"
	}
	return "?"
}

func (r *rec) xattrList(name string) {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(r.p(name), buf)
	var names []string
	if err == nil {
		for _, x := range bytes.Split(buf[:n], []byte{0}) {
			if len(x) > 0 {
				names = append(names, string(x))
			}
		}
	}
	sort.Strings(names)
	r.note("listxattr "+name, fmt.Sprint(names), err)
}

func (r *rec) xattrGet(name, attr string) {
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(r.p(name), attr, buf)
	if n < 0 {
		n = 0
	}
	r.note("getxattr "+name+" "+attr, strconv.Quote(string(buf[:n])), err)
}

// advanced records whether a timestamp moved forward.
func (r *rec) advanced(what string, before, after unix.Timespec) {
	r.note(what, strconv.FormatBool(after.Nano() > before.Nano()), nil)
}

func (r *rec) lstatRaw(name string) unix.Stat_t {
	var st unix.Stat_t
	if err := unix.Lstat(r.p(name), &st); err != nil {
		r.do("lstat "+name, err)
	}
	return st
}

// tick waits long enough for a coarse file system clock to move.
func tick() { time.Sleep(15 * time.Millisecond) }

// treeShape describes everything below dir except times, device and inode
// numbers and directory sizes, which legitimately differ between file
// systems: kind, mode, owner, link count, size, content and user.* xattrs.
func treeShape(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%q %s", rel, describeStat(&st))
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" data=" + showData(data))
		case unix.S_IFLNK:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %q", t)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			buf := make([]byte, 4096)
			n, err := unix.Llistxattr(p, buf)
			if err != nil {
				return err
			}
			var xs []string
			for _, x := range bytes.Split(buf[:n], []byte{0}) {
				if !bytes.HasPrefix(x, []byte("user.")) {
					continue
				}
				v := make([]byte, 4096)
				m, err := unix.Lgetxattr(p, string(x), v)
				if err != nil {
					return err
				}
				xs = append(xs, fmt.Sprintf("%s=%q", x, v[:m]))
			}
			sort.Strings(xs)
			fmt.Fprintf(&b, " xattrs=%v", xs)
		}
		b.WriteString("\n")
		return nil
	})
	return b.String(), err
}

const (
	seekData = 3 // SEEK_DATA
	seekHole = 4 // SEEK_HOLE
)

func (r *rec) seek(fd int, off int64, whence int) {
	got, err := unix.Seek(fd, off, whence)
	r.note(fmt.Sprintf("lseek %d whence=%d", off, whence), strconv.FormatInt(got, 10), err)
}

var long256 = strings.Repeat("n", 256)
var long255 = strings.Repeat("m", 255)

// diffCase is one row of the table.
type diffCase struct {
	name string
	// want is the errno of the case's last step on both sides (0: success).
	want syscall.Errno
	fn   func(r *rec)
	// artOnly, when set, says why the plain directory is no oracle for
	// this case: art's last step must give want, whatever the plain gave.
	artOnly string
	// bug, when set, pins a known art bug: while the case fails it is
	// skipped with this note; once it passes, the note must go.
	bug string
}

var diffCases = []diffCase{
	// ENOENT
	{name: "open missing", want: unix.ENOENT, fn: func(r *rec) { r.open("nope", unix.O_RDONLY, 0) }},
	{name: "stat missing", want: unix.ENOENT, fn: func(r *rec) { r.stat("nope") }},
	{name: "unlink missing", want: unix.ENOENT, fn: func(r *rec) { r.unlink("nope") }},
	{name: "rmdir missing", want: unix.ENOENT, fn: func(r *rec) { r.rmdir("nope") }},
	{name: "rename missing", want: unix.ENOENT, fn: func(r *rec) { r.write("x", "x"); r.rename("nope", "x") }},
	{name: "rename missing to missing dir", want: unix.ENOENT, fn: func(r *rec) { r.write("a", "a"); r.rename("a", "nodir/a") }},
	{name: "link missing", want: unix.ENOENT, fn: func(r *rec) { r.link("nope", "x") }},
	{name: "readlink missing", want: unix.ENOENT, fn: func(r *rec) {
		_, err := os.Readlink(r.p("nope"))
		r.do("readlink nope", err)
	}},
	{name: "chmod missing", want: unix.ENOENT, fn: func(r *rec) { r.do("chmod nope", unix.Chmod(r.p("nope"), 0o600)) }},
	{name: "path through missing dir", want: unix.ENOENT, fn: func(r *rec) {
		r.stat("nodir/x")
		r.open("nodir/x", unix.O_CREAT|unix.O_WRONLY, 0o644)
		r.mkdir("nodir/x", 0o755)
		r.symlink("t", "nodir/x")
	}},
	{name: "dangling symlink", want: unix.ENOENT, fn: func(r *rec) {
		r.symlink("nope", "l")
		r.stat("l")
		r.statf("l")
		r.open("l", unix.O_RDONLY, 0)
	}},
	{name: "exchange with missing", want: unix.ENOENT, fn: func(r *rec) { r.write("a", "a"); r.rename2("a", "b", unix.RENAME_EXCHANGE) }},
	{name: "unlink then stat", want: unix.ENOENT, fn: func(r *rec) { r.write("a", "a"); r.unlink("a"); r.stat("a"); r.open("a", unix.O_RDONLY, 0) }},

	// EEXIST
	{name: "mkdir existing", want: unix.EEXIST, fn: func(r *rec) { r.mkdir("d", 0o755); r.write("f", ""); r.mkdir("f", 0o755); r.mkdir("d", 0o755) }},
	{name: "create exclusive existing", want: unix.EEXIST, fn: func(r *rec) {
		r.write("f", "keep")
		r.close(r.open("f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644))
		r.read("f")
		r.mkdir("d", 0o755)
		r.close(r.open("d", unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY, 0o644))
	}},
	{name: "create exclusive through dangling symlink", want: unix.EEXIST, fn: func(r *rec) {
		r.symlink("target", "l")
		r.close(r.open("l", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644))
	}},
	{name: "create through dangling symlink", fn: func(r *rec) {
		r.symlink("target", "l")
		fd := r.open("l", unix.O_CREAT|unix.O_WRONLY, 0o600)
		r.pwrite(fd, "via link", 0)
		r.close(fd)
		r.stat("target")
		r.read("target")
	}},
	{name: "link to existing", want: unix.EEXIST, fn: func(r *rec) { r.write("a", "a"); r.write("b", "b"); r.link("a", "b") }},
	{name: "symlink over existing", want: unix.EEXIST, fn: func(r *rec) {
		r.write("a", "a")
		r.mkdir("d", 0o755)
		r.symlink("x", "d")
		r.symlink("x", "a")
	}},
	{name: "rename noreplace", want: unix.EEXIST, fn: func(r *rec) {
		r.write("a", "a")
		r.write("b", "b")
		r.rename2("a", "b", unix.RENAME_NOREPLACE)
		r.read("a")
		r.read("b")
		r.mkdir("d", 0o755)
		r.rename2("a", "d", unix.RENAME_NOREPLACE)
	}},
	{name: "rename noreplace to new name", fn: func(r *rec) { r.write("a", "a"); r.rename2("a", "c", unix.RENAME_NOREPLACE); r.read("c") }},
	{name: "mkfifo existing", want: unix.EEXIST, fn: func(r *rec) {
		r.write("a", "")
		r.do("mkfifo a", unix.Mkfifo(r.p("a"), 0o644))
	}},
	{name: "mkdir dot", want: unix.EEXIST, fn: func(r *rec) { r.mkdir("d", 0o755); r.mkdir("d/.", 0o755) }},

	// ENOTEMPTY
	{name: "rmdir non-empty", want: unix.ENOTEMPTY, fn: func(r *rec) { r.mkdir("d", 0o755); r.write("d/f", ""); r.rmdir("d") }},
	{name: "rmdir non-empty with subdir", want: unix.ENOTEMPTY, fn: func(r *rec) { r.mkdir("d", 0o755); r.mkdir("d/e", 0o755); r.rmdir("d") }},
	{name: "rmdir dotdot", want: unix.ENOTEMPTY, fn: func(r *rec) { r.mkdir("d", 0o755); r.rmdir("d/..") }},
	{name: "rename dir over non-empty dir", want: unix.ENOTEMPTY, fn: func(r *rec) {
		r.mkdir("a", 0o755)
		r.mkdir("b", 0o755)
		r.write("b/f", "f")
		r.rename("a", "b")
	}},

	// EISDIR
	{name: "unlink dir", want: unix.EISDIR, fn: func(r *rec) { r.mkdir("d", 0o755); r.unlink("d") }},
	{name: "open dir for write", want: unix.EISDIR, fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.close(r.open("d", unix.O_RDWR, 0))
		r.close(r.open("d", unix.O_CREAT|unix.O_WRONLY, 0o644))
		r.close(r.open("d", unix.O_WRONLY, 0))
	}},
	{name: "rename file over dir", want: unix.EISDIR, fn: func(r *rec) { r.write("f", "f"); r.mkdir("d", 0o755); r.rename("f", "d") }},
	{name: "truncate dir", want: unix.EISDIR, fn: func(r *rec) { r.mkdir("d", 0o755); r.do("truncate d", unix.Truncate(r.p("d"), 0)) }},
	{name: "read dir fd", want: unix.EISDIR, fn: func(r *rec) {
		r.mkdir("d", 0o755)
		fd := r.open("d", unix.O_RDONLY, 0)
		_, err := unix.Read(fd, make([]byte, 10))
		r.close(fd)
		r.do("read dir", err)
	}},

	// ENOTDIR
	{name: "rmdir file", want: unix.ENOTDIR, fn: func(r *rec) { r.write("f", ""); r.rmdir("f") }},
	{name: "path component is file", want: unix.ENOTDIR, fn: func(r *rec) {
		r.write("f", "")
		r.stat("f/x")
		r.mkdir("f/x", 0o755)
		r.open("f/x", unix.O_CREAT|unix.O_WRONLY, 0o644)
	}},
	{name: "rename dir over file", want: unix.ENOTDIR, fn: func(r *rec) { r.mkdir("d", 0o755); r.write("f", "f"); r.rename("d", "f") }},
	{name: "rename dir over symlink", want: unix.ENOTDIR, fn: func(r *rec) { r.mkdir("d", 0o755); r.symlink("d", "l"); r.rename("d", "l") }},
	{name: "open file O_DIRECTORY", want: unix.ENOTDIR, fn: func(r *rec) { r.write("f", ""); r.open("f", unix.O_RDONLY|unix.O_DIRECTORY, 0) }},
	{name: "rename file to dir path", want: unix.ENOTDIR, fn: func(r *rec) { r.write("f", ""); r.rename("f", "g/") }},

	// ENAMETOOLONG
	{name: "name too long", want: unix.ENAMETOOLONG, fn: func(r *rec) {
		r.close(r.open(long256, unix.O_CREAT|unix.O_WRONLY, 0o644))
		r.mkdir(long256, 0o755)
		r.write("a", "")
		r.link("a", long256)
		r.rename("a", long256)
		r.symlink("a", long256)
		r.stat(long256)
	}},
	{name: "stat name too long", want: unix.ENAMETOOLONG, fn: func(r *rec) { r.stat(long256) }},
	{name: "name of 255 bytes", fn: func(r *rec) {
		r.write(long255, "max")
		r.mkdir("d", 0o755)
		r.mkdir("d/"+long255, 0o755)
		r.ls("")
		r.stat(long255)
		r.read(long255)
	}},
	{name: "symlink target too long", want: unix.ENAMETOOLONG, fn: func(r *rec) {
		r.symlink(strings.Repeat("t", 4095), "ok")
		r.stat("ok")
		r.symlink(strings.Repeat("t", 4096), "long")
	}},

	// ELOOP
	{name: "open nofollow symlink", want: unix.ELOOP, fn: func(r *rec) {
		r.write("f", "f")
		r.symlink("f", "l")
		r.open("l", unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	}},
	{name: "symlink loop", want: unix.ELOOP, fn: func(r *rec) {
		r.symlink("b", "a")
		r.symlink("a", "b")
		r.symlink("self", "self")
		r.stat("a")
		r.statf("self")
		r.open("a", unix.O_RDONLY, 0)
	}},

	// EINVAL
	{name: "rename dir into itself", want: unix.EINVAL, fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.mkdir("d/sub", 0o755)
		r.rename("d", "d/sub/x")
		r.rename("d", "d/x")
	}},
	{name: "exchange dir into its subdir", want: unix.EINVAL, fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.mkdir("d/sub", 0o755)
		r.rename2("d", "d/sub", unix.RENAME_EXCHANGE)
	}},
	{name: "rmdir dot", want: unix.EINVAL, fn: func(r *rec) { r.mkdir("d", 0o755); r.rmdir("d/.") }},
	{name: "renameat2 bad flags", want: unix.EINVAL, fn: func(r *rec) {
		r.write("a", "a")
		r.write("b", "b")
		r.rename2("a", "b", unix.RENAME_EXCHANGE|unix.RENAME_NOREPLACE)
	}},
	{name: "readlink of file", want: unix.EINVAL, fn: func(r *rec) {
		r.write("f", "f")
		_, err := os.Readlink(r.p("f"))
		r.do("readlink f", err)
	}},
	{name: "ftruncate read-only fd", want: unix.EINVAL, fn: func(r *rec) {
		r.write("f", "abc")
		fd := r.open("f", unix.O_RDONLY, 0)
		err := unix.Ftruncate(fd, 0)
		r.close(fd)
		r.do("ftruncate", err)
	}},

	// EPERM, EBADF, ENXIO
	{name: "link dir", want: unix.EPERM, fn: func(r *rec) { r.mkdir("d", 0o755); r.link("d", "e") }},
	{name: "write read-only fd", want: unix.EBADF, fn: func(r *rec) {
		r.write("f", "abc")
		fd := r.open("f", unix.O_RDONLY, 0)
		_, err := unix.Write(fd, []byte("x"))
		r.read("f")
		r.close(fd)
		r.do("write", err)
	}},
	{name: "seek data past end", want: unix.ENXIO, fn: func(r *rec) {
		r.write("f", "abc")
		fd := r.open("f", unix.O_RDONLY, 0)
		defer r.close(fd)
		r.seek(fd, 0, seekData)
		r.seek(fd, 0, seekHole)
		r.seek(fd, 3, seekData)
	}},

	// Renames that succeed.
	{name: "rename file over file", fn: func(r *rec) {
		r.write("a", "aaa")
		r.write("b", "b")
		r.rename("a", "b")
		r.stat("a")
		r.stat("b")
		r.read("b")
		r.ls("")
	}},
	{name: "rename dir over empty dir across parents", want: unix.ENOENT, fn: func(r *rec) {
		r.mkdir("p", 0o755)
		r.mkdir("q", 0o755)
		r.mkdir("p/a", 0o700)
		r.write("p/a/f", "f")
		r.mkdir("q/b", 0o755)
		r.rename("p/a", "q/b")
		r.stat("p")
		r.stat("q")
		r.stat("q/b")
		r.stat("q/b/..")
		r.read("q/b/f")
		r.stat("p/a")
	}},
	{name: "rename to itself", fn: func(r *rec) {
		r.write("a", "a")
		r.rename("a", "a")
		r.mkdir("d", 0o755)
		r.rename("d", "d")
		r.ls("")
	}},
	{name: "rename between hard links", fn: func(r *rec) {
		r.write("a", "a")
		r.link("a", "b")
		r.rename("a", "b")
		r.ls("")
		r.stat("a")
		r.stat("b")
	}},
	{name: "rename open file", want: unix.ENOENT, fn: func(r *rec) {
		r.mkdir("d", 0o755)
		fd := r.open("d/a", unix.O_CREAT|unix.O_RDWR, 0o644)
		r.pwrite(fd, "before", 0)
		r.rename("d/a", "b")
		r.rename("d", "e")
		r.pwrite(fd, "after", 6)
		r.fstat(fd)
		r.close(fd)
		r.read("b")
		r.stat("d/a")
	}},
	{name: "exchange file and dir", fn: func(r *rec) {
		r.mkdir("p", 0o755)
		r.mkdir("q", 0o755)
		r.write("p/f", "file")
		r.mkdir("q/d", 0o700)
		r.write("q/d/inner", "inner")
		r.rename2("p/f", "q/d", unix.RENAME_EXCHANGE)
		r.stat("p/f")
		r.stat("q/d")
		r.read("p/f/inner")
		r.read("q/d")
		r.stat("p")
		r.stat("q")
		r.rename2("p/f", "q/d", unix.RENAME_EXCHANGE)
		r.read("p/f")
		r.read("q/d/inner")
		r.stat("p")
		r.stat("q")
	}},
	{name: "exchange two dirs across parents", fn: func(r *rec) {
		r.mkdir("p", 0o755)
		r.mkdir("q", 0o755)
		r.mkdir("p/a", 0o755)
		r.mkdir("p/a/x", 0o755)
		r.mkdir("q/b", 0o700)
		r.rename2("p/a", "q/b", unix.RENAME_EXCHANGE)
		r.stat("p/a")
		r.stat("q/b")
		r.stat("q/b/x")
		r.ls("p/a")
	}},
	{name: "exchange same parent", fn: func(r *rec) {
		r.write("a", "A")
		r.write("b", "B")
		r.rename2("a", "b", unix.RENAME_EXCHANGE)
		r.read("a")
		r.read("b")
	}},

	// Hard links.
	{name: "hard links nlink", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.write("a", "one")
		r.link("a", "b")
		r.link("b", "d/c")
		r.stat("a")
		r.stat("d/c")
		fd := r.open("b", unix.O_WRONLY|unix.O_APPEND, 0)
		r.do("append", func() error { _, err := unix.Write(fd, []byte(" two")); return err }())
		r.close(fd)
		r.read("a")
		r.read("d/c")
		r.unlink("a")
		r.stat("b")
		r.rename("d/c", "c")
		r.stat("c")
		r.unlink("b")
		r.stat("c")
	}},
	{name: "hard link to symlink and fifo", fn: func(r *rec) {
		r.symlink("target", "l")
		r.link("l", "l2")
		r.stat("l2")
		r.do("mkfifo p", unix.Mkfifo(r.p("p"), 0o600))
		r.link("p", "p2")
		r.stat("p")
	}},
	{name: "unlinked open file", fn: func(r *rec) {
		fd := r.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
		r.pwrite(fd, "still here", 0)
		r.unlink("f")
		r.fstat(fd)
		r.pwrite(fd, "!", 10)
		r.pread(fd, 100, 0)
		r.close(fd)
		r.ls("")
	}},
	{name: "rename over open file", fn: func(r *rec) {
		r.write("old", "old content")
		r.write("new", "new")
		fd := r.open("old", unix.O_RDWR, 0)
		r.rename("new", "old")
		r.fstat(fd)
		r.pread(fd, 100, 0)
		r.pwrite(fd, "!", 0)
		r.close(fd)
		r.read("old")
		r.ls("")
	}},
	{name: "O_TRUNC through a hard link", fn: func(r *rec) {
		r.write("a", "shared content")
		r.link("a", "b")
		r.close(r.open("b", unix.O_WRONLY|unix.O_TRUNC, 0))
		r.read("a")
		r.stat("a")
	}},
	{name: "sparse 16MiB file", fn: func(r *rec) {
		fd := r.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
		r.do("ftruncate 16M", unix.Ftruncate(fd, 16<<20))
		r.pwrite(fd, "middle", 8<<20)
		r.pwrite(fd, "end", 16<<20-3)
		r.close(fd)
		fd = r.open("f", unix.O_RDONLY, 0)
		r.seek(fd, 0, seekData)
		r.pread(fd, 8, 16<<20-5)
		r.close(fd)
		r.stat("f")
	}},
	{name: "rmdir open dir", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		fd := r.open("d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		r.rmdir("d")
		r.fstat(fd)
		r.close(fd)
	}},
	{name: "dir nlink", fn: func(r *rec) {
		r.mkdir("a", 0o755)
		r.mkdir("a/b", 0o755)
		r.mkdir("a/c", 0o755)
		r.write("a/f", "")
		r.stat("a")
		r.rmdir("a/b")
		r.stat("a")
		r.rename("a/c", "c")
		r.stat("a")
		r.stat("")
	}},

	// Metadata.
	{name: "chmod", fn: func(r *rec) {
		r.write("f", "")
		r.mkdir("d", 0o755)
		r.do("chmod f 0640", unix.Chmod(r.p("f"), 0o640))
		r.stat("f")
		r.do("chmod f 04755", unix.Chmod(r.p("f"), 0o4755))
		r.stat("f")
		r.do("chmod d 01777", unix.Chmod(r.p("d"), 0o1777))
		r.stat("d")
		r.symlink("f", "l")
		r.do("chmod via symlink", unix.Chmod(r.p("l"), 0o600))
		r.stat("f")
		r.stat("l")
	}},
	{name: "chown", fn: func(r *rec) {
		r.write("f", "")
		r.do("chown f", unix.Chown(r.p("f"), 1234, 5678))
		r.stat("f")
		r.do("chown f gid only", unix.Chown(r.p("f"), -1, 42))
		r.stat("f")
		r.do("chmod f 06755", unix.Chmod(r.p("f"), 0o6755))
		r.do("chown f clears setuid", unix.Chown(r.p("f"), 7, 7))
		r.stat("f")
		r.symlink("f", "l")
		r.do("lchown l", unix.Lchown(r.p("l"), 99, 98))
		r.stat("l")
		r.stat("f")
		fd := r.open("f", unix.O_RDONLY, 0)
		r.do("fchown", unix.Fchown(fd, 11, 12))
		r.fstat(fd)
		r.close(fd)
	}},
	{name: "setgid directory", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.do("chown d", unix.Chown(r.p("d"), 0, 4242))
		r.do("chmod d 02775", unix.Chmod(r.p("d"), 0o2775))
		r.write("d/f", "")
		r.mkdir("d/s", 0o755)
		r.stat("d/f")
		r.stat("d/s")
	}},
	{name: "utimensat ns", fn: func(r *rec) {
		r.write("f", "x")
		ts := []unix.Timespec{{Sec: 1700000000, Nsec: 123456789}, {Sec: 1600000000, Nsec: 987654321}}
		r.do("utimensat f", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), ts, 0))
		st := r.lstatRaw("f")
		r.note("mtime f", strconv.FormatInt(st.Mtim.Nano(), 10), nil)
		r.mkdir("d", 0o755)
		r.do("utimensat d", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("d"), ts, 0))
		st = r.lstatRaw("d")
		r.note("mtime d", strconv.FormatInt(st.Mtim.Nano(), 10), nil)
		r.symlink("f", "l")
		ts2 := []unix.Timespec{{Sec: 1500000000, Nsec: 1}, {Sec: 1500000000, Nsec: 999999999}}
		r.do("utimensat l nofollow", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("l"), ts2, unix.AT_SYMLINK_NOFOLLOW))
		st = r.lstatRaw("l")
		r.note("mtime l", strconv.FormatInt(st.Mtim.Nano(), 10), nil)
		st = r.lstatRaw("f")
		r.note("mtime f", strconv.FormatInt(st.Mtim.Nano(), 10), nil)
		omit := []unix.Timespec{{Sec: 1, Nsec: 0}, {Nsec: unix.UTIME_OMIT}}
		r.do("utimensat f omit mtime", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), omit, 0))
		st = r.lstatRaw("f")
		r.note("mtime f", strconv.FormatInt(st.Mtim.Nano(), 10), nil)
	}},
	{name: "utimensat atime", fn: func(r *rec) {
		r.write("f", "x")
		ts := []unix.Timespec{{Sec: 1700000000, Nsec: 123456789}, {Sec: 1600000000, Nsec: 987654321}}
		r.do("utimensat f", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), ts, 0))
		st := r.lstatRaw("f")
		r.note("atime f", strconv.FormatInt(st.Atim.Nano(), 10), nil)
	}},
	{name: "utime now", fn: func(r *rec) {
		r.write("f", "x")
		old := []unix.Timespec{{Sec: 1000, Nsec: 5}, {Sec: 1000, Nsec: 5}}
		r.do("utimensat old", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), old, 0))
		before := r.lstatRaw("f")
		now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
		r.do("utimensat now", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), now, 0))
		after := r.lstatRaw("f")
		r.advanced("mtime advanced", before.Mtim, after.Mtim)
		r.note("mtime recent", strconv.FormatBool(time.Since(time.Unix(0, after.Mtim.Nano())) < time.Minute), nil)
	}},
	{name: "times advance", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.write("d/f", "x")
		d0, f0 := r.lstatRaw("d"), r.lstatRaw("d/f")
		tick()
		r.write("d/g", "y")
		d1 := r.lstatRaw("d")
		r.advanced("dir mtime after create", d0.Mtim, d1.Mtim)
		r.advanced("dir ctime after create", d0.Ctim, d1.Ctim)
		tick()
		fd := r.open("d/f", unix.O_WRONLY, 0)
		r.pwrite(fd, "more", 1)
		r.close(fd)
		f1 := r.lstatRaw("d/f")
		r.advanced("file mtime after write", f0.Mtim, f1.Mtim)
		r.advanced("file ctime after write", f0.Ctim, f1.Ctim)
		tick()
		r.do("chmod", unix.Chmod(r.p("d/f"), 0o600))
		f2 := r.lstatRaw("d/f")
		r.advanced("ctime after chmod", f1.Ctim, f2.Ctim)
		r.note("mtime kept by chmod", strconv.FormatBool(f2.Mtim == f1.Mtim), nil)
		tick()
		r.link("d/f", "d/h")
		f3 := r.lstatRaw("d/f")
		r.advanced("ctime after link", f2.Ctim, f3.Ctim)
		tick()
		r.unlink("d/g")
		d2 := r.lstatRaw("d")
		r.advanced("dir mtime after unlink", d1.Mtim, d2.Mtim)
		tick()
		r.rename("d/h", "d/i")
		d3, f4 := r.lstatRaw("d"), r.lstatRaw("d/i")
		r.advanced("dir mtime after rename", d2.Mtim, d3.Mtim)
		r.advanced("file ctime after rename", f3.Ctim, f4.Ctim)
		tick()
		r.do("truncate", unix.Truncate(r.p("d/f"), 1))
		f5 := r.lstatRaw("d/f")
		r.advanced("mtime after truncate", f4.Mtim, f5.Mtim)
		tick()
		r.do("setxattr", unix.Setxattr(r.p("d/f"), "user.t", []byte("1"), 0))
		f6 := r.lstatRaw("d/f")
		r.advanced("ctime after setxattr", f5.Ctim, f6.Ctim)
	}},

	{name: "chmod of a directory keeps its mtime", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		d0 := r.lstatRaw("d")
		tick()
		r.write("d/f", "")
		d1 := r.lstatRaw("d")
		r.advanced("dir mtime after create", d0.Mtim, d1.Mtim)
		r.do("chmod d", unix.Chmod(r.p("d"), 0o700))
		d2 := r.lstatRaw("d")
		r.note("dir mtime kept by chmod", strconv.FormatBool(d2.Mtim == d1.Mtim), nil)
		r.do("chown d", unix.Chown(r.p("d"), 5, 5))
		d3 := r.lstatRaw("d")
		r.note("dir mtime kept by chown", strconv.FormatBool(d3.Mtim == d1.Mtim), nil)
	}},
	{name: "fchmod of a file being written keeps the write's mtime", fn: func(r *rec) {
		r.write("f", "a")
		f0 := r.lstatRaw("f")
		tick()
		fd := r.open("f", unix.O_WRONLY, 0)
		r.pwrite(fd, "b", 1)
		f1 := r.lstatRaw("f")
		r.advanced("mtime after write", f0.Mtim, f1.Mtim)
		r.do("fchmod", unix.Fchmod(fd, 0o600))
		r.close(fd)
		f2 := r.lstatRaw("f")
		r.note("mtime kept by fchmod and close", strconv.FormatBool(f2.Mtim == f1.Mtim), nil)
	}},

	// Content.
	{name: "truncate grow and shrink", fn: func(r *rec) {
		r.write("f", "hello world")
		r.do("truncate 5", unix.Truncate(r.p("f"), 5))
		r.read("f")
		r.do("truncate 20", unix.Truncate(r.p("f"), 20))
		r.read("f")
		r.stat("f")
		r.do("truncate 0", unix.Truncate(r.p("f"), 0))
		r.read("f")
		r.do("truncate 1M+3", unix.Truncate(r.p("f"), 1<<20+3))
		r.read("f")
	}},
	{name: "ftruncate grow and shrink", fn: func(r *rec) {
		fd := r.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
		r.pwrite(fd, "0123456789", 0)
		r.do("ftruncate 4", unix.Ftruncate(fd, 4))
		r.pread(fd, 100, 0)
		r.fstat(fd)
		r.do("ftruncate 8", unix.Ftruncate(fd, 8))
		r.pread(fd, 100, 0)
		r.pwrite(fd, "Z", 10)
		r.pread(fd, 100, 0)
		r.read("f")
		r.close(fd)
		r.read("f")
	}},
	{name: "O_TRUNC and O_APPEND", fn: func(r *rec) {
		r.write("f", "old content")
		fd := r.open("f", unix.O_WRONLY|unix.O_APPEND, 0)
		r.do("write", func() error { _, err := unix.Write(fd, []byte("+1")); return err }())
		r.seek(fd, 0, 0)
		r.do("write", func() error { _, err := unix.Write(fd, []byte("+2")); return err }())
		r.pwrite(fd, "+3", 0) // Linux appends even for pwrite on O_APPEND
		r.close(fd)
		r.read("f")
		fd = r.open("f", unix.O_RDWR|unix.O_TRUNC, 0)
		r.fstat(fd)
		r.close(fd)
		r.read("f")
		fd = r.open("f", unix.O_RDWR|unix.O_APPEND, 0)
		r.do("ftruncate 0", unix.Ftruncate(fd, 0))
		r.do("write", func() error { _, err := unix.Write(fd, []byte("fresh")); return err }())
		r.close(fd)
		r.read("f")
	}},
	{name: "write past end makes zeros", fn: func(r *rec) {
		fd := r.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
		r.pwrite(fd, "end", 100000)
		r.pread(fd, 10, 0)
		r.pread(fd, 10, 99998)
		r.close(fd)
		r.read("f")
		r.stat("f")
	}},
	{name: "two handles see each other", fn: func(r *rec) {
		a := r.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
		b := r.open("f", unix.O_RDWR, 0)
		r.pwrite(a, "from a", 0)
		r.pread(b, 100, 0)
		r.pwrite(b, "B", 0)
		r.pread(a, 100, 0)
		r.close(a)
		r.pread(b, 100, 0)
		r.close(b)
		r.read("f")
	}},
	{name: "fallocate and seek data hole", fn: func(r *rec) {
		fd := r.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
		defer r.close(fd)
		r.pwrite(fd, strings.Repeat("x", 4096), 1<<20)
		r.fstat(fd)
		r.seek(fd, 0, seekData)
		r.seek(fd, 0, seekHole)
		r.seek(fd, 1<<20, seekHole)
		r.seek(fd, 1<<20+4096, seekData)
		r.do("fallocate 2M+4096", unix.Fallocate(fd, 0, 2<<20, 4096))
		r.fstat(fd)
		r.do("fallocate keep size", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 3<<20, 4096))
		r.fstat(fd)
		r.pread(fd, 16, 2<<20)
		r.do("punch hole", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1<<20, 4096))
		r.pread(fd, 16, 1<<20)
		r.fstat(fd)
		r.pwrite(fd, "y", 8192)
		r.seek(fd, 0, seekData)
		r.seek(fd, 8192, seekHole)
		r.do("zero range", unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 8192, 1))
		r.pread(fd, 4, 8190)
	}},
	{name: "copy_file_range", fn: func(r *rec) {
		r.write("src", strings.Repeat("0123456789", 1000))
		in := r.open("src", unix.O_RDONLY, 0)
		out := r.open("dst", unix.O_CREAT|unix.O_WRONLY, 0o644)
		roff, woff := int64(5), int64(0)
		n, err := unix.CopyFileRange(in, &roff, out, &woff, 5000, 0)
		r.note("copy_file_range", strconv.Itoa(n), err)
		r.close(in)
		r.close(out)
		r.read("dst")
	}},
	{name: "mmap shared write", fn: func(r *rec) {
		r.write("f", strings.Repeat("-", 8192))
		fd := r.open("f", unix.O_RDWR, 0)
		errs, err := mapWrite(fd, 8192, 4090, "mapped") // out of process: mapwrite_test.go
		if err != nil {
			panic(err) // the harness, not either side: the same error on both would compare equal
		}
		r.do("mmap", errs["mmap"])
		if _, mapped := errs["msync"]; mapped {
			r.do("msync", errs["msync"])
			r.do("munmap", errs["munmap"])
		}
		r.pread(fd, 10, 4088)
		r.close(fd)
		r.read("f")
	}},
	{name: "fsync file and dir", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		fd := r.open("d/f", unix.O_CREAT|unix.O_WRONLY, 0o644)
		r.pwrite(fd, "durable", 0)
		r.do("fsync", unix.Fsync(fd))
		r.do("fdatasync", unix.Fdatasync(fd))
		r.close(fd)
		dfd := r.open("d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		r.do("fsync dir", unix.Fsync(dfd))
		r.close(dfd)
		r.read("d/f")
	}},

	// Locks.
	{name: "flock per open file", want: unix.EAGAIN, fn: func(r *rec) {
		r.write("f", "")
		a := r.open("f", unix.O_RDWR, 0)
		b := r.open("f", unix.O_RDWR, 0)
		defer r.close(b)
		defer r.close(a)
		r.do("flock a", unix.Flock(a, unix.LOCK_EX|unix.LOCK_NB))
		r.do("flock b", unix.Flock(b, unix.LOCK_EX|unix.LOCK_NB))
	}},
	{name: "ofd lock conflict", want: unix.EAGAIN, fn: func(r *rec) {
		r.write("f", "")
		a := r.open("f", unix.O_RDWR, 0)
		b := r.open("f", unix.O_RDWR, 0)
		defer r.close(b)
		defer r.close(a)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
		r.do("ofd setlk a", unix.FcntlFlock(uintptr(a), unix.F_OFD_SETLK, &lk))
		lk2 := lk
		r.do("ofd setlk b", unix.FcntlFlock(uintptr(b), unix.F_OFD_SETLK, &lk2))
	}},
	{name: "posix locks of one process do not conflict", fn: func(r *rec) {
		r.write("f", "")
		a := r.open("f", unix.O_RDWR, 0)
		b := r.open("f", unix.O_RDWR, 0)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
		r.do("setlk a", unix.FcntlFlock(uintptr(a), unix.F_SETLK, &lk))
		lk2 := lk
		r.do("setlk b", unix.FcntlFlock(uintptr(b), unix.F_SETLK, &lk2))
		r.close(a)
		r.close(b)
	}},

	// Extended attributes.
	{name: "user xattrs", want: unix.ENODATA, fn: func(r *rec) {
		r.write("f", "")
		r.mkdir("d", 0o755)
		r.do("set user.a", unix.Setxattr(r.p("f"), "user.a", []byte("alpha"), 0))
		r.do("set user.b empty", unix.Setxattr(r.p("f"), "user.b", nil, 0))
		r.do("set d user.dir", unix.Setxattr(r.p("d"), "user.dir", []byte("on a dir"), 0))
		r.xattrGet("f", "user.a")
		r.xattrGet("f", "user.b")
		r.xattrGet("d", "user.dir")
		r.xattrList("f")
		r.do("create existing", unix.Setxattr(r.p("f"), "user.a", []byte("x"), unix.XATTR_CREATE))
		r.do("replace missing", unix.Setxattr(r.p("f"), "user.c", []byte("x"), unix.XATTR_REPLACE))
		r.do("replace", unix.Setxattr(r.p("f"), "user.a", []byte("ALPHA"), unix.XATTR_REPLACE))
		r.xattrGet("f", "user.a")
		n, err := unix.Getxattr(r.p("f"), "user.a", make([]byte, 2))
		r.note("get small buffer", strconv.Itoa(n), err)
		n, err = unix.Getxattr(r.p("f"), "user.a", nil)
		r.note("get size", strconv.Itoa(n), err)
		n, err = unix.Listxattr(r.p("f"), nil)
		r.note("list size", strconv.Itoa(n), err)
		r.xattrGet("f", "user.missing")
		r.do("remove user.a", unix.Removexattr(r.p("f"), "user.a"))
		r.do("remove user.a again", unix.Removexattr(r.p("f"), "user.a"))
		r.xattrList("f")
		r.xattrGet("f", "trusted.nope")
	}},
	{name: "user xattr on symlink", want: unix.EPERM, fn: func(r *rec) {
		r.write("f", "")
		r.symlink("f", "l")
		r.do("lsetxattr l", unix.Lsetxattr(r.p("l"), "user.a", []byte("x"), 0))
	}},
	{name: "xattr survives rename and link", fn: func(r *rec) {
		r.write("f", "")
		r.do("set", unix.Setxattr(r.p("f"), "user.k", []byte("v"), 0))
		r.rename("f", "g")
		r.link("g", "h")
		r.xattrGet("h", "user.k")
	}},
	{name: "trusted xattr refused", want: unix.EOPNOTSUPP, artOnly: "as root the plain ext4/tmpfs directory stores trusted.*; art keeps user.* only (DESIGN 4)", fn: func(r *rec) {
		r.write("f", "")
		r.do("set trusted.a", unix.Setxattr(r.p("f"), "trusted.a", []byte("x"), 0))
	}},
	{name: "security xattr refused", want: unix.EOPNOTSUPP, artOnly: "as root the plain directory stores security.*; art keeps user.* only", fn: func(r *rec) {
		r.write("f", "")
		r.do("set security.a", unix.Setxattr(r.p("f"), "security.a", []byte("x"), 0))
	}},

	// Special files.
	{name: "mknod fifo and regular", fn: func(r *rec) {
		r.do("mkfifo", unix.Mkfifo(r.p("p"), 0o640))
		r.stat("p")
		r.do("mknod regular", unix.Mknod(r.p("r"), unix.S_IFREG|0o600, 0))
		r.stat("r")
		r.ls("")
	}},
	{name: "mknod char device refused", want: unix.EPERM, artOnly: "root may mknod devices on the plain directory; art has no device nodes", fn: func(r *rec) {
		r.do("mknod chr", unix.Mknod(r.p("c"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	}},
	{name: "symlink basics", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		r.write("d/f", "through link")
		r.symlink("d/f", "l")
		r.symlink("/nonexistent/abs", "abs")
		r.stat("l")
		r.statf("l")
		r.read("l")
		b := make([]byte, 100)
		n, err := unix.Readlink(r.p("abs"), b)
		if n < 0 {
			n = 0
		}
		r.note("readlink abs", strconv.Quote(string(b[:n])), err)
		n, err = unix.Readlink(r.p("l"), b[:3])
		if n < 0 {
			n = 0
		}
		r.note("readlink short buffer", strconv.Quote(string(b[:n])), err)
		r.symlink("d", "ld")
		r.write("ld/g", "via dir link")
		r.read("d/g")
		r.ls("")
	}},
	{name: "odd names", fn: func(r *rec) {
		for _, n := range []string{"sp ace", "tab\tnl\n", "ü-ñ", "\x80\xff", "-", "..."} {
			r.write(n, n)
		}
		r.ls("")
		r.read("\x80\xff")
	}},
	{name: "many entries", fn: func(r *rec) {
		r.mkdir("d", 0o755)
		for i := 0; i < 300; i++ {
			if i%3 == 0 {
				r.mkdir(fmt.Sprintf("d/n%03d", i), 0o755)
			} else {
				r.write(fmt.Sprintf("d/n%03d", i), "")
			}
		}
		for i := 0; i < 300; i += 7 {
			if i%3 == 0 {
				r.rmdir(fmt.Sprintf("d/n%03d", i))
			} else {
				r.unlink(fmt.Sprintf("d/n%03d", i))
			}
		}
		r.ls("d")
		r.stat("d")
	}},
	{name: "umask and create modes", fn: func(r *rec) {
		r.close(r.open("f777", unix.O_CREAT|unix.O_WRONLY, 0o777))
		r.close(r.open("f000", unix.O_CREAT|unix.O_WRONLY, 0))
		r.mkdir("d700", 0o700)
		r.mkdir("d1777", 0o1777)
		r.stat("f777")
		r.stat("f000")
		r.stat("d700")
		r.stat("d1777")
	}},
	{name: "root writes read-only file", fn: func(r *rec) {
		r.close(r.open("f", unix.O_CREAT|unix.O_WRONLY, 0o444))
		fd := r.open("f", unix.O_WRONLY, 0)
		r.pwrite(fd, "root may", 0)
		r.close(fd)
		r.read("f")
	}},
	{name: "statfs", fn: func(r *rec) {
		var st unix.Statfs_t
		err := unix.Statfs(r.p(""), &st)
		r.note("statfs", fmt.Sprintf("blocks>0=%v bsize>0=%v files>0=%v namelen=%d", st.Blocks > 0, st.Bsize > 0, st.Files > 0, st.Namelen), err)
	}},
}

// TestDifferential runs diffCases on a plain directory and on an art
// mount, then remounts the store and requires every case's final tree to
// have survived.
func TestDifferential(t *testing.T) { runDifferential(t) }

// TestDifferentialPassthrough runs the differential cases with every open
// of a file with content served by FUSE passthrough.
func TestDifferentialPassthrough(t *testing.T) {
	t.Cleanup(overlay.PassthroughAll()) // restored after the unmount: daemon goroutines read it
	runDifferential(t)
}

func runDifferential(t *testing.T) {
	s := newStore(t)
	plain := t.TempDir()
	dirOf := func(i int) string { return fmt.Sprintf("c%02d", i) }
	agreed := make([]bool, len(diffCases))
	for i, c := range diffCases {
		t.Run(c.name, func(t *testing.T) {
			pr := &rec{root: filepath.Join(plain, dirOf(i))}
			ar := &rec{root: filepath.Join(s.mnt, dirOf(i))}
			for _, r := range []*rec{pr, ar} {
				if err := os.Mkdir(r.root, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			c.fn(pr)
			c.fn(ar)
			if c.artOnly != "" {
				t.Logf("art only: %s; the plain directory gave:\n%s", c.artOnly, strings.Join(pr.steps, "\n"))
				if got := errnoOf(ar.last); got != c.want {
					t.Fatalf("art: last step gave %s, want %s\n%s", ar.errName(ar.last), errName(c.want), strings.Join(ar.steps, "\n"))
				}
				return
			}
			var problems []string
			if d := diffResults(pr.steps, ar.steps); d != "" {
				problems = append(problems, "plain directory and art differ:\n"+d)
			}
			for _, r := range []*rec{pr, ar} {
				if got := errnoOf(r.last); got != c.want {
					problems = append(problems, fmt.Sprintf("%s: last step gave %s, want %s", r.root, r.errName(r.last), errName(c.want)))
				}
			}
			ps, err := treeShape(pr.root)
			if err != nil {
				t.Fatal(err)
			}
			as, err := treeShape(ar.root)
			if err != nil {
				problems = append(problems, fmt.Sprintf("art tree: %v", err))
			} else if ps != as {
				problems = append(problems, fmt.Sprintf("final trees differ:\nplain:\n%sart:\n%s", ps, as))
			}
			switch {
			case len(problems) > 0 && c.bug != "":
				t.Skipf("BUG: %s\n%s", c.bug, strings.Join(problems, "\n"))
			case len(problems) > 0:
				t.Error(strings.Join(problems, "\n"))
			case c.bug != "":
				t.Errorf("the case passes now: delete its bug note %q", c.bug)
			default:
				agreed[i] = true
			}
		})
	}
	// Everything each case left behind must be in the store, times too.
	opts := testutil.TreeOptions{DirMTimes: true, Owners: true}
	before := testutil.DescribeTree(t, s.mnt, opts)
	s.remount()
	if d := testutil.DiffTrees(before, testutil.DescribeTree(t, s.mnt, opts)); d != "" {
		t.Errorf("before (first) and after (second) remount differ:\n%s", d)
	}
	for i, c := range diffCases {
		if !agreed[i] {
			continue
		}
		ps, err := treeShape(filepath.Join(plain, dirOf(i)))
		if err != nil {
			t.Fatal(err)
		}
		as, err := treeShape(filepath.Join(s.mnt, dirOf(i)))
		if err != nil {
			t.Errorf("%s after remount: %v", c.name, err)
			continue
		}
		if ps != as {
			t.Errorf("%s: after remount the trees differ:\nplain:\n%sart:\n%s", c.name, ps, as)
		}
	}
	s.unmount()
	s.verify()
}

func errName(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return unix.ErrnoName(e)
}

// diffResults shows the two step lists side by side from the first
// difference, or "" when they agree.
func diffResults(a, b result) string {
	n := max(len(a), len(b))
	first := -1
	for i := 0; i < n; i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			first = i
			break
		}
	}
	if first < 0 {
		return ""
	}
	var out strings.Builder
	for i := 0; i < n; i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		mark := "  "
		if x != y {
			mark = "! "
		}
		fmt.Fprintf(&out, "%splain: %s\n%sart:   %s\n", mark, x, mark, y)
	}
	return out.String()
}

// TestDifferentialEXDEV checks the one errno the table cannot reach from
// inside a single mount: leaving it.
func TestDifferentialEXDEV(t *testing.T) {
	s := newStore(t)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(s.mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Rename(filepath.Join(s.mnt, "f"), filepath.Join(out, "f")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("rename out of the mount: %v, want EXDEV", err)
	}
	if err := unix.Link(filepath.Join(s.mnt, "f"), filepath.Join(out, "f")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("link out of the mount: %v, want EXDEV", err)
	}
	if err := os.WriteFile(filepath.Join(out, "g"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Rename(filepath.Join(out, "g"), filepath.Join(s.mnt, "g")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("rename into the mount: %v, want EXDEV", err)
	}
}

// TestDifferentialAtRoot runs namespace cases in the mount's root
// directory itself, whose node the mount makes apart from all others.
func TestDifferentialAtRoot(t *testing.T) {
	s := newStore(t)
	plain := t.TempDir()
	fn := func(r *rec) {
		r.mkdir("a", 0o755)
		r.mkdir("b", 0o755)
		r.stat("")
		r.rename("a", "b/a")
		r.stat("")
		r.stat("b")
		r.rename("b/a", "a")
		r.stat("")
		r.mkdir("b/c", 0o755)
		r.rename2("a", "b/c", unix.RENAME_EXCHANGE)
		r.stat("")
		r.rename("b", "a/b")
		r.stat("")
		r.rmdir("a/b/c")
		r.rmdir("a/b")
		r.stat("")
	}
	pr, ar := &rec{root: plain}, &rec{root: s.mnt}
	fn(pr)
	fn(ar)
	if d := diffResults(pr.steps, ar.steps); d != "" {
		t.Errorf("the mount root's nlink differs from a plain directory's (regression: Mount must register the root in FS.nodes so refreshes reach it):\n%s", d)
	}
}

// unprivScript runs as uid 1000 in a directory prepared by
// prepareUnpriv; it prints one line per step, errors included.
const unprivScript = `
cd "$1" || exit 1
step() { printf '%s: ' "$1"; shift; "$@" 2>/dev/null && echo ok || echo "fails $?"; }
st() { stat -c '%n %A %u %g' "$@"; }
step "write root's file" sh -c 'echo x > rootonly/f'
step "create in root's dir" touch rootonly/new
step "read root's file" cat rootonly/f
step "truncate root's file" truncate -s 0 rootonly/f
step "chmod root's file" chmod 777 rootonly/f
step "create in sticky dir" touch shared/mine
st shared/mine
step "remove root's file from sticky dir" rm -f shared/rootfile
step "rename root's file in sticky dir" mv shared/rootfile shared/taken
step "remove own file from sticky dir" rm shared/mine
step "append to own setuid file" sh -c 'echo more >> owned/suid'
st owned/suid
wc -c < owned/suid
step "chmod own file setuid" chmod 4755 owned/suid
st owned/suid
step "chown own file to root" chown 0 owned/suid
step "chgrp own file to a foreign group" chgrp 4242 owned/suid
step "set own file's mtime" touch -d @1234567890 owned/suid
stat -c '%n %Y' owned/suid
step "set mtime of root's writable file" touch -d @1234567890 shared/rootwritable
step "touch root's writable file now" touch shared/rootwritable
step "create in setgid dir" touch sg/f
step "mkdir in setgid dir" mkdir sg/d
st sg/f sg/d
step "list root-only dir" ls noaccess
step "traverse root-only dir" cat noaccess/f
`

// prepareUnpriv sets up, as root, what unprivScript works on.
func prepareUnpriv(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct {
		name string
		mode uint32
		uid  int
		gid  int
	}{{"rootonly", 0o755, 0, 0}, {"shared", 0o1777, 0, 0}, {"owned", 0o755, 1000, 1000}, {"sg", 0o2777, 0, 4242}, {"noaccess", 0o700, 0, 0}} {
		p := filepath.Join(dir, d.name)
		must(os.Mkdir(p, 0o700))
		must(os.Chown(p, d.uid, d.gid))
		must(os.Chmod(p, os.FileMode(d.mode&0o777)|modeBits(d.mode)))
	}
	for _, f := range []struct {
		name string
		mode uint32
		uid  int
	}{{"rootonly/f", 0o644, 0}, {"shared/rootfile", 0o666, 0}, {"shared/rootwritable", 0o666, 0}, {"owned/suid", 0o4755, 1000}, {"noaccess/f", 0o644, 0}} {
		p := filepath.Join(dir, f.name)
		must(os.WriteFile(p, []byte("content\n"), 0o600))
		must(os.Chown(p, f.uid, f.uid))
		must(os.Chmod(p, os.FileMode(f.mode&0o777)|modeBits(f.mode)))
	}
}

func modeBits(m uint32) os.FileMode {
	var b os.FileMode
	if m&0o4000 != 0 {
		b |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		b |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		b |= os.ModeSticky
	}
	return b
}

// TestDifferentialUnprivileged runs the same script as an unprivileged
// user on a plain directory and on art (mounted allow_other): the kernel
// checks permissions against the modes and owners art reports, and art
// sets owners and clears setuid on its own.
func TestDifferentialUnprivileged(t *testing.T) {
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to another user")
	}
	for _, tool := range []string{"stat", "truncate", "chgrp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	s := newStoreWith(t, overlay.Options{Branch: "main", AllowOther: true})
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	// Let uid 1000 reach both: the test's temporary directories are 0700.
	for _, d := range []string{s.mnt, plain} {
		for p := filepath.Dir(d); p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(s.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dir string) string {
		prepareUnpriv(t, dir)
		cmd := exec.Command("/bin/sh", "-c", unprivScript, "sh", dir)
		cmd.Dir = "/" // never start a child inside our own mount (see sh in programs_test.go)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("script in %s: %v\n%s", dir, err, out)
		}
		return strings.ReplaceAll(string(out), dir, "ROOT")
	}
	want, got := run(plain), run(s.mnt)
	if !strings.Contains(want, "create in sticky dir: ok") || !strings.Contains(want, "write root's file: fails") {
		t.Fatalf("the script did not run as intended on the plain directory:\n%s", want)
	}
	if want != got {
		wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
		t.Errorf("as uid 1000, plain directory and art differ:\n%s", diffResults(wl, gl))
	}
}
