package main

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// tree is a directory of files the benchmarks push, edit and commit.
type tree struct {
	dir   string
	files []string // relative paths of the regular files, in walk order
	sizes []int64
	bytes int64 // sum of sizes
}

// copyTree copies src to dst: directories, regular files and symlinks, with
// modes and mtimes (so a copy looks like a checkout that has been sitting
// there, not like files written a moment ago). limit > 0 stops after that
// many files, in lexical walk order.
func copyTree(src, dst string, limit int) (*tree, error) {
	t := &tree{dir: dst}
	type dirTime struct {
		path  string
		mtime time.Time
	}
	var dirs []dirTime
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, info.Mode().Perm()|0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{target, info.ModTime()})
		case d.Type().IsRegular():
			if limit > 0 && len(t.files) >= limit {
				return filepath.SkipAll
			}
			if err := copyFile(p, target, info); err != nil {
				return err
			}
			t.files = append(t.files, rel)
			t.sizes = append(t.sizes, info.Size())
			t.bytes += info.Size()
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(l, target); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", src, err)
	}
	// Directory mtimes last (creating entries bumps them), deepest first.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chtimes(dirs[i].path, dirs[i].mtime, dirs[i].mtime); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func copyFile(src, dst string, info fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, info.ModTime(), info.ModTime())
}

// pickFiles returns n distinct indices of [0, total), sorted, chosen by a
// PCG seeded with (seed, round): the same arguments always pick the same
// files.
func pickFiles(total, n int, seed, round uint64) []int {
	n = min(n, total)
	r := rand.New(rand.NewPCG(seed, round))
	idx := r.Perm(total)[:n]
	slices.Sort(idx)
	return idx
}

// editFile changes one file the way a programmer's edit would: when even is
// set and the file has at least 64 bytes, 8 bytes in the middle are
// overwritten (same size); otherwise a line is appended. It returns how many
// bytes the file grew by.
func editFile(path string, even bool, tag string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if even && fi.Size() >= 64 {
		patch := fmt.Sprintf("%-8.8s", tag)
		if _, err := f.WriteAt([]byte(patch), fi.Size()/2); err != nil {
			return 0, err
		}
		return 0, f.Close()
	}
	line := fmt.Sprintf("// edited by art bench: %s\n", tag)
	if _, err := f.WriteAt([]byte(line), fi.Size()); err != nil {
		return 0, err
	}
	return int64(len(line)), f.Close()
}
