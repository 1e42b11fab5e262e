package journal

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
)

// ErrGCDuringBackup is returned by Backup when a gc completed while it
// copied: the pack bytes of objects that gc removed may be gone from the
// packs the copy took while its rows still name them.
var ErrGCDuringBackup = errclass.New(errclass.Conflict, "a gc ran during the backup")

// BackupReport says what Backup copied.
type BackupReport struct {
	Dest      string `json:"dest"`
	FileBytes int64  `json:"file_bytes"` // the copied store file
	Packs     int    `json:"packs"`      // pack files copied
	PackBytes int64  `json:"pack_bytes"` // bytes of them copied
}

// Backup copies the store, while other processes may be using it, to a
// new store at dest: the file and its pack directory (cas.PacksDir), as
// one consistent state of the whole store (history included, unlike a
// push to a store file, which sends the branches' states). The file is
// copied with VACUUM INTO (a snapshot taken in one read transaction);
// then each pack the copy's rows name, up to the end of the last range
// they name: packs are only appended to, so those bytes are there and
// final. gc is the one thing that changes bytes a row named (it punches
// the bytes of the objects it removes): if a gc completed meanwhile
// (GCGeneration moved), the copy is removed and ErrGCDuringBackup
// returned. dest and its pack directory must not exist; the file appears
// last, once its packs are complete and synced, so a dest that exists is
// whole.
func (db *DB) Backup(ctx context.Context, dest string) (*BackupReport, error) {
	destPacks := cas.PacksDir(dest)
	for _, p := range []string{dest, destPacks} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("backup to %s: %w", p, fs.ErrExist)
		}
	}
	gen, err := db.GCGeneration(ctx)
	if err != nil {
		return nil, err
	}
	tmp := dest + ".art-backup"
	tmpPacks := cas.PacksDir(tmp)
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
			os.RemoveAll(tmpPacks)
		}
	}()
	// VACUUM INTO wants a missing or empty file: an empty private one, as
	// the store holds every byte the agent wrote.
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	f.Close()
	if err := vacuumInto(ctx, db.path, tmp); err != nil {
		return nil, fmt.Errorf("backup: copy %s: %w", db.path, err)
	}
	rep := &BackupReport{Dest: dest}
	if st, err := os.Stat(tmp); err == nil {
		rep.FileBytes = st.Size()
	}
	ends, err := packEnds(ctx, tmp)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if len(ends) > 0 {
		if err := os.Mkdir(tmpPacks, 0o700); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
		for num, end := range ends {
			if err := copyPack(db.packs.Dir(), tmpPacks, num, end); err != nil {
				return nil, fmt.Errorf("backup: %w", err)
			}
			rep.Packs++
			rep.PackBytes += end
		}
		if err := syncDir(tmpPacks); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
	}
	if now, err := db.GCGeneration(ctx); err != nil {
		return nil, err
	} else if now != gen {
		return nil, fmt.Errorf("backup: %w (it may have taken bytes the copy names); run it again", ErrGCDuringBackup)
	}
	if err := syncFile(tmp); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if len(ends) > 0 {
		if err := os.Rename(tmpPacks, destPacks); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
	}
	// link, not rename: never replace a dest that appeared meanwhile.
	if err := os.Link(tmp, dest); err != nil {
		os.RemoveAll(destPacks)
		return nil, fmt.Errorf("backup: %w", err)
	}
	os.Remove(tmp)
	ok = true
	if err := syncDir(filepath.Dir(dest)); err != nil {
		return rep, fmt.Errorf("backup: %w", err)
	}
	return rep, nil
}

// vacuumInto writes a consistent copy of the store file at path to dest
// through a connection of its own: read-only (mode=ro), but without the
// pools' query_only, which refuses VACUUM INTO.
func vacuumInto(ctx context.Context, path, dest string) error {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", "5000")
	c, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.ExecContext(ctx, `VACUUM INTO ?`, dest)
	return err
}

// packEnds reads, from the store file at path (a fresh copy nobody else
// has open), the end of the last range its rows name in each pack.
func packEnds(ctx context.Context, path string) (map[int64]int64, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_query_only", "1")
	c, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rows, err := c.QueryContext(ctx, `SELECT pack, max(pack_off + pack_len) FROM objects WHERE pack != 0 GROUP BY pack`)
	if err != nil {
		return nil, fmt.Errorf("read the copy: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var num, end int64
		if err := rows.Scan(&num, &end); err != nil {
			return nil, err
		}
		if _, ok := cas.ParsePackName(cas.PackName(num)); !ok || end < 0 {
			return nil, fmt.Errorf("%w: a row names pack %d", ErrCorrupt, num)
		}
		out[num] = end
	}
	return out, rows.Err()
}

// copyPack copies the first n bytes of pack num from dir to a new file in
// destDir and syncs it. A pack shorter than n is damage the copy would
// carry: refused (art verify names what it affects).
func copyPack(dir, destDir string, num, n int64) error {
	name := cas.PackName(num)
	if st, err := os.Lstat(dir); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("%s: %w", dir, cas.ErrPacksNotDir)
	}
	src, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	defer src.Close()
	if st, err := src.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("pack %s: not a regular file", name)
	} else if st.Size() < n {
		return fmt.Errorf("%w: pack %s holds %d bytes, its rows name %d (art verify shows what is affected)", ErrCorrupt, name, st.Size(), n)
	}
	dst, err := os.OpenFile(filepath.Join(destDir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, n)); err != nil {
		dst.Close()
		return fmt.Errorf("copy pack %s: %w", name, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("copy pack %s: %w", name, err)
	}
	return dst.Close()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
