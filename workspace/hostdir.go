package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/artrt/art/internal/dirent"
	"github.com/artrt/art/internal/termtext"
	"golang.org/x/sys/unix"
)

// direntBufs holds getdents buffers between directories: every capture
// check lists every directory of the workspace.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readHostDir lists host directory path and lstats each entry, in name
// (byte) order. A no-op capture check is mostly this, once per directory:
// so the names are read with getdents into one buffer per directory,
// NUL-terminated, and each lstat is given its name from there (no string
// per entry, no copy per lstat).
func readHostDir(path string) ([]hostEntry, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", termtext.Quote(path), err)
	}
	// Sorted as names, not entries: an entry (with its stat) is ten
	// times the size to move.
	sorted := make([][]byte, len(names.ends))
	start := 0
	for i, end := range names.ends {
		sorted[i] = names.buf[start:end:end]
		start = end + 1 // past the NUL
	}
	slices.SortFunc(sorted, bytes.Compare)
	out := make([]hostEntry, len(sorted))
	for i, name := range sorted {
		out[i].name = name
	}
	n := 0
	for i := range out {
		e := &out[i]
		// e.name's NUL is right past its capacity, in names.buf.
		if err := lstatAt(fd, e.name, &e.st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed while we looked
			}
			return nil, &os.PathError{Op: "lstat", Path: filepath.Join(path, string(e.name)), Err: err}
		}
		e.kind = kindOf(e.st.Mode)
		if n != i {
			out[n] = *e
		}
		n++
	}
	return out[:n], nil
}

// dirNames is a directory's names, each followed by a NUL in buf; ends
// holds the index of each name's NUL.
type dirNames struct {
	buf  []byte
	ends []int
}

// readDirNames reads the names of directory fd but "." and "..".
func readDirNames(fd int) (dirNames, error) {
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	dents := *bp
	var names dirNames
	for {
		n, err := unix.Getdents(fd, dents)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return dirNames{}, err
		}
		if n <= 0 {
			return names, nil
		}
		if names.buf == nil {
			// The names are shorter than their records: one allocation
			// each for most directories (a record is at least 24 bytes).
			names.buf = make([]byte, 0, n)
			names.ends = make([]int, 0, n/24)
		}
		err = dirent.Parse(dents[:n], func(name []byte, _ uint8) {
			names.buf = append(names.buf, name...)
			names.ends = append(names.ends, len(names.buf))
			names.buf = append(names.buf, 0)
		})
		if err != nil {
			return dirNames{}, err
		}
	}
}
