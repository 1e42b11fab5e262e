package journal

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// The state transitions of a projection. Each validates like the kernel
// would (returning a syscall.Errno) before changing anything, so a failed
// operation leaves no trace. Live writes (Tx) and replay both call these.

func checkName(name []byte) error {
	switch {
	case len(name) > 255:
		return syscall.ENAMETOOLONG
	case len(name) == 0, bytes.Equal(name, []byte(".")), bytes.Equal(name, []byte("..")),
		bytes.IndexByte(name, '/') >= 0, bytes.IndexByte(name, 0) >= 0:
		return syscall.EINVAL
	}
	return nil
}

// mknode creates name in parent as described by a (file, dir, symlink,
// fifo, or a socket, which lives only in the projection: encodeDir leaves
// it out of trees).
func (p *proj) mknode(parent int64, name []byte, a Attr) (*Node, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	switch a.Kind {
	case cas.EntryFile, cas.EntryDir, cas.EntrySymlink, cas.EntryFifo, cas.EntrySocket:
	default:
		return nil, syscall.EINVAL
	}
	if a.Kind == cas.EntrySymlink && (len(a.Link) == 0 || len(a.Link) > 4095 || bytes.IndexByte(a.Link, 0) >= 0) {
		return nil, syscall.EINVAL
	}
	if err := p.dir(parent); err != nil {
		return nil, err
	}
	xs, err := normXattrs(a.Xattrs)
	if err == nil && a.Kind == cas.EntryFile && a.Content.IsZero() {
		err = fmt.Errorf("create %s: file without content manifest: %w", termtext.QuotePath(name), syscall.EINVAL)
	}
	if err != nil {
		if ino, lerr := p.lookup(parent, name); lerr != nil {
			return nil, lerr
		} else if ino != 0 {
			return nil, syscall.EEXIST // what the kernel reports first
		}
		return nil, err
	}
	// The name goes in first, and only if it is free: the insert is the
	// EEXIST check (one statement less than a lookup before it).
	ino := p.nextIno
	if added, err := p.execCount(`INSERT OR IGNORE INTO dentries (branch, parent, name, ino) VALUES (?,?,?,?)`, p.branch, parent, name, ino); err != nil {
		return nil, err
	} else if added == 0 {
		return nil, syscall.EEXIST
	}
	n := &Node{Ino: p.alloc(), Attr: a, CTime: p.now, Nlink: 1}
	n.Mode &= 0o7777
	n.Xattrs = xs
	switch a.Kind {
	case cas.EntryDir:
		n.Nlink, n.Parent, n.state, n.Content, n.Size = 2, parent, dirDirty, cas.ID{}, 0
		if err := p.adjustNlink(parent, +1); err != nil {
			return nil, err
		}
	case cas.EntrySymlink:
		n.Size, n.Content = int64(len(a.Link)), cas.ID{}
	case cas.EntryFifo, cas.EntrySocket:
		n.Size, n.Content = 0, cas.ID{}
	}
	if err := p.insert(n); err != nil {
		return nil, err
	}
	return n, p.markDirty(parent)
}

// link gives the non-directory ino another name.
func (p *proj) link(ino, parent int64, name []byte) (*Node, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	n, err := p.get(ino)
	if err != nil {
		return nil, err
	}
	if n.IsDir() {
		return nil, syscall.EPERM
	}
	if err := p.dir(parent); err != nil {
		return nil, err
	}
	if other, err := p.lookup(parent, name); err != nil {
		return nil, err
	} else if other != 0 {
		return nil, syscall.EEXIST
	}
	if err := p.exec(`INSERT INTO dentries (branch, parent, name, ino) VALUES (?,?,?,?)`, p.branch, parent, name, ino); err != nil {
		return nil, err
	}
	p.paths.named(ino, parent, name)
	n.Nlink++
	n.CTime = p.now
	grouped := false
	if n.Kind == cas.EntryFile && n.LinkGroup == 0 {
		grouped = true
		var max uint64
		if err := p.tx.QueryRowContext(p.ctx, `SELECT coalesce(max(grp), 0) FROM link_groups WHERE branch = ?`, p.branch).Scan(&max); err != nil {
			return nil, err
		}
		n.LinkGroup = max + 1
		if err := p.exec(`INSERT INTO link_groups (branch, grp, ino) VALUES (?,?,?)`, p.branch, n.LinkGroup, ino); err != nil {
			return nil, err
		}
	}
	if err := p.put(n); err != nil {
		return nil, err
	}
	if grouped {
		return n, p.touch(n) // every name's entry now carries the group
	}
	// Only the new name's directory changed (entries hold no link count
	// or ctime): touching every name would make n links cost n^2.
	return n, p.markDirty(parent)
}

// dropName removes the dentry parent/name of node n and adjusts link counts.
// Callers have checked kind and emptiness.
func (p *proj) dropName(parent int64, name []byte, n *Node) error {
	if err := p.exec(`DELETE FROM dentries WHERE branch = ? AND parent = ? AND name = ?`, p.branch, parent, name); err != nil {
		return err
	}
	p.paths.forget(n.Ino)
	if n.IsDir() {
		// The directory is empty, so no cached path runs through it but
		// its own: the other paths stay (clearing them all cost every
		// rmdir of an rm -rf a walk up the tree at the next removal).
		delete(p.paths.dirs, n.Ino)
		if err := p.exec(`DELETE FROM nodes WHERE branch = ? AND ino = ?`, p.branch, n.Ino); err != nil {
			return err
		}
		// A loaded directory was checked empty by its dentries, so there
		// is nothing below it to delete; a collapsed one was checked by
		// its tree, and holds no rows unless the store is damaged, which
		// the delete keeps from outliving it.
		if n.state == dirCollapsed {
			if err := p.exec(`DELETE FROM dentries WHERE branch = ? AND parent = ?`, p.branch, n.Ino); err != nil {
				return err
			}
		}
		delete(p.dirs, n.Ino)
		if err := p.exec(`UPDATE nodes SET nlink = nlink - 1 WHERE branch = ? AND ino = ?`, p.branch, parent); err != nil {
			return err
		}
		return p.markDirty(parent)
	}
	n.Nlink--
	n.CTime = p.now
	switch {
	case n.Nlink <= 0:
		if err := p.exec(`DELETE FROM nodes WHERE branch = ? AND ino = ?`, p.branch, n.Ino); err != nil {
			return err
		}
		if n.LinkGroup != 0 {
			if err := p.exec(`DELETE FROM link_groups WHERE branch = ? AND grp = ?`, p.branch, n.LinkGroup); err != nil {
				return err
			}
		}
	case n.Nlink == 1 && n.LinkGroup != 0:
		if err := p.exec(`DELETE FROM link_groups WHERE branch = ? AND grp = ?`, p.branch, n.LinkGroup); err != nil {
			return err
		}
		n.LinkGroup = 0
		if err := p.put(n); err != nil {
			return err
		}
		if err := p.touch(n); err != nil {
			return err
		}
	default:
		if err := p.put(n); err != nil {
			return err
		}
	}
	return p.markDirty(parent)
}

// isEmptyDir reports whether directory n has no entries, without loading
// a collapsed one.
func (p *proj) isEmptyDir(n *Node) (bool, error) {
	if n.state == dirCollapsed {
		t, err := p.objs.GetTree(p.ctx, n.Content)
		if err != nil {
			return false, err
		}
		return len(t.Entries) == 0, nil
	}
	var one int
	err := p.tx.QueryRowContext(p.ctx, `SELECT count(*) FROM (SELECT 1 FROM dentries WHERE branch = ? AND parent = ? LIMIT 1)`, p.branch, n.Ino).Scan(&one)
	return one == 0, err
}

// child returns the node called name in parent (ENOENT when absent).
func (p *proj) child(parent int64, name []byte) (*Node, error) {
	n, err := p.lookupNode(parent, name)
	if err == nil && n == nil {
		err = syscall.ENOENT
	}
	return n, err
}

// lookupNode returns the node called name in parent, nil when absent:
// the name and the node in one query.
func (p *proj) lookupNode(parent int64, name []byte) (*Node, error) {
	if err := p.dir(parent); err != nil {
		return nil, err
	}
	if l := &p.last; l.writes == p.writes && l.parent == parent && bytes.Equal(l.name, name) {
		n := l.node
		return &n, nil
	}
	// A subquery, not a join: measured 4 us against 20 (the join costs
	// more per execution than a second query).
	s, err := p.stmt(`SELECT ` + nodeCols + `, ino FROM nodes
		WHERE branch = ?1 AND ino = (SELECT ino FROM dentries WHERE branch = ?1 AND parent = ?2 AND name = ?3)`)
	if err != nil {
		return nil, err
	}
	n := &Node{}
	if err := scanNode(s.QueryRowContext(p.ctx, p.branch, parent, name), n, &n.Ino); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("look up %s in inode %d: %w", termtext.QuotePath(name), parent, err)
	}
	if n.IsDir() {
		p.dirs[n.Ino] = n.state
	}
	p.remember(n, parent, name)
	return n, nil
}

func (p *proj) unlink(parent int64, name []byte) error {
	if err := p.dir(parent); err != nil {
		return err
	}
	// The common case - the only name of a file in no link group (every
	// unlink of an rm -rf) - deletes the node without reading it first
	// (its 13 columns cost more than the delete): the delete matches only
	// such a node, and then what dropName would do is just to drop its
	// name too. Anything else (a directory, a hard link, no such name)
	// deletes nothing and takes the general path, which tells them apart.
	// The file's inode is read first only when the path cache may hold
	// it (a file created or changed in this batch), to forget it there.
	const onlyName = ` AND kind != ? AND nlink = 1 AND link_group = 0`
	var gone int64
	var ino int64
	var err error
	if p.paths.holdsFiles() {
		if ino, err = p.lookup(parent, name); err != nil {
			return err
		} else if ino == 0 {
			return syscall.ENOENT
		}
		gone, err = p.execCount(`DELETE FROM nodes WHERE branch = ? AND ino = ?`+onlyName, p.branch, ino, int(cas.EntryDir))
	} else {
		gone, err = p.execCount(`DELETE FROM nodes WHERE branch = ?1 AND ino = (SELECT ino FROM dentries WHERE branch = ?1 AND parent = ?2 AND name = ?3)`+onlyName,
			p.branch, parent, name, int(cas.EntryDir))
	}
	if err != nil {
		return err
	}
	if gone == 1 {
		if err := p.exec(`DELETE FROM dentries WHERE branch = ? AND parent = ? AND name = ?`, p.branch, parent, name); err != nil {
			return err
		}
		p.paths.forget(ino)
		return p.markDirty(parent)
	}
	n, err := p.child(parent, name)
	if err != nil {
		return err
	}
	if n.IsDir() {
		return syscall.EISDIR
	}
	return p.dropName(parent, name, n)
}

func (p *proj) rmdir(parent int64, name []byte) error {
	n, err := p.child(parent, name)
	if err != nil {
		return err
	}
	if !n.IsDir() {
		return syscall.ENOTDIR
	}
	if empty, err := p.isEmptyDir(n); err != nil {
		return err
	} else if !empty {
		return syscall.ENOTEMPTY
	}
	return p.dropName(parent, name, n)
}

// isAncestor reports whether dir a is dir b or one of b's ancestors.
func (p *proj) isAncestor(a, b int64) (bool, error) {
	for cur := b; ; {
		if cur == a {
			return true, nil
		}
		if cur == RootIno {
			return false, nil
		}
		n, err := p.get(cur)
		if err != nil {
			return false, err
		}
		cur = n.Parent
	}
}

// rename implements rename(2) and renameat2's NOREPLACE and EXCHANGE.
func (p *proj) rename(op int64, on []byte, np int64, nn []byte, flags uint32) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return syscall.EINVAL
	}
	if err := checkName(nn); err != nil {
		return err
	}
	src, err := p.child(op, on)
	if err != nil {
		return err
	}
	dst, err := p.lookupNode(np, nn)
	if err != nil {
		return err
	}
	switch {
	case flags&RenameNoReplace != 0 && dst != nil:
		return syscall.EEXIST
	case flags&RenameExchange != 0 && dst == nil:
		return syscall.ENOENT
	}
	if dst != nil && dst.Ino == src.Ino {
		return nil // two names of one file, or the same name: nothing to do
	}
	// A directory may not move below itself.
	if src.IsDir() {
		if in, err := p.isAncestor(src.Ino, np); err != nil {
			return err
		} else if in {
			return syscall.EINVAL
		}
	}
	if flags&RenameExchange != 0 {
		if dst.IsDir() {
			if in, err := p.isAncestor(dst.Ino, op); err != nil {
				return err
			} else if in {
				return syscall.EINVAL
			}
		}
		return p.exchange(op, on, src, np, nn, dst)
	}
	if dst != nil {
		switch {
		case src.IsDir() && !dst.IsDir():
			return syscall.ENOTDIR
		case !src.IsDir() && dst.IsDir():
			return syscall.EISDIR
		case dst.IsDir():
			if empty, err := p.isEmptyDir(dst); err != nil {
				return err
			} else if !empty {
				return syscall.ENOTEMPTY
			}
		}
		if err := p.dropName(np, nn, dst); err != nil {
			return err
		}
	}
	if err := p.exec(`DELETE FROM dentries WHERE branch = ? AND parent = ? AND name = ?`, p.branch, op, on); err != nil {
		return err
	}
	if err := p.exec(`INSERT INTO dentries (branch, parent, name, ino) VALUES (?,?,?,?)`, p.branch, np, nn, src.Ino); err != nil {
		return err
	}
	p.paths.forget(src.Ino)
	src.CTime = p.now
	if src.IsDir() {
		p.paths.clear()
		if op != np {
			if err := p.adjustNlink(op, -1); err != nil {
				return err
			}
			if err := p.adjustNlink(np, +1); err != nil {
				return err
			}
		}
		src.Parent = np
	}
	if err := p.put(src); err != nil {
		return err
	}
	if err := p.markDirty(op); err != nil {
		return err
	}
	return p.markDirty(np)
}

func (p *proj) exchange(op int64, on []byte, src *Node, np int64, nn []byte, dst *Node) error {
	if err := p.exec(`UPDATE dentries SET ino = ? WHERE branch = ? AND parent = ? AND name = ?`, dst.Ino, p.branch, op, on); err != nil {
		return err
	}
	if err := p.exec(`UPDATE dentries SET ino = ? WHERE branch = ? AND parent = ? AND name = ?`, src.Ino, p.branch, np, nn); err != nil {
		return err
	}
	p.paths.clear()
	for _, m := range []struct {
		n      *Node
		parent int64
	}{{src, np}, {dst, op}} {
		m.n.CTime = p.now
		if m.n.IsDir() && op != np {
			old := m.n.Parent
			m.n.Parent = m.parent
			if err := p.adjustNlink(old, -1); err != nil {
				return err
			}
			if err := p.adjustNlink(m.parent, +1); err != nil {
				return err
			}
		}
		if err := p.put(m.n); err != nil {
			return err
		}
	}
	if err := p.markDirty(op); err != nil {
		return err
	}
	return p.markDirty(np)
}

func (p *proj) adjustNlink(dir int64, delta int) error {
	return p.exec(`UPDATE nodes SET nlink = nlink + ? WHERE branch = ? AND ino = ?`, delta, p.branch, dir)
}

// setattr applies the fields of a selected by mask to ino.
func (p *proj) setattr(n *Node, mask uint32, a Attr) (*Node, error) {
	if mask&SetMode != 0 {
		n.Mode = a.Mode & 0o7777
	}
	if mask&SetUID != 0 {
		n.UID = a.UID
	}
	if mask&SetGID != 0 {
		n.GID = a.GID
	}
	if mask&SetMTime != 0 {
		n.MTime = a.MTime
	}
	if mask&SetXattrs != 0 {
		xs, err := normXattrs(a.Xattrs)
		if err != nil {
			return nil, err
		}
		n.Xattrs = xs
	}
	n.CTime = p.now
	if err := p.put(n); err != nil {
		return nil, err
	}
	return n, p.touch(n)
}

// write sets a file's content (a manifest already stored) and mtime.
func (p *proj) write(n *Node, content cas.ID, size, mtime int64) (*Node, error) {
	switch {
	case n.IsDir():
		return nil, syscall.EISDIR
	case n.Kind != cas.EntryFile:
		return nil, syscall.EINVAL
	case content.IsZero() || size < 0:
		return nil, syscall.EINVAL
	}
	n.Content, n.Size, n.MTime, n.CTime = content, size, mtime, p.now
	if err := p.put(n); err != nil {
		return nil, err
	}
	return n, p.touch(n)
}

func (p *proj) setxattr(n *Node, name string, value []byte) (*Node, error) {
	xs := append([]cas.Xattr(nil), n.Xattrs...)
	i := sort.Search(len(xs), func(i int) bool { return xs[i].Name >= name })
	if i < len(xs) && xs[i].Name == name {
		xs[i].Value = value
	} else {
		xs = append(xs[:i], append([]cas.Xattr{{Name: name, Value: value}}, xs[i:]...)...)
	}
	xs, err := normXattrs(xs)
	if err != nil {
		return nil, err
	}
	n.Xattrs, n.CTime = xs, p.now
	if err := p.put(n); err != nil {
		return nil, err
	}
	return n, p.touch(n)
}

func (p *proj) removexattr(n *Node, name string) (*Node, error) {
	i := sort.Search(len(n.Xattrs), func(i int) bool { return n.Xattrs[i].Name >= name })
	if i == len(n.Xattrs) || n.Xattrs[i].Name != name {
		return nil, syscall.ENODATA
	}
	n.Xattrs = append(append([]cas.Xattr(nil), n.Xattrs[:i]...), n.Xattrs[i+1:]...)
	n.CTime = p.now
	if err := p.put(n); err != nil {
		return nil, err
	}
	return n, p.touch(n)
}

// MaxXattrs bounds a node's user.* xattrs (count and total bytes, like ext4's
// one-block limit keeps them small).
const (
	MaxXattrs     = 128
	MaxXattrBytes = 64 << 10
)

// normXattrs sorts and checks an xattr set: user.* names only (EOPNOTSUPP
// otherwise, as a filesystem without that namespace answers), unique.
func normXattrs(xs []cas.Xattr) ([]cas.Xattr, error) {
	if len(xs) == 0 {
		return nil, nil
	}
	xs = append([]cas.Xattr(nil), xs...)
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	total := 0
	for i, x := range xs {
		if len(x.Name) <= len("user.") || x.Name[:5] != "user." || len(x.Name) > 255 {
			return nil, syscall.EOPNOTSUPP
		}
		if i > 0 && xs[i-1].Name == x.Name {
			return nil, syscall.EINVAL
		}
		total += len(x.Name) + len(x.Value)
	}
	if len(xs) > MaxXattrs || total > MaxXattrBytes {
		return nil, syscall.ENOSPC
	}
	return xs, nil
}
