package journal

import (
	"bytes"
	"database/sql"
	"fmt"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/phase"
)

// Tx is one write transaction on one branch, inside an Op. Every mutation
// validates, updates the projection and appends its event to the branch's
// hash chain; all of it commits together or not at all. A Tx is used by one
// goroutine and is valid only inside the function passed to Op.Update.
type Tx struct {
	db   *DB
	p    *proj
	op   *Op
	pid  int64
	next int64 // seq of the next event

	nextIno int64 // the branch's next_ino when the Tx began

	head     cas.ID
	headSeq  int64
	count    int64
	appended int

	// track: the paths of the events appended are kept in changed (a
	// Batch's Tx: a transaction it loses names what it lost).
	track   bool
	changed []string
	// free: this transaction checked that no other holder has the
	// branch's lock (mayChange).
	free bool
}

// Objects is the object store inside this transaction: content written
// through it commits with the events that reference it.
func (t *Tx) Objects() *cas.Store { return t.p.objs }

// StorePath is the path of the store file this transaction writes.
func (t *Tx) StorePath() string { return t.db.Path() }

// SetPID attributes the following events to a process.
func (t *Tx) SetPID(pid int64) { t.pid = pid }

// Appended is how many events this Tx has appended so far.
func (t *Tx) Appended() int { return t.appended }

// Get returns the node ino.
func (t *Tx) Get(ino int64) (Node, error) {
	n, err := t.p.get(ino)
	if err != nil {
		return Node{}, err
	}
	if err := t.p.fixNlink(n); err != nil {
		return Node{}, err
	}
	return *n, nil
}

// Lookup returns the node called name in directory parent.
func (t *Tx) Lookup(parent int64, name []byte) (Node, error) {
	n, err := t.p.child(parent, name)
	if err != nil {
		return Node{}, err
	}
	if err := t.p.fixNlink(n); err != nil {
		return Node{}, err
	}
	return *n, nil
}

// DirTree returns the tree id of directory ino if the branch has not
// changed anything below it since its tree was last computed (a snapshot,
// or a checkout); false if it has (the tree is stale) or ino is not a
// directory. The id covers every entry below: names, kinds, modes, owners,
// mtimes, xattrs, contents.
func (t *Tx) DirTree(ino int64) (cas.ID, bool, error) {
	n, err := t.p.get(ino)
	if err != nil {
		return cas.ID{}, false, err
	}
	if !n.IsDir() || n.state == dirDirty || n.Content.IsZero() {
		return cas.ID{}, false, nil
	}
	return n.Content, true, nil
}

// ReadDir lists directory dir in name order.
func (t *Tx) ReadDir(dir int64) ([]Dirent, error) {
	if err := t.p.dir(dir); err != nil {
		return nil, err
	}
	des, _, err := t.p.children(dir, 0)
	return des, err
}

// ReadDirUpTo lists directory dir in name order when it holds at most max
// entries (max > 0); when it holds more, ok is false and nothing is listed
// (the names past max are not read): a caller that lists a directory on
// the chance of needing it pays little for a big one.
func (t *Tx) ReadDirUpTo(dir int64, max int) (des []Dirent, ok bool, err error) {
	if err := t.p.dir(dir); err != nil {
		return nil, false, err
	}
	return t.p.children(dir, max)
}

// ReadSubdirs lists, in one query, directories dirs, whose children the
// caller knows to be loaded (Node.NlinkKnown), by inode number, each in
// name order (one with no entries is absent). A caller that has just
// listed their parent and expects them to be read next (find, du, rm -r)
// pays one query for all of them instead of one each. When they hold more
// than max entries in all, ok is false and nothing is listed.
func (t *Tx) ReadSubdirs(dirs []int64, max int) (lists map[int64][]Dirent, ok bool, err error) {
	return t.p.subdirChildren(dirs, max)
}

// fixNlink gives a directory that is not loaded yet its true link count
// (2 + subdirectories, read from its tree): tools such as find may rely on
// it to skip leaf directories. Loaded directories keep theirs up to date.
func (p *proj) fixNlink(n *Node) error {
	if !n.IsDir() || n.state != dirCollapsed {
		return nil
	}
	t, err := p.objs.GetTree(p.ctx, n.Content)
	if err != nil {
		return err
	}
	n.Nlink = 2
	for i := range t.Entries {
		if t.Entries[i].Kind == cas.EntryDir {
			n.Nlink++
		}
	}
	return nil
}

// Resolve returns the node at path ("" is the root).
func (t *Tx) Resolve(path []byte) (Node, error) {
	_, _, ino, err := t.p.resolve(path)
	if err != nil {
		return Node{}, err
	}
	if ino == 0 {
		return Node{}, pathErr("resolve", string(path), syscall.ENOENT)
	}
	return t.Get(ino)
}

// Path returns one path of a node (the first name of a hard-linked file).
func (t *Tx) Path(ino int64) ([]byte, error) {
	n, err := t.p.get(ino)
	if err != nil {
		return nil, err
	}
	return t.p.nodePath(n)
}

func (t *Tx) childPath(parent int64, name []byte) ([]byte, error) {
	dp, err := t.p.pathOf(parent)
	if err != nil {
		return nil, err
	}
	return join(dp, name), nil
}

// Create makes name in parent: a file (a.Content must be a stored
// manifest), directory, symlink (a.Link) or fifo, as a.Kind says.
func (t *Tx) Create(parent int64, name []byte, a Attr) (Node, error) {
	path, err := t.childPath(parent, name)
	if err != nil {
		return Node{}, err
	}
	n, err := t.p.mknode(parent, name, a)
	if err != nil {
		return Node{}, pathErr("create", string(path), errnoOf(err))
	}
	if !n.IsDir() {
		t.p.paths.setFile(n.Ino, path, parent, bytes.Clone(name), true) // its one name: the close's events need it next
	}
	kind := EvCreate
	switch a.Kind {
	case cas.EntryDir:
		kind = EvMkdir
	case cas.EntrySymlink:
		kind = EvSymlink
	}
	ev := Event{Kind: kind, Path: path, Attr: n.Attr}
	ev.Attr.Xattrs = n.Xattrs
	if err := t.append(&ev); err != nil {
		return Node{}, err
	}
	return *n, nil
}

// Link gives file ino the additional name parent/name.
func (t *Tx) Link(ino, parent int64, name []byte) (Node, error) {
	n, err := t.p.get(ino)
	if err != nil {
		return Node{}, err
	}
	from, err := t.p.nodePath(n)
	if err != nil {
		return Node{}, err
	}
	to, err := t.childPath(parent, name)
	if err != nil {
		return Node{}, err
	}
	n, err = t.p.link(ino, parent, name)
	if err != nil {
		return Node{}, pathErr("link", string(to), errnoOf(err))
	}
	if err := t.append(&Event{Kind: EvLink, Path: from, Path2: to}); err != nil {
		return Node{}, err
	}
	return *n, nil
}

// Unlink removes the non-directory parent/name.
func (t *Tx) Unlink(parent int64, name []byte) error {
	path, err := t.childPath(parent, name)
	if err != nil {
		return err
	}
	if err := t.p.unlink(parent, name); err != nil {
		return pathErr("unlink", string(path), errnoOf(err))
	}
	return t.append(&Event{Kind: EvUnlink, Path: path})
}

// Rmdir removes the empty directory parent/name.
func (t *Tx) Rmdir(parent int64, name []byte) error {
	path, err := t.childPath(parent, name)
	if err != nil {
		return err
	}
	if err := t.p.rmdir(parent, name); err != nil {
		return pathErr("rmdir", string(path), errnoOf(err))
	}
	return t.append(&Event{Kind: EvRmdir, Path: path})
}

// RemoveAll removes parent/name and, for a directory, everything below it,
// one event per node (deepest first), as rm -rf would.
func (t *Tx) RemoveAll(parent int64, name []byte) error {
	n, err := t.p.child(parent, name)
	if err != nil {
		return err
	}
	if !n.IsDir() {
		return t.Unlink(parent, name)
	}
	kids, err := t.ReadDir(n.Ino)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := t.RemoveAll(n.Ino, k.Name); err != nil {
			return err
		}
	}
	return t.Rmdir(parent, name)
}

// Rename moves oldParent/oldName to newParent/newName; flags is 0,
// RenameNoReplace or RenameExchange.
func (t *Tx) Rename(oldParent int64, oldName []byte, newParent int64, newName []byte, flags uint32) error {
	from, err := t.childPath(oldParent, oldName)
	if err != nil {
		return err
	}
	to, err := t.childPath(newParent, newName)
	if err != nil {
		return err
	}
	if err := t.p.rename(oldParent, oldName, newParent, newName, flags); err != nil {
		return pathErr("rename", string(from), errnoOf(err))
	}
	return t.append(&Event{Kind: EvRename, Path: from, Path2: to, Flags: flags})
}

// SetAttr changes the fields of a selected by mask (SetMode, SetUID,
// SetGID, SetMTime, SetXattrs).
func (t *Tx) SetAttr(ino int64, mask uint32, a Attr) (Node, error) {
	n, err := t.p.get(ino)
	if err != nil {
		return Node{}, err
	}
	path, err := t.p.nodePath(n)
	if err != nil {
		return Node{}, err
	}
	if n, err = t.p.setattr(n, mask, a); err != nil {
		return Node{}, pathErr("setattr", string(path), errnoOf(err))
	}
	ev := Event{Kind: EvSetattr, Path: path, Mask: mask}
	if mask&SetMode != 0 {
		ev.Attr.Mode = n.Mode
	}
	if mask&SetUID != 0 {
		ev.Attr.UID = n.UID
	}
	if mask&SetGID != 0 {
		ev.Attr.GID = n.GID
	}
	if mask&SetMTime != 0 {
		ev.Attr.MTime = n.MTime
	}
	if mask&SetXattrs != 0 {
		ev.Attr.Xattrs = n.Xattrs
	}
	if err := t.append(&ev); err != nil {
		return Node{}, err
	}
	return *n, nil
}

// Write records that file ino now has content (a stored manifest) of size
// bytes and modification time mtime; ranges are the byte ranges touched
// (informational, for forensics and blame).
func (t *Tx) Write(ino int64, content cas.ID, size, mtime int64, ranges []Range) (Node, error) {
	n, err := t.p.get(ino)
	if err != nil {
		return Node{}, err
	}
	path, err := t.p.nodePath(n)
	if err != nil {
		return Node{}, err
	}
	if n, err = t.p.write(n, content, size, mtime); err != nil {
		return Node{}, pathErr("write", string(path), errnoOf(err))
	}
	ev := Event{Kind: EvWrite, Path: path, Attr: Attr{Kind: cas.EntryFile, Content: content, Size: size, MTime: mtime}, Ranges: ranges}
	if err := t.append(&ev); err != nil {
		return Node{}, err
	}
	return *n, nil
}

// SetXattr sets a user.* extended attribute.
func (t *Tx) SetXattr(ino int64, name string, value []byte) error {
	n, err := t.p.get(ino)
	if err != nil {
		return err
	}
	path, err := t.p.nodePath(n)
	if err != nil {
		return err
	}
	if _, err := t.p.setxattr(n, name, value); err != nil {
		return pathErr("setxattr", string(path), errnoOf(err))
	}
	return t.append(&Event{Kind: EvSetxattr, Path: path, Name: name, Value: value})
}

// RemoveXattr removes a user.* extended attribute (ENODATA when absent).
func (t *Tx) RemoveXattr(ino int64, name string) error {
	n, err := t.p.get(ino)
	if err != nil {
		return err
	}
	path, err := t.p.nodePath(n)
	if err != nil {
		return err
	}
	if _, err := t.p.removexattr(n, name); err != nil {
		return pathErr("removexattr", string(path), errnoOf(err))
	}
	return t.append(&Event{Kind: EvRemovexattr, Path: path, Name: name})
}

// Record appends an event that does not change the tree (EvBegin, EvEnd,
// EvExec, EvSyscall, EvWriteData, EvNet).
func (t *Tx) Record(ev Event) error {
	switch ev.Kind {
	case EvBegin, EvEnd, EvExec, EvSyscall, EvWriteData, EvNet:
	default:
		return fmt.Errorf("record: %s events change the tree; use the Tx method", ev.Kind)
	}
	ev.Root = cas.ID{}
	return t.append(&ev)
}

// Root encodes the dirty directories and returns the current root tree id.
func (t *Tx) Root() (cas.ID, error) { return t.p.computeRoot() }

// Snapshot records the current state as a snapshot with message.
func (t *Tx) Snapshot(message string) (Snapshot, error) {
	endTree := phase.Start("snapshot: directory trees")
	root, err := t.p.computeRoot()
	endTree()
	if err != nil {
		return Snapshot{}, err
	}
	ev := Event{Kind: EvSnapshot, Root: root, Text: message}
	if err := t.append(&ev); err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{ID: ev.Hash, Seq: ev.Seq, BranchID: t.op.BranchID, Branch: t.op.Branch, Root: root,
		Message: message, Time: ev.Time, EventCount: t.count}
	_, err = t.p.tx.ExecContext(t.p.ctx, `INSERT INTO snapshots (id, seq, branch, root, message, time_ns, event_count) VALUES (?,?,?,?,?,?,?)`,
		s.ID[:], s.Seq, s.BranchID, s.Root[:], s.Message, s.Time, s.EventCount)
	if err != nil {
		return Snapshot{}, fmt.Errorf("record snapshot: %w", err)
	}
	return s, nil
}

// MarkMerge records that this op merges state from into the branch: an
// EvMerge event naming from (its branch, seq and root) with the op's
// message text. Call it before the op's other events; the events that
// follow apply the merge's result. It changes no tree by itself, so it
// needs no branch lock (the changes after it do). From then on from's
// history is part of the branch's (DB.MergeBase). from must be a recorded
// state of the store (a branch id and a seq before this event).
func (t *Tx) MarkMerge(from State, text string) error {
	if from.BranchID <= 0 || from.Seq <= 0 || from.Seq >= t.next {
		return fmt.Errorf("mark merge: %s is not a recorded state", describeState(from))
	}
	return t.append(&Event{Kind: EvMerge, Root: from.Root, FromBranch: from.BranchID, FromSeq: from.Seq, Text: text})
}

// reset moves the branch to state st (kind is EvBranch or EvCheckout).
func (t *Tx) reset(kind EventKind, st State, text string) error {
	if err := t.mayChange(); err != nil {
		return err
	}
	if err := t.p.reset(st.Root); err != nil {
		return err
	}
	return t.append(&Event{Kind: kind, Root: st.Root, FromBranch: st.BranchID, FromSeq: st.Seq, Text: text})
}

// mayChange refuses a change of the branch's tree while a session other
// than this DB's holds the branch (see the branch locks in lock.go). Once
// per transaction: nobody can take the lock while it is open.
func (t *Tx) mayChange() error {
	if t.free {
		return nil
	}
	if err := t.db.checkBranchFree(t.op.Branch); err != nil {
		return err
	}
	t.free = true
	return nil
}

// changesTree says whether an event of kind k changes the branch's tree.
func changesTree(k EventKind) bool {
	return k == EvBranch || k == EvCheckout || (k >= EvCreate && k <= EvRemovexattr)
}

// append fills in the chain fields of ev and inserts it, after the op's
// lead event if that is still to come (Op.SetLead).
func (t *Tx) append(ev *Event) error {
	if changesTree(ev.Kind) {
		if err := t.mayChange(); err != nil {
			return err
		}
	}
	if l := t.op.lead; l != nil {
		t.op.lead = nil
		if err := t.append(l); err != nil {
			t.op.lead = l
			return err
		}
	}
	ev.Seq, ev.Branch, ev.Op, ev.Time = t.next, t.op.BranchID, t.op.ID, t.p.now
	if ev.PID == 0 {
		ev.PID = t.pid
	}
	payload := ev.Encode()
	ev.Prev = t.head
	ev.Hash = chainHash(t.head, ev.Seq, payload)
	var path, root any
	if ev.Path != nil || isPathEvent(ev.Kind) {
		path = append([]byte{}, ev.Path...)
	}
	if r := rootColumn(ev); r != nil {
		root = r
	}
	// Not through p.exec: an event changes no projection row, so what the
	// proj remembers of them stays true.
	_, err := t.p.tx.ExecContext(t.p.ctx, insertEventSQL,
		ev.Seq, ev.Branch, ev.Op, int(ev.Kind), ev.Time, path, root, payload, ev.Prev[:], ev.Hash[:])
	if err != nil {
		return fmt.Errorf("append %s event: %w", ev.Kind, err)
	}
	t.next++
	t.head, t.headSeq = ev.Hash, ev.Seq
	t.count++
	t.appended++
	if t.track && isPathEvent(ev.Kind) {
		t.changed = append(t.changed, string(ev.Path))
		if ev.Path2 != nil {
			t.changed = append(t.changed, string(ev.Path2))
		}
	}
	return nil
}

// insertEventSQL inserts an event row: seq, branch, op, kind, time_ns,
// path, root, payload, prev, hash. The redo log knows it by this string.
const insertEventSQL = `INSERT INTO events (seq, branch, op, kind, time_ns, path, root, payload, prev, hash) VALUES (?,?,?,?,?,?,?,?,?,?)`

func isPathEvent(k EventKind) bool { return (k >= EvCreate && k <= EvRemovexattr) || k == EvWriteData }

// flush writes the branch head and inode counter back, if they moved.
func (t *Tx) flush(tx cas.DBTX) error {
	if t.appended == 0 && t.p.nextIno == t.nextIno {
		return nil
	}
	_, err := tx.ExecContext(t.p.ctx, `UPDATE branches SET head_seq = ?, head_hash = ?, event_count = ?, next_ino = ? WHERE id = ?`,
		t.headSeq, t.head[:], t.count, t.p.nextIno, t.op.BranchID)
	return err
}

// StatCache is what an import remembers of a host path it brought in:
// what it imported (kind, mode, content) and the host stat it read it
// with, so that the next capture can tell a host change from a branch
// change exactly.
type StatCache struct {
	Size, MTime, CTime int64
	Ino                uint64
	// Manifest is the imported content: a file's manifest, the cas.Sum of
	// a symlink's target, zero for a directory.
	Manifest cas.ID
	// Kind is the imported entry's kind; 0 is taken as a regular file
	// whose mode was not recorded (Mode is then ignored).
	Kind cas.EntryKind
	// Mode holds the imported permission bits, or ModeUnknown.
	Mode uint32
	// Racy says the stat was taken within the timestamp granularity of
	// the entry's last change: a later change may have left it equal, so
	// it proves nothing and the host entry must be compared by content.
	Racy bool
}

// ModeUnknown is the StatCache.Mode of a row that did not record one.
const ModeUnknown = ^uint32(0)

// StatCache returns the cached host stat of a regular file at a store
// path ("/ws/a.txt"), only if it proves the host file's content: a racy
// stat, or a directory's or symlink's row, reads as none.
func (t *Tx) StatCache(path string) (StatCache, bool, error) {
	s, err := t.p.stmt(`SELECT size, mtime_ns, ctime_ns, host_ino, manifest FROM import_cache WHERE branch = ? AND path = ? AND kind = 1 AND racy = 0`)
	if err != nil {
		return StatCache{}, false, err
	}
	var c StatCache
	var m []byte
	err = s.QueryRowContext(t.p.ctx, t.op.BranchID, []byte(path)).Scan(&c.Size, &c.MTime, &c.CTime, &c.Ino, &m)
	if err == sql.ErrNoRows {
		return StatCache{}, false, nil
	}
	if err != nil {
		return StatCache{}, false, err
	}
	copy(c.Manifest[:], m)
	c.Kind, c.Mode = cas.EntryFile, ModeUnknown
	return c, true, nil
}

// ImportRecord returns what imports recorded at a store path, of any
// kind and racy or not.
func (t *Tx) ImportRecord(path string) (StatCache, bool, error) {
	s, err := t.p.stmt(`SELECT path, ` + recordCols + ` FROM import_cache WHERE branch = ? AND path = ?`)
	if err != nil {
		return StatCache{}, false, err
	}
	rows, err := s.QueryContext(t.p.ctx, t.op.BranchID, []byte(path))
	if err != nil {
		return StatCache{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return StatCache{}, false, rows.Err()
	}
	_, c, err := scanRecord(rows)
	if err != nil {
		return StatCache{}, false, err
	}
	return c, true, rows.Close()
}

// OtherRecords returns the import records at store path of the other live
// branches that hold any record below store directory ws ("/ws"), and how
// many such branches there are: whether another branch's capture or pull
// saw the host with path as it is (a pull checks the host against every
// branch that knew it, not only its own).
func (t *Tx) OtherRecords(ws, path string) ([]StatCache, int, error) {
	rows, err := t.p.tx.QueryContext(t.p.ctx, `SELECT b.id FROM branches b WHERE b.deleted_ns IS NULL AND b.id != ?
		AND EXISTS (SELECT 1 FROM import_cache c WHERE c.branch = b.id AND c.path >= ? AND c.path < ?)`,
		t.op.BranchID, []byte(ws+"/"), []byte(ws+"0"))
	if err != nil {
		return nil, 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	s, err := t.p.stmt(`SELECT path, ` + recordCols + ` FROM import_cache WHERE branch = ? AND path = ?`)
	if err != nil {
		return nil, 0, err
	}
	var out []StatCache
	for _, id := range ids {
		r, err := s.QueryContext(t.p.ctx, id, []byte(path))
		if err != nil {
			return nil, 0, err
		}
		if r.Next() {
			_, c, err := scanRecord(r)
			if err != nil {
				r.Close()
				return nil, 0, err
			}
			out = append(out, c)
		}
		r.Close()
		if err := r.Err(); err != nil {
			return nil, 0, err
		}
	}
	return out, len(ids), nil
}

// recordCols are the import_cache columns scanRecord reads after path.
const recordCols = `size, mtime_ns, ctime_ns, host_ino, manifest, kind, mode, racy`

// scanRecord reads one import_cache row selected as path, recordCols.
// path is valid until the next call of rows.Next.
func scanRecord(rows *sql.Rows) ([]byte, StatCache, error) {
	var path, m sql.RawBytes
	var mode sql.NullInt64
	var c StatCache
	if err := rows.Scan(&path, &c.Size, &c.MTime, &c.CTime, &c.Ino, &m, &c.Kind, &mode, &c.Racy); err != nil {
		return nil, StatCache{}, err
	}
	c.Mode = ModeUnknown
	if mode.Valid {
		c.Mode = uint32(mode.Int64)
	}
	copy(c.Manifest[:], m)
	return path, c, nil
}

// StatCacheDir returns the cached host stats of the direct children of
// store directory dir ("/ws/src"), by name: one range query instead of one
// per file.
func (t *Tx) StatCacheDir(dir string) (map[string]StatCache, error) {
	lo := []byte(dir + "/")
	hi := []byte(dir + "0") // '0' follows '/'
	// Rows deeper down are in the range too (every file below a directory
	// near the root): SQLite drops them, so that they are not converted
	// into Go values only to be skipped, once per directory above them.
	s, err := t.p.stmt(`SELECT path, ` + recordCols + ` FROM import_cache
		WHERE branch = ? AND path >= ? AND path < ? AND instr(substr(path, ?), x'2f') = 0`)
	if err != nil {
		return nil, err
	}
	rows, err := s.QueryContext(t.p.ctx, t.op.BranchID, lo, hi, len(lo)+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]StatCache{}
	for rows.Next() {
		path, c, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		name := path[len(lo):]
		if bytes.IndexByte(name, '/') >= 0 {
			continue // deeper down
		}
		out[string(name)] = c
	}
	return out, rows.Err()
}

// StatCacheTree returns the cached host stats of everything below store
// directory dir ("/ws"), grouped by the store path of their directory and
// then by name: one ordered range scan for a whole import instead of one
// query per directory. If there are more than limit records it returns
// nil and false (the caller reads directory by directory instead), so that
// memory stays bounded by limit.
func (t *Tx) StatCacheTree(dir string, limit int) (map[string]map[string]StatCache, bool, error) {
	s, err := t.p.stmt(`SELECT path, ` + recordCols + ` FROM import_cache
		WHERE branch = ? AND path >= ? AND path < ? ORDER BY path LIMIT ?`)
	if err != nil {
		return nil, false, err
	}
	rows, err := s.QueryContext(t.p.ctx, t.op.BranchID, []byte(dir+"/"), []byte(dir+"0"), limit+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	out := map[string]map[string]StatCache{}
	n := 0
	for rows.Next() {
		if n++; n > limit {
			return nil, false, nil
		}
		path, c, err := scanRecord(rows)
		if err != nil {
			return nil, false, err
		}
		i := bytes.LastIndexByte(path, '/') // > 0: every path is below dir
		parent, name := string(path[:i]), string(path[i+1:])
		kids := out[parent]
		if kids == nil {
			kids = map[string]StatCache{}
			out[parent] = kids
		}
		kids[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// HasStatCacheUnder reports whether an import recorded any file below
// store directory dir ("/ws/src"): whether the directory came from the host.
func (t *Tx) HasStatCacheUnder(dir string) (bool, error) {
	s, err := t.p.stmt(`SELECT 1 FROM import_cache WHERE branch = ? AND path >= ? AND path < ? LIMIT 1`)
	if err != nil {
		return false, err
	}
	var one int
	err = s.QueryRowContext(t.p.ctx, t.op.BranchID, []byte(dir+"/"), []byte(dir+"0")).Scan(&one)
	if err == sql.ErrNoRows {
		return false, nil
	}
	return err == nil, err
}

// ResetStatCache forgets the cached host stats of every file below store
// directory dir ("/ws"): a pull has just made the host directory a copy
// of another state, and records what it wrote instead.
func (t *Tx) ResetStatCache(dir string) error {
	return t.p.exec(`DELETE FROM import_cache WHERE branch = ? AND path >= ? AND path < ?`,
		t.op.BranchID, []byte(dir+"/"), []byte(dir+"0"))
}

// SetStatCache records what an import brought in at a store path.
func (t *Tx) SetStatCache(path string, c StatCache) error {
	var mode any
	if c.Kind == 0 {
		c.Kind = cas.EntryFile
	} else if c.Mode != ModeUnknown {
		mode = int64(c.Mode)
	}
	return t.p.exec(`INSERT OR REPLACE INTO import_cache (branch, path, size, mtime_ns, ctime_ns, host_ino, manifest, kind, mode, racy) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		t.op.BranchID, []byte(path), c.Size, c.MTime, c.CTime, c.Ino, c.Manifest[:], int(c.Kind), mode, c.Racy)
}

// DeleteStatCache forgets what imports recorded at store path and below
// it: the path is gone from both the host and the branch.
func (t *Tx) DeleteStatCache(path string) error {
	if err := t.p.exec(`DELETE FROM import_cache WHERE branch = ? AND path = ?`, t.op.BranchID, []byte(path)); err != nil {
		return err
	}
	return t.ResetStatCache(path)
}

// GCGeneration is DB.GCGeneration read inside this transaction: equal to
// a value read before, it proves that no gc completed in between (so an
// object seen present then is still there).
func (t *Tx) GCGeneration() (int64, error) { return gcGeneration(t.p.ctx, t.p.tx) }
