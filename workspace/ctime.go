package workspace

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/artrt/art/cas"
	"golang.org/x/sys/unix"
)

// Whether a host file's ctime can prove it unchanged.
//
// An import record trusts a host file whose size, mtime, ctime and inode
// are the recorded ones. The mtime can be put back by anyone (cp -p,
// rsync -t, touch -d, tar), the ctime cannot: every change of content,
// mode, owner or times sets it to the present. But "the present" is only
// as fine as the filesystem's clock. Where timestamps are coarse (a
// jiffy on older Linux filesystems, 2 s on FAT, the server's on network
// filesystems), an edit that follows the record's stat within the same
// tick, with its size kept and its mtime put back, leaves the stat equal
// and would be taken for no change: the user's edit dropped. So a record
// whose ctime is within the racy window of its stat is racy, as one whose
// mtime is - unless the filesystem has fine-grained ("multigrain")
// change times: Linux 6.13 and later give a file whose ctime was read by
// a stat a strictly later ctime at its next change, so an equal ctime
// proves that nothing changed the file after the stat.
//
// That property is not announced anywhere, so it is probed, on the very
// filesystem, in a file art owns, never in the user's workspace (see
// probeDirs). A device with no such
// directory is taken as coarse. The answer is kept for one import (or
// pull) only: a device number names a mounted filesystem only while it is
// mounted, and another one mounted later may get the same number (as
// anonymous devices such as tmpfs and ramfs do), so a long-lived process
// must not carry it over. A probe costs a create, three stat, write, stat
// rounds and an unlink: microseconds.

// ctimeProbes is the number of stat, write, stat rounds of a probe; one
// ctime left unchanged by a write proves the clock coarse. On a coarse
// filesystem a round crosses a tick only if the tick falls between its
// two stats (microseconds of a millisecond-or-more tick), so three
// rounds all crossing one is beyond chance.
const ctimeProbes = 3

// fineCtime reports whether every change of a file on device dev gets a
// ctime other than the one a stat of it before the change read (see
// above). probeDirs are directories art owns where a probe file may be
// made for a while; the first on dev is used. false when none is.
func fineCtime(dev uint64, probeDirs ...string) bool {
	for _, d := range probeDirs {
		var st unix.Stat_t
		if d == "" || unix.Stat(d, &st) != nil || st.Dev != dev {
			continue
		}
		if fine, ok := probeCtime(d, dev); ok {
			return fine
		}
	}
	return false
}

// probeCtime makes a file in dir and reports whether each of
// ctimeProbes writes after a stat changed its ctime; ok is false when no
// probe could be made there (the file landed on another device, say).
func probeCtime(dir string, dev uint64) (fine, ok bool) {
	f, err := os.CreateTemp(dir, ".art-ctime-probe-*")
	if err != nil {
		return false, false
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fd := int(f.Fd())
	var before, after unix.Stat_t
	for i := 0; i < ctimeProbes; i++ {
		if unix.Fstat(fd, &before) != nil || before.Dev != dev {
			return false, false
		}
		if _, err := unix.Pwrite(fd, []byte{byte(i)}, 0); err != nil {
			return false, false
		}
		if unix.Fstat(fd, &after) != nil {
			return false, false
		}
		if after.Ctim == before.Ctim {
			return false, true
		}
	}
	return true, true
}

// probeDirs are the directories where a probe file may be made for an
// import of host directory ws into the store at dbPath: the store's packs
// directory, which no walk of a workspace enters (StoreFiles), and the
// system's temporary directory and the store file's own directory when
// they are not inside ws - a probe there would change a directory of the
// workspace (its mtime and ctime), which the next check would take for a
// host change, and a walk under way could meet the probe file.
// fineCtime uses the first on the device in question.
func probeDirs(dbPath, ws string) []string {
	var dirs []string
	others := []string{os.TempDir()}
	if dbPath != "" {
		dirs = append(dirs, cas.PacksDir(dbPath))
		others = append(others, filepath.Dir(dbPath))
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real // the store's path is a real one (journal.Open)
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return dirs
	}
	for _, d := range others {
		if d, err = filepath.Abs(d); err != nil {
			continue
		}
		if rel, err := filepath.Rel(ws, d); err == nil && (rel == ".." || strings.HasPrefix(rel, "../")) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
