package journal

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
)

// RootIno is the art inode number of /home/agent on every branch.
const RootIno int64 = 1

// Directory load states in the nodes table.
const (
	dirCollapsed = 0 // children not loaded; target is the tree id
	dirClean     = 1 // children loaded; target is their tree id
	dirDirty     = 2 // children loaded; target is stale
)

// Node is one file, directory, symlink or fifo of a branch's live tree.
type Node struct {
	Ino int64
	Attr
	CTime     int64
	Nlink     int
	LinkGroup uint64
	Parent    int64 // directories only
	state     int
}

// IsDir reports whether n is a directory.
func (n *Node) IsDir() bool { return n.Kind == cas.EntryDir }

// NlinkKnown reports whether n.Nlink is the node's link count. A
// directory whose children are not loaded yet, as a listing (ReadDir)
// returns it, holds a placeholder there; Lookup and Get give its true
// count.
func (n *Node) NlinkKnown() bool { return !n.IsDir() || n.state != dirCollapsed }

// Dirent is a name in a directory.
type Dirent struct {
	Name []byte
	Node Node
}

// proj is one branch's projection inside one write transaction: the tables
// nodes, dentries and link_groups restricted to branch. It implements the
// state transitions shared by live writes (Tx) and by replay (Materialize).
//
// Directories load lazily: a collapsed directory is just a tree id, and its
// children become rows the first time something looks inside. That makes
// branch creation and checkout O(1), and snapshots O(changed directories):
// a dirty directory's ancestors are always dirty, so computeRoot descends
// only into dirty directories.
type proj struct {
	ctx     context.Context
	tx      cas.DBTX // a *sql.Tx, or the connection a Batch's transaction runs on
	objs    *cas.Store
	branch  int64
	now     int64
	nextIno int64
	paths   *pathCache

	// dirs is the load state (dirCollapsed, dirClean, dirDirty) of the
	// directories this transaction has read or written. It spares the
	// SELECT that checks a parent before each lookup, create or remove
	// and the one that finds it already dirty after. No other connection
	// writes inside the transaction, so it goes stale only through this
	// proj, which keeps it up to date, or a rollback to a savepoint,
	// which clears it (Tx.restore). It never outlives the transaction:
	// another one (a snapshot) may change the states.
	dirs map[int64]int
	// writes counts the statements run through exec, which are all
	// that change the projection's rows: a rollback to a savepoint
	// taken at the same count undoes none of them.
	writes int
	// last is the last node read or written, as its row stands while
	// writes has not moved since: an update often reads a node it has
	// just read or written (the overlay looks a name up and removes it;
	// a close sets attributes and content).
	last lastNode
}

type lastNode struct {
	node   Node
	parent int64 // with name, where lookupNode found it; 0: by ino only
	name   []byte
	writes int // p.writes when it matched the row; -1: none
}

// remember makes n, as its row now stands, the last node.
func (p *proj) remember(n *Node, parent int64, name []byte) {
	c := *n
	// Copies, as scanNode reads them back: the slices may be a caller's
	// buffers (go-fuse reuses the one an xattr value arrives in).
	c.Xattrs = nil
	if len(n.Xattrs) > 0 {
		c.Xattrs = make([]cas.Xattr, len(n.Xattrs))
		for i, x := range n.Xattrs {
			c.Xattrs[i] = cas.Xattr{Name: x.Name, Value: clone(x.Value)}
		}
	}
	switch c.Kind {
	case cas.EntrySymlink:
		c.Content, c.Link = cas.ID{}, clone(n.Link)
	case cas.EntryFile, cas.EntryDir:
		c.Link = nil
	default:
		c.Content, c.Link = cas.ID{}, nil
	}
	p.last = lastNode{node: c, parent: parent, name: append(p.last.name[:0], name...), writes: p.writes}
}

// clone copies b; empty is nil, as the driver scans it.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// forget drops what the transaction remembers of rows a rollback to a
// savepoint may have undone.
func (p *proj) forget() {
	p.paths.clear()
	clear(p.dirs)
	p.last.writes = -1
}

func newProj(ctx context.Context, tx cas.DBTX, objs *cas.Store, branch, nextIno, now int64) *proj {
	return &proj{ctx: ctx, tx: tx, objs: objs.With(tx), branch: branch, nextIno: nextIno, now: now,
		paths: newPathCache(), dirs: map[int64]int{}, last: lastNode{writes: -1}}
}

// stmt returns q bound to the transaction. It is not prepared here: a
// statement prepared through database/sql is parsed again in every
// transaction and finalized at its end, while running q directly reuses
// the connection's prepared copy from the driver's statement cache
// (_stmt_cache_size), which outlives transactions (measured: parsing was
// 18% of the mount daemon's CPU in a tar x).
func (p *proj) stmt(q string) (txStmt, error) { return txStmt{p.tx, q}, nil }

// txStmt is a statement text run on a transaction.
type txStmt struct {
	tx cas.DBTX
	q  string
}

func (s txStmt) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return s.tx.QueryRowContext(ctx, s.q, args...)
}

func (s txStmt) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return s.tx.QueryContext(ctx, s.q, args...)
}

func (s txStmt) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return s.tx.ExecContext(ctx, s.q, args...)
}

func (p *proj) exec(q string, args ...any) error {
	_, err := p.execCount(q, args...)
	return err
}

// execCount runs q and returns how many rows it changed.
func (p *proj) execCount(q string, args ...any) (int64, error) {
	p.writes++
	res, err := p.tx.ExecContext(p.ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (p *proj) close() {}

const nodeCols = `kind, mode, uid, gid, mtime_ns, ctime_ns, size, target, xattrs, nlink, link_group, parent, state`

type scanner interface{ Scan(dest ...any) error }

func scanNode(s scanner, n *Node, extra ...any) error {
	var target, xattrs []byte
	var kind int
	dest := append([]any{&kind, &n.Mode, &n.UID, &n.GID, &n.MTime, &n.CTime, &n.Size, &target, &xattrs,
		&n.Nlink, &n.LinkGroup, &n.Parent, &n.state}, extra...)
	if err := s.Scan(dest...); err != nil {
		return err
	}
	return n.setRow(kind, target, xattrs)
}

// setRow sets n's kind, content or link target and xattrs from a nodes
// row's columns. target and xattrs may be sql.RawBytes: nothing of them is
// kept. A file's target must be a content id, a directory's one or none.
func (n *Node) setRow(kind int, target, xattrs []byte) error {
	n.Kind = cas.EntryKind(kind)
	n.Content, n.Link = cas.ID{}, nil
	switch n.Kind {
	case cas.EntryFile, cas.EntryDir:
		if len(target) == len(n.Content) {
			copy(n.Content[:], target)
		} else if len(target) != 0 || n.Kind == cas.EntryFile {
			return fmt.Errorf("%w: node target is %d bytes", ErrCorrupt, len(target))
		}
	case cas.EntrySymlink:
		n.Link = bytes.Clone(target)
	}
	var err error
	n.Xattrs, err = decodeXattrs(xattrs)
	return err
}

func nodeTarget(n *Node) []byte {
	switch n.Kind {
	case cas.EntryFile:
		return n.Content[:]
	case cas.EntryDir:
		if n.Content.IsZero() {
			return nil
		}
		return n.Content[:]
	case cas.EntrySymlink:
		return n.Link
	}
	return nil
}

func (p *proj) get(ino int64) (*Node, error) {
	if l := &p.last; l.writes == p.writes && l.node.Ino == ino {
		n := l.node
		return &n, nil
	}
	s, err := p.stmt(`SELECT ` + nodeCols + ` FROM nodes WHERE branch = ? AND ino = ?`)
	if err != nil {
		return nil, err
	}
	n := &Node{Ino: ino}
	if err := scanNode(s.QueryRowContext(p.ctx, p.branch, ino), n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, pathErr("inode", fmt.Sprint(ino), syscall.ENOENT)
		}
		return nil, fmt.Errorf("read inode %d: %w", ino, err)
	}
	if n.IsDir() {
		p.dirs[ino] = n.state
	}
	p.remember(n, 0, nil)
	return n, nil
}

// put writes n's row, which exists: an UPDATE, which SQLite does in
// place where INSERT OR REPLACE deletes and inserts the row (measured: 8
// us against 18 to read and rewrite a node). Without a row it inserts
// one.
func (p *proj) put(n *Node) error {
	changed, err := p.execCount(`UPDATE nodes SET kind = ?3, mode = ?4, uid = ?5, gid = ?6, mtime_ns = ?7, ctime_ns = ?8, size = ?9,
		target = ?10, xattrs = ?11, nlink = ?12, link_group = ?13, parent = ?14, state = ?15 WHERE branch = ?1 AND ino = ?2`, p.nodeArgs(n)...)
	if err == nil && changed == 0 {
		return p.insert(n)
	}
	return p.wrote(n, err)
}

// insert writes the row of the new node n (replacing one left behind,
// as put did before it was an UPDATE).
func (p *proj) insert(n *Node) error {
	return p.wrote(n, p.exec(`INSERT OR REPLACE INTO nodes (branch, ino, `+nodeCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, p.nodeArgs(n)...))
}

func (p *proj) nodeArgs(n *Node) []any {
	return []any{p.branch, n.Ino, int(n.Kind), n.Mode, n.UID, n.GID, n.MTime, n.CTime, n.Size, nodeTarget(n),
		encodeXattrs(n.Xattrs), n.Nlink, n.LinkGroup, n.Parent, n.state}
}

// wrote notes that n's row now holds n, unless err.
func (p *proj) wrote(n *Node, err error) error {
	if err != nil {
		return fmt.Errorf("write inode %d: %w", n.Ino, err)
	}
	if n.IsDir() {
		p.dirs[n.Ino] = n.state
	}
	p.remember(n, 0, nil)
	return nil
}

func (p *proj) alloc() int64 {
	ino := p.nextIno
	p.nextIno++
	return ino
}

// dir makes sure ino is a loaded directory (ENOTDIR when it is not a
// directory), loading it when it is collapsed.
func (p *proj) dir(ino int64) error {
	if st, ok := p.dirs[ino]; ok && st != dirCollapsed {
		return nil
	}
	n, err := p.get(ino)
	if err != nil {
		return err
	}
	if !n.IsDir() {
		return syscall.ENOTDIR
	}
	if n.state == dirCollapsed {
		return p.expand(n)
	}
	return nil
}

// expand loads a collapsed directory's children from its tree object.
func (p *proj) expand(d *Node) error {
	t, err := p.objs.GetTree(p.ctx, d.Content)
	if err != nil {
		return fmt.Errorf("load directory inode %d: %w", d.Ino, err)
	}
	subdirs := 0
	for i := range t.Entries {
		e := &t.Entries[i]
		if e.Kind == cas.EntryFile && e.LinkGroup != 0 {
			ino, err := p.groupIno(e.LinkGroup)
			if err != nil {
				return err
			}
			if ino != 0 { // another name of a file already loaded
				if err := p.exec(`INSERT INTO dentries (branch, parent, name, ino) VALUES (?,?,?,?)`, p.branch, d.Ino, e.Name, ino); err != nil {
					return err
				}
				p.paths.named(ino, d.Ino, e.Name)
				if err := p.exec(`UPDATE nodes SET nlink = nlink + 1 WHERE branch = ? AND ino = ?`, p.branch, ino); err != nil {
					return err
				}
				continue
			}
		}
		n := &Node{Ino: p.alloc(), Attr: Attr{Kind: e.Kind, Mode: e.Mode, UID: e.UID, GID: e.GID, MTime: e.MTime,
			Size: e.Size, Link: e.Link, Xattrs: e.Xattrs}, CTime: e.MTime, Nlink: 1, LinkGroup: e.LinkGroup}
		switch e.Kind {
		case cas.EntryDir:
			if e.Target.IsZero() {
				return fmt.Errorf("%w: directory entry %s of tree %s has no tree", cas.ErrCorrupt, termtext.QuotePath(e.Name), d.Content.Short())
			}
			n.Content, n.Nlink, n.Parent, n.state, n.LinkGroup = e.Target, 2, d.Ino, dirCollapsed, 0
			subdirs++
		case cas.EntryFile:
			n.Content = e.Target
		default:
			n.LinkGroup = 0
		}
		if err := p.insert(n); err != nil {
			return err
		}
		if err := p.exec(`INSERT INTO dentries (branch, parent, name, ino) VALUES (?,?,?,?)`, p.branch, d.Ino, e.Name, n.Ino); err != nil {
			return fmt.Errorf("load directory inode %d: %w", d.Ino, err)
		}
		if n.LinkGroup != 0 {
			if err := p.exec(`INSERT INTO link_groups (branch, grp, ino) VALUES (?,?,?)`, p.branch, n.LinkGroup, n.Ino); err != nil {
				return err
			}
		}
	}
	d.Nlink, d.state = 2+subdirs, dirClean
	return p.put(d)
}

func (p *proj) groupIno(grp uint64) (int64, error) {
	s, err := p.stmt(`SELECT ino FROM link_groups WHERE branch = ? AND grp = ?`)
	if err != nil {
		return 0, err
	}
	var ino int64
	err = s.QueryRowContext(p.ctx, p.branch, grp).Scan(&ino)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return ino, err
}

// lookup finds name in a loaded directory: 0 when absent.
func (p *proj) lookup(parent int64, name []byte) (int64, error) {
	s, err := p.stmt(`SELECT ino FROM dentries WHERE branch = ? AND parent = ? AND name = ?`)
	if err != nil {
		return 0, err
	}
	var ino int64
	err = s.QueryRowContext(p.ctx, p.branch, parent, name).Scan(&ino)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return ino, err
}

// children lists a loaded directory in name order with each child's node.
// Two plain queries, the names and then their nodes, cost less than one
// join: measured 25 us against 43 for ten entries (a join costs more per
// execution in SQLite than a second statement). With max > 0, a directory
// of more than max entries is not listed: ok is false, and only max+1
// names were read.
func (p *proj) children(dir int64, max int) (des []Dirent, ok bool, err error) {
	s, err := p.stmt(`SELECT name, ino FROM dentries WHERE branch = ? AND parent = ? ORDER BY name LIMIT ?`)
	if err != nil {
		return nil, false, err
	}
	limit := -1 // SQLite: no limit
	if max > 0 {
		limit = max + 1
	}
	rows, err := s.QueryContext(p.ctx, p.branch, dir, limit)
	if err != nil {
		return nil, false, err
	}
	var out []Dirent
	for rows.Next() {
		var de Dirent
		if err := rows.Scan(&de.Name, &de.Node.Ino); err != nil {
			rows.Close()
			return nil, false, err
		}
		out = append(out, de)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if max > 0 && len(out) > max {
		return nil, false, nil
	}
	if len(out) == 0 {
		return nil, true, nil
	}
	s, err = p.stmt(`SELECT ` + nodeCols + `, ino FROM nodes
		WHERE branch = ?1 AND ino IN (SELECT ino FROM dentries WHERE branch = ?1 AND parent = ?2)`)
	if err != nil {
		return nil, false, err
	}
	if rows, err = s.QueryContext(p.ctx, p.branch, dir); err != nil {
		return nil, false, err
	}
	defer rows.Close()
	// One set of destinations for every row, and the bytes read in
	// place: a listing's cost is mostly per row.
	nodes := make(map[int64]Node, len(out))
	var n Node
	var kind int
	var target, xattrs sql.RawBytes
	dest := []any{&kind, &n.Mode, &n.UID, &n.GID, &n.MTime, &n.CTime, &n.Size, &target, &xattrs,
		&n.Nlink, &n.LinkGroup, &n.Parent, &n.state, &n.Ino}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, false, err
		}
		if err := n.setRow(kind, target, xattrs); err != nil {
			return nil, false, err
		}
		nodes[n.Ino] = n
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	kept := out[:0]
	for _, de := range out {
		if n, ok := nodes[de.Node.Ino]; ok { // a name without its node is left out, as the join did
			de.Node = n
			kept = append(kept, de)
		}
	}
	return kept, true, nil
}

// subdirChildren is Tx.ReadSubdirs: one join of names and nodes over the
// directories given (a JSON array: one statement whatever their number),
// ordered by parent and name. Measured on node_modules (12,261 entries in
// 1,729 directories, listed level by level): 597 such queries cost
// 0.085-0.115 s of CPU against 0.12-0.19 s for a listing per directory;
// with the subdirectories found by a subquery instead (every entry of the
// parent joined with its node) it cost as much as listing each.
func (p *proj) subdirChildren(dirs []int64, max int) (map[int64][]Dirent, bool, error) {
	s, err := p.stmt(`SELECT d.parent, d.name, n.kind, n.mode, n.uid, n.gid, n.mtime_ns, n.ctime_ns, n.size,
		n.target, n.xattrs, n.nlink, n.link_group, n.parent, n.state, n.ino
		FROM dentries d JOIN nodes n ON n.branch = d.branch AND n.ino = d.ino
		WHERE d.branch = ?1 AND d.parent IN (SELECT value FROM json_each(?2))
		ORDER BY d.parent, d.name LIMIT ?3`)
	if err != nil {
		return nil, false, err
	}
	list := make([]byte, 0, 16*len(dirs)+2)
	list = append(list, '[')
	for i, d := range dirs {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, d, 10)
	}
	list = append(list, ']')
	rows, err := s.QueryContext(p.ctx, p.branch, string(list), max+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	out := map[int64][]Dirent{}
	var parent int64
	var name, target, xattrs sql.RawBytes
	var n Node
	var kind, count int
	dest := []any{&parent, &name, &kind, &n.Mode, &n.UID, &n.GID, &n.MTime, &n.CTime, &n.Size, &target, &xattrs,
		&n.Nlink, &n.LinkGroup, &n.Parent, &n.state, &n.Ino}
	for rows.Next() {
		if count++; count > max {
			return nil, false, nil
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, false, err
		}
		if err := n.setRow(kind, target, xattrs); err != nil {
			return nil, false, err
		}
		out[parent] = append(out[parent], Dirent{Name: bytes.Clone(name), Node: n})
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// markDirty marks a loaded directory and its ancestors dirty. It stops at
// the first dirty one: the invariant "a dirty directory's ancestors are
// dirty" makes that enough.
func (p *proj) markDirty(dir int64) error {
	s, err := p.stmt(`SELECT state, parent FROM nodes WHERE branch = ? AND ino = ?`)
	if err != nil {
		return err
	}
	for ino := dir; ; {
		if p.dirs[ino] == dirDirty {
			return nil
		}
		var state int
		var parent int64
		if err := s.QueryRowContext(p.ctx, p.branch, ino).Scan(&state, &parent); err != nil {
			return fmt.Errorf("mark inode %d dirty: %w", ino, err)
		}
		if state == dirDirty {
			p.dirs[ino] = dirDirty
			return nil
		}
		if err := p.exec(`UPDATE nodes SET state = 2 WHERE branch = ? AND ino = ?`, p.branch, ino); err != nil {
			return err
		}
		p.dirs[ino] = dirDirty
		if ino == RootIno {
			return nil
		}
		ino = parent
	}
}

// touch marks dirty every directory whose tree holds an entry for n.
func (p *proj) touch(n *Node) error {
	if n.IsDir() {
		if n.Ino == RootIno {
			return p.markDirty(RootIno) // its own attributes are not in any tree
		}
		return p.markDirty(n.Parent)
	}
	if d, ok := p.paths.parents[n.Ino]; ok && n.Nlink == 1 {
		return p.markDirty(d)
	}
	parents, err := p.parentsOf(n.Ino)
	if err != nil {
		return err
	}
	for _, d := range parents {
		if err := p.markDirty(d); err != nil {
			return err
		}
	}
	return nil
}

func (p *proj) parentsOf(ino int64) ([]int64, error) {
	s, err := p.stmt(`SELECT DISTINCT parent FROM dentries WHERE branch = ? AND ino = ?`)
	if err != nil {
		return nil, err
	}
	rows, err := s.QueryContext(p.ctx, p.branch, ino)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// pathCache remembers paths built by walking dentries: directories by
// ino, and the first name of files. Whatever moves a directory clears it
// all, removing one (empty) forgets that directory, and a change to a
// file's names forgets that file.
// It also holds the directory of files with one name, for touch.
type pathCache struct {
	dirs, files map[int64][]byte
	parents     map[int64]int64
	// firsts holds the dentry of each cached file path: a new name that
	// sorts after it leaves the first name as it was, so adding n names
	// to one file costs n lookups, not n scans of its names.
	firsts map[int64]dentry
}

type dentry struct {
	parent int64
	name   []byte
}

func newPathCache() *pathCache {
	return &pathCache{dirs: map[int64][]byte{}, files: map[int64][]byte{}, parents: map[int64]int64{}, firsts: map[int64]dentry{}}
}

func (c *pathCache) clear() {
	clear(c.dirs)
	clear(c.files)
	clear(c.parents)
	clear(c.firsts)
}

// setFile records file ino's first name, the dentry parent/name, at path;
// single says it is its only name.
func (c *pathCache) setFile(ino int64, path []byte, parent int64, name []byte, single bool) {
	c.files[ino] = path
	c.firsts[ino] = dentry{parent, name}
	if single {
		c.parents[ino] = parent
	} else {
		delete(c.parents, ino)
	}
}

// holdsFiles reports whether anything is cached of any file.
func (c *pathCache) holdsFiles() bool {
	return len(c.files) > 0 || len(c.parents) > 0 || len(c.firsts) > 0
}

// forget drops what is known of file ino's names.
func (c *pathCache) forget(ino int64) {
	delete(c.files, ino)
	delete(c.parents, ino)
	delete(c.firsts, ino)
}

// named records that file ino gained the name parent/name: its cached
// first name stays unless the new one sorts before it (names are ordered
// by parent inode, then bytes, as nodePath's query).
func (c *pathCache) named(ino, parent int64, name []byte) {
	f, ok := c.firsts[ino]
	if !ok || parent < f.parent || (parent == f.parent && bytes.Compare(name, f.name) < 0) {
		c.forget(ino)
		return
	}
	delete(c.parents, ino) // no longer its only name
}

// pathOf returns the path of a directory ("" for the root). It walks up
// the dentries iteratively, and a walk that meets a directory twice is a
// corrupt projection (ErrCorrupt): the rows may be anyone's.
func (p *proj) pathOf(dir int64) ([]byte, error) {
	if dir == RootIno {
		return nil, nil
	}
	if path, ok := p.paths.dirs[dir]; ok {
		return path, nil
	}
	s, err := p.stmt(`SELECT parent, name FROM dentries WHERE branch = ? AND ino = ? LIMIT 1`)
	if err != nil {
		return nil, err
	}
	type step struct {
		ino  int64
		name []byte
	}
	var up []step // from dir towards the root
	seen := map[int64]bool{}
	var base []byte // the path of the ancestor where the walk stopped
	for ino := dir; ino != RootIno; {
		if path, ok := p.paths.dirs[ino]; ok {
			base = path
			break
		}
		if seen[ino] {
			return nil, fmt.Errorf("%w: directory inode %d is its own ancestor", ErrCorrupt, ino)
		}
		seen[ino] = true
		var parent int64
		var name []byte
		if err := s.QueryRowContext(p.ctx, p.branch, ino).Scan(&parent, &name); err != nil {
			return nil, fmt.Errorf("path of inode %d: %w", ino, err)
		}
		up = append(up, step{ino, name})
		ino = parent
	}
	path := base
	for i := len(up) - 1; i >= 0; i-- {
		path = join(path, up[i].name)
		p.paths.dirs[up[i].ino] = path
	}
	return path, nil
}

// nodePath returns one path of any node (the first name, for hard links).
func (p *proj) nodePath(n *Node) ([]byte, error) {
	if n.IsDir() {
		return p.pathOf(n.Ino)
	}
	if path, ok := p.paths.files[n.Ino]; ok {
		return path, nil
	}
	s, err := p.stmt(`SELECT parent, name FROM dentries WHERE branch = ? AND ino = ? ORDER BY parent, name LIMIT 1`)
	if err != nil {
		return nil, err
	}
	var parent int64
	var name []byte
	if err := s.QueryRowContext(p.ctx, p.branch, n.Ino).Scan(&parent, &name); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, pathErr("path of inode", fmt.Sprint(n.Ino), syscall.ENOENT)
		}
		return nil, err
	}
	pp, err := p.pathOf(parent)
	if err != nil {
		return nil, err
	}
	path := join(pp, name)
	p.paths.setFile(n.Ino, path, parent, name, n.Nlink == 1)
	return path, nil
}

func join(dir, name []byte) []byte {
	if len(dir) == 0 {
		return append([]byte(nil), name...)
	}
	out := make([]byte, 0, len(dir)+1+len(name))
	out = append(append(append(out, dir...), '/'), name...)
	return out
}

// resolve walks path from the root, loading directories on the way. It
// returns the parent directory, the last name and the node's ino (0 when the
// last component does not exist). The root itself resolves to (0, nil, 1).
func (p *proj) resolve(path []byte) (parent int64, name []byte, ino int64, err error) {
	if len(path) == 0 {
		return 0, nil, RootIno, nil
	}
	comps := bytes.Split(path, []byte("/"))
	cur := RootIno
	for i, c := range comps {
		if err := p.dir(cur); err != nil {
			return 0, nil, 0, pathErr("resolve", string(path), errnoOf(err))
		}
		next, err := p.lookup(cur, c)
		if err != nil {
			return 0, nil, 0, err
		}
		if i == len(comps)-1 {
			return cur, c, next, nil
		}
		if next == 0 {
			return 0, nil, 0, pathErr("resolve", string(path), syscall.ENOENT)
		}
		cur = next
	}
	panic("unreachable")
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// reset replaces the branch's projection with the state root (checkout,
// branch creation, replay base). Directories stay collapsed except those on
// the paths of hard-linked files, which load eagerly so every name of a
// linked file shares one node from the start.
func (p *proj) reset(root cas.ID) error {
	for _, q := range []string{`DELETE FROM nodes WHERE branch = ?`, `DELETE FROM dentries WHERE branch = ?`,
		`DELETE FROM link_groups WHERE branch = ?`} {
		if err := p.exec(q, p.branch); err != nil {
			return fmt.Errorf("reset projection: %w", err)
		}
	}
	p.paths.clear()
	clear(p.dirs)
	t, err := p.objs.GetTree(p.ctx, root)
	if err != nil {
		return fmt.Errorf("reset to %s: %w", root.Short(), err)
	}
	rootNode := &Node{Ino: RootIno, Attr: Attr{Kind: cas.EntryDir, Mode: 0o755, Content: root}, Nlink: 2, Parent: RootIno, state: dirCollapsed}
	if err := p.insert(rootNode); err != nil {
		return err
	}
	for _, hl := range t.Links {
		for _, path := range hl.Paths {
			if _, _, _, err := p.resolve(path); err != nil {
				// The root's link index names a path its own trees do not
				// have as a directory path (through a symlink, a file):
				// the state is inconsistent, whoever made it.
				if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENOENT) {
					return fmt.Errorf("%w: reset to %s: hard link group %d at %s: %v", ErrCorrupt, root.Short(), hl.Group, termtext.QuotePath(path), err)
				}
				return fmt.Errorf("reset to %s: hard link group %d at %s: %w", root.Short(), hl.Group, termtext.QuotePath(path), err)
			}
		}
	}
	return nil
}

// computeRoot encodes every dirty directory bottom-up and returns the root
// tree id. Clean and collapsed directories are not visited.
//
// The rows may come from anyone's store file, so the walk is iterative (a
// deep tree cannot exhaust the stack) and meets each directory once: a
// directory reached again, through a dentry pointing back at an ancestor
// or a second name, is a corrupt projection (ErrCorrupt), not a loop.
//
// A directory's dirty subdirectories are listed ahead, rootPrefetchDirs
// of them in one query (subdirChildren), before the walk enters the first
// of them: a query a directory cost about as much as its rows did, and
// the end of a session that changed node_modules has 1,700 directories to
// encode. What is listed ahead is bounded: rootPrefetchRows entries a
// query (a window with more rows is halved, down to a query a directory),
// and rootPrefetchHeld entries held in all until the walk enters those
// directories (past it, the next directory is listed alone). A directory
// met a second time is ErrCorrupt whether its entry was read before or
// after the walk stored it (a listing ahead may hold its state from
// before), so what a corrupt projection gives does not depend on the
// windows.
func (p *proj) computeRoot() (cas.ID, error) {
	root, err := p.get(RootIno)
	if err != nil {
		return cas.ID{}, err
	}
	if root.state != dirDirty {
		return root.Content, nil
	}
	type frame struct {
		ino  int64
		kids []Dirent
		next int // kids[next] is the next to encode
		tree *cas.Tree
		// dirty lists the indexes in kids of the dirty subdirectories,
		// in order; ahead is the first whose children are not listed
		// ahead yet, window how many to list in one query.
		dirty         []int
		ahead, window int
	}
	seen := map[int64]bool{RootIno: true}
	listed := map[int64][]Dirent{} // children listed ahead, until entered
	held := 0                      // entries in listed
	enter := func(ino int64) (*frame, error) {
		all, ok := listed[ino]
		if ok {
			delete(listed, ino)
			held -= len(all)
		} else if all, _, err = p.children(ino, 0); err != nil {
			return nil, err
		}
		kids := all[:0]
		f := &frame{ino: ino, window: rootPrefetchDirs}
		for _, k := range all {
			if k.Node.Kind == cas.EntrySocket { // live state, not content: no tree holds a socket
				continue
			}
			if k.Node.Kind == cas.EntryDir && k.Node.state == dirDirty {
				f.dirty = append(f.dirty, len(kids))
			}
			kids = append(kids, k)
		}
		f.kids, f.tree = kids, &cas.Tree{Entries: make([]cas.Entry, 0, len(kids))}
		return f, nil
	}
	// listAhead lists the children of f's next dirty subdirectories, from
	// the one the walk is about to enter, in one query.
	listAhead := func(f *frame) error {
		for f.ahead < len(f.dirty) && f.dirty[f.ahead] < f.next {
			f.ahead++ // entered with a query of its own (a window too big)
		}
		if f.ahead >= len(f.dirty) || f.window < 2 {
			return nil // entered with a query of its own
		}
		if held >= rootPrefetchHeld {
			rootAheadStats.heldFull.Add(1)
			return nil
		}
		var dirs []int64
		for _, i := range f.dirty[f.ahead:min(f.ahead+f.window, len(f.dirty))] {
			if ino := f.kids[i].Node.Ino; !seen[ino] {
				dirs = append(dirs, ino)
			}
		}
		lists, ok, err := p.subdirChildren(dirs, rootPrefetchRows)
		if err != nil {
			return err
		}
		if !ok {
			rootAheadStats.tooBig.Add(1)
			f.window /= 2 // too many rows: smaller windows from here on
			return nil
		}
		rootAheadStats.lists.Add(1)
		for _, d := range dirs {
			listed[d] = lists[d] // nil for an empty directory: listed all the same
			held += len(lists[d])
		}
		f.ahead += f.window
		return nil
	}
	top, err := enter(RootIno)
	if err != nil {
		return cas.ID{}, err
	}
	stack := []*frame{top}
	for {
		f := stack[len(stack)-1]
		if f.next < len(f.kids) {
			k := &f.kids[f.next]
			n := &k.Node
			if n.Kind == cas.EntryDir && seen[n.Ino] {
				return cas.ID{}, fmt.Errorf("%w: directory inode %d is reached twice (a cycle or a second name in the projection)", ErrCorrupt, n.Ino)
			}
			if n.Kind == cas.EntryDir && n.state == dirDirty && len(f.tree.Entries) == f.next {
				// Encode the subdirectory first; this entry is added when
				// the walk comes back to f.
				if _, ok := listed[n.Ino]; !ok {
					if err := listAhead(f); err != nil {
						return cas.ID{}, err
					}
				}
				seen[n.Ino] = true
				sub, err := enter(n.Ino)
				if err != nil {
					return cas.ID{}, err
				}
				stack = append(stack, sub)
				continue
			}
			if len(f.tree.Entries) == f.next {
				f.tree.Entries = append(f.tree.Entries, entryOf(k, n.Content))
			}
			f.next++
			continue
		}
		if f.ino == RootIno {
			if f.tree.Links, err = p.linkIndex(); err != nil {
				return cas.ID{}, err
			}
		}
		id, err := p.storeDir(f.ino, f.tree)
		if err != nil {
			return cas.ID{}, err
		}
		stack = stack[:len(stack)-1]
		if len(stack) == 0 {
			return id, nil
		}
		parent := stack[len(stack)-1]
		parent.tree.Entries = append(parent.tree.Entries, entryOf(&parent.kids[parent.next], id))
		parent.next++
	}
}

// rootPrefetchDirs and rootPrefetchRows bound computeRoot's listings
// ahead: directories and entries a query; rootPrefetchHeld, the entries
// listed ahead and not yet entered (variables for the tests).
var (
	rootPrefetchDirs = 64
	rootPrefetchRows = 4096
	rootPrefetchHeld = 4 * 4096
)

// rootAheadStats counts computeRoot's listings ahead, those that found too
// many rows and those not made for what was held already, for the tests.
var rootAheadStats struct{ lists, tooBig, heldFull atomic.Int64 }

// entryOf is the tree entry of a child, with target as a directory's tree.
func entryOf(k *Dirent, target cas.ID) cas.Entry {
	n := &k.Node
	e := cas.Entry{Name: k.Name, Kind: n.Kind, Mode: n.Mode, UID: n.UID, GID: n.GID, MTime: n.MTime, Xattrs: n.Xattrs}
	switch n.Kind {
	case cas.EntryDir:
		e.Target = target
	case cas.EntryFile:
		e.Size, e.Target, e.LinkGroup = n.Size, n.Content, n.LinkGroup
	case cas.EntrySymlink:
		e.Size, e.Link = int64(len(n.Link)), n.Link
	}
	return e
}

// storeDir stores the tree of directory ino and marks it clean.
func (p *proj) storeDir(ino int64, t *cas.Tree) (cas.ID, error) {
	id, _, err := p.objs.PutTree(p.ctx, t)
	if err != nil {
		return cas.ID{}, fmt.Errorf("store tree of inode %d: %w", ino, err)
	}
	if err := p.exec(`UPDATE nodes SET target = ?, state = 1 WHERE branch = ? AND ino = ?`, id[:], p.branch, ino); err != nil {
		return cas.ID{}, err
	}
	p.dirs[ino] = dirClean
	return id, nil
}

// linkIndex lists where each hard-link group lives, for the root tree.
func (p *proj) linkIndex() ([]cas.HardLink, error) {
	rows, err := p.tx.QueryContext(p.ctx, `SELECT grp, ino FROM link_groups WHERE branch = ? ORDER BY grp`, p.branch)
	if err != nil {
		return nil, err
	}
	type group struct {
		grp uint64
		ino int64
	}
	var groups []group
	for rows.Next() {
		var g group
		if err := rows.Scan(&g.grp, &g.ino); err != nil {
			rows.Close()
			return nil, err
		}
		groups = append(groups, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []cas.HardLink
	for _, g := range groups {
		r, err := p.tx.QueryContext(p.ctx, `SELECT parent, name FROM dentries WHERE branch = ? AND ino = ?`, p.branch, g.ino)
		if err != nil {
			return nil, err
		}
		type dent struct {
			parent int64
			name   []byte
		}
		var ds []dent
		for r.Next() {
			var d dent
			if err := r.Scan(&d.parent, &d.name); err != nil {
				r.Close()
				return nil, err
			}
			ds = append(ds, d)
		}
		r.Close()
		hl := cas.HardLink{Group: g.grp}
		for _, d := range ds {
			dp, err := p.pathOf(d.parent)
			if err != nil {
				return nil, err
			}
			hl.Paths = append(hl.Paths, join(dp, d.name))
		}
		sort.Slice(hl.Paths, func(i, j int) bool { return bytes.Compare(hl.Paths[i], hl.Paths[j]) < 0 })
		out = append(out, hl)
	}
	return out, nil
}
