package journal_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

var (
	seedFlag = flag.Uint64("seed", 0, "seed for the random-operation tests (0: from the clock)")
	opsFlag  = flag.Int("model.ops", 0, "operations for TestModelRandomOps (0: 4000, 800 with -short)")
)

// mnode is one file, directory, symlink or fifo of the model. Hard-linked
// names share one *mnode.
type mnode struct {
	kind     cas.EntryKind
	mode     uint32
	uid, gid uint32
	mtime    int64
	data     string // file content or symlink target
	xattrs   map[string]string
}

// model is the expected tree: path -> node (the root is implicit).
type model map[string]*mnode

func (m model) clone() model {
	seen := map[*mnode]*mnode{}
	out := make(model, len(m))
	for p, n := range m {
		c, ok := seen[n]
		if !ok {
			c = &mnode{}
			*c = *n
			c.xattrs = make(map[string]string, len(n.xattrs))
			for k, v := range n.xattrs {
				c.xattrs[k] = v
			}
			seen[n] = c
		}
		out[p] = c
	}
	return out
}

// describe renders the model like treeMap renders a tree.
func (m model) describe(full bool) map[string]string {
	names := map[*mnode][]string{}
	for p, n := range m {
		if n.kind == cas.EntryFile {
			names[n] = append(names[n], p)
		}
	}
	out := make(map[string]string, len(m))
	for p, n := range m {
		var b strings.Builder
		fmt.Fprintf(&b, "%s:%04o:u%d:g%d", n.kind, n.mode, n.uid, n.gid)
		switch n.kind {
		case cas.EntryFile:
			fmt.Fprintf(&b, ":m%d:%s", n.mtime, contentDesc(n.data))
			if ps := names[n]; len(ps) > 1 && full {
				sort.Strings(ps)
				fmt.Fprintf(&b, ":links=%v", ps)
			}
		case cas.EntrySymlink:
			fmt.Fprintf(&b, ":m%d:%q", n.mtime, n.data)
		case cas.EntryFifo:
			fmt.Fprintf(&b, ":m%d", n.mtime)
		case cas.EntryDir:
			if full {
				fmt.Fprintf(&b, ":m%d", n.mtime)
			}
		}
		var xs []cas.Xattr
		for k, v := range n.xattrs {
			xs = append(xs, cas.Xattr{Name: k, Value: []byte(v)})
		}
		b.WriteString(xattrString(xs))
		out[p] = b.String()
	}
	return out
}

func parentOf(p string) string { d, _ := splitPath(p); return d }

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// resolveErr predicts Tx.Resolve(p): ENOENT for a missing component,
// ENOTDIR for a non-directory on the way.
func (m model) resolveErr(p string) syscall.Errno {
	if p == "" {
		return 0
	}
	comps := strings.Split(p, "/")
	for i := range comps {
		n := m[strings.Join(comps[:i+1], "/")]
		if n == nil {
			return syscall.ENOENT
		}
		if i < len(comps)-1 && n.kind != cas.EntryDir {
			return syscall.ENOTDIR
		}
	}
	return 0
}

func (m model) isDir(p string) bool { return p == "" || (m[p] != nil && m[p].kind == cas.EntryDir) }

func (m model) hasChildren(dir string) bool {
	for p := range m {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

func (m model) removeTree(dir string) {
	for p := range m {
		if under(p, dir) {
			delete(m, p)
		}
	}
}

// take removes and returns the subtree at p, keyed relative to p ("" = p).
func (m model) take(p string) map[string]*mnode {
	out := map[string]*mnode{}
	for q, n := range m {
		if under(q, p) {
			out[q[len(p):]] = n
			delete(m, q)
		}
	}
	return out
}

func (m model) put(p string, sub map[string]*mnode) {
	for rel, n := range sub {
		m[p+rel] = n
	}
}

// hist is one operation of a branch as Undo sees it.
type hist struct {
	kind     string
	before   model
	appended bool
	undone   bool
}

type point struct {
	label string
	rev   string
	seq   int64  // for snapshots: the snapshot event
	root  cas.ID // for snapshots: the recorded root
	m     model
}

type branchState struct {
	name string
	m    model
	hist []*hist
}

// modelRun drives random operations against a store and a model.
type modelRun struct {
	t      *testing.T
	ctx    context.Context
	db     *journal.DB
	seed   uint64
	rng    *rand.Rand
	step   int
	clock  int64
	recent []string
	dirs   []string // directory paths of the universe
	leaves []string // file names
	points []point
	stats  map[string]int // "op errno" -> count
	ops    int            // operations issued
}

func (r *modelRun) logOp(format string, args ...any) {
	r.recent = append(r.recent, fmt.Sprintf("step %d: ", r.step)+fmt.Sprintf(format, args...))
	if len(r.recent) > 20 {
		r.recent = r.recent[len(r.recent)-20:]
	}
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nseed %d (rerun with -seed=%d); last operations:\n  %s", fmt.Sprintf(format, args...), r.seed, r.seed,
		strings.Join(r.recent, "\n  "))
}

func (r *modelRun) pct(n int) bool { return r.rng.IntN(100) < n }

// sortedPaths lists the model's paths (map order is random; the test must
// replay from its seed), directories only with dirsOnly.
func (m model) sortedPaths(dirsOnly bool) []string {
	keys := make([]string, 0, len(m))
	for p, n := range m {
		if !dirsOnly || n.kind == cas.EntryDir {
			keys = append(keys, p)
		}
	}
	sort.Strings(keys)
	return keys
}

// pickPath returns a path: one that exists, or one from the universe.
func (r *modelRun) pickPath(m model, wantDir bool) string {
	if len(m) > 0 && r.pct(60) {
		keys := m.sortedPaths(false)
		return keys[r.rng.IntN(len(keys))]
	}
	if wantDir {
		return r.dirs[r.rng.IntN(len(r.dirs))]
	}
	parent := ""
	if i := r.rng.IntN(len(r.dirs) + 1); i < len(r.dirs) {
		parent = r.dirs[i]
	}
	name := r.leaves[r.rng.IntN(len(r.leaves))]
	if parent == "" {
		return name
	}
	return parent + "/" + name
}

// pickNew returns a path likely to be creatable: a new name in an existing
// directory, or a path from the universe.
func (r *modelRun) pickNew(m model, wantDir bool) string {
	dirs := append([]string{""}, m.sortedPaths(true)...)
	parent := dirs[r.rng.IntN(len(dirs))]
	if r.pct(25) || strings.Count(parent, "/") >= 3 {
		return r.pickPath(model{}, wantDir)
	}
	name := r.leaves[r.rng.IntN(len(r.leaves))]
	if wantDir {
		name = fmt.Sprintf("e%d", r.rng.IntN(3))
	}
	if parent == "" {
		return name
	}
	return parent + "/" + name
}

func (r *modelRun) content() string {
	n := r.rng.IntN(64)
	if r.pct(3) {
		n = 70000 + r.rng.IntN(100000) // several chunks
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghij\n"[r.rng.IntN(11)]
	}
	return fmt.Sprintf("<%d>", r.step) + string(b)
}

func (r *modelRun) tick() int64 { r.clock += 1000; return r.clock }

// parentIno resolves the directory part of p.
func parentIno(tx *journal.Tx, p string) (int64, []byte, error) {
	dir, name := splitPath(p)
	n, err := tx.Resolve([]byte(dir))
	if err != nil {
		return 0, nil, err
	}
	return n.Ino, []byte(name), nil
}

// randomOp applies one random operation to tx and to m when it succeeds, and
// returns an error when the store's answer differs from the model's.
func (r *modelRun) randomOp(tx *journal.Tx, m model) error {
	type opf func() (string, syscall.Errno, error, func())
	var ops []opf
	add := func(weight int, f opf) {
		for range weight {
			ops = append(ops, f)
		}
	}
	// Each op returns a description, the model's prediction, the store's
	// error and the change to apply to the model on success.
	create := func(kind cas.EntryKind) opf {
		return func() (string, syscall.Errno, error, func()) {
			p := r.pickNew(m, kind == cas.EntryDir)
			mode := []uint32{0o644, 0o600, 0o755, 0o4755, 0o640}[r.rng.IntN(5)]
			n := &mnode{kind: kind, mode: mode, uid: uint32(r.rng.IntN(3)), gid: uint32(r.rng.IntN(3)), mtime: r.tick(), xattrs: map[string]string{}}
			a := journal.Attr{Kind: kind, Mode: mode, UID: n.uid, GID: n.gid, MTime: n.mtime}
			switch kind {
			case cas.EntryFile:
				n.data = r.content()
				id, err := putData(tx, n.data)
				if err != nil {
					return "", 0, err, nil
				}
				a.Content, a.Size = id, int64(len(n.data))
			case cas.EntrySymlink:
				n.data = fmt.Sprintf("../target-%d", r.rng.IntN(100))
				a.Link = []byte(n.data)
			}
			if r.pct(10) {
				n.xattrs["user.init"] = "x"
				a.Xattrs = []cas.Xattr{{Name: "user.init", Value: []byte("x")}}
			}
			want := m.resolveErr(parentOf(p))
			if want == 0 && !m.isDir(parentOf(p)) {
				want = syscall.ENOTDIR
			} else if want == 0 && m[p] != nil {
				want = syscall.EEXIST
			}
			desc := fmt.Sprintf("create %s %q mode %04o", kind, p, mode)
			parent, name, err := parentIno(tx, p)
			if err == nil {
				_, err = tx.Create(parent, name, a)
			}
			return desc, want, err, func() { m[p] = n }
		}
	}
	add(20, create(cas.EntryFile))
	add(10, create(cas.EntryDir))
	add(4, create(cas.EntrySymlink))
	add(1, create(cas.EntryFifo))
	add(15, func() (string, syscall.Errno, error, func()) { // write
		p := r.pickPath(m, false)
		data := r.content()
		mtime := r.tick()
		want := m.resolveErr(p)
		if want == 0 {
			switch m[p].kind {
			case cas.EntryDir:
				want = syscall.EISDIR
			case cas.EntrySymlink, cas.EntryFifo:
				want = syscall.EINVAL
			}
		}
		desc := fmt.Sprintf("write %q (%d bytes)", p, len(data))
		id, err := putData(tx, data)
		if err != nil {
			return desc, 0, err, nil
		}
		n, err := tx.Resolve([]byte(p))
		if err == nil {
			_, err = tx.Write(n.Ino, id, int64(len(data)), mtime, []journal.Range{{Off: 0, Len: int64(len(data))}})
		}
		return desc, want, err, func() { m[p].data, m[p].mtime = data, mtime }
	})
	add(8, func() (string, syscall.Errno, error, func()) { // unlink
		p := r.pickPath(m, false)
		want := m.resolveErr(parentOf(p))
		switch {
		case want != 0:
		case !m.isDir(parentOf(p)):
			want = syscall.ENOTDIR
		case m[p] == nil:
			want = syscall.ENOENT
		case m[p].kind == cas.EntryDir:
			want = syscall.EISDIR
		}
		parent, name, err := parentIno(tx, p)
		if err == nil {
			err = tx.Unlink(parent, name)
		}
		return fmt.Sprintf("unlink %q", p), want, err, func() { delete(m, p) }
	})
	add(6, func() (string, syscall.Errno, error, func()) { // rmdir
		p := r.pickPath(m, true)
		want := m.resolveErr(parentOf(p))
		switch {
		case want != 0:
		case !m.isDir(parentOf(p)):
			want = syscall.ENOTDIR
		case m[p] == nil:
			want = syscall.ENOENT
		case m[p].kind != cas.EntryDir:
			want = syscall.ENOTDIR
		case m.hasChildren(p):
			want = syscall.ENOTEMPTY
		}
		parent, name, err := parentIno(tx, p)
		if err == nil {
			err = tx.Rmdir(parent, name)
		}
		return fmt.Sprintf("rmdir %q", p), want, err, func() { delete(m, p) }
	})
	add(1, func() (string, syscall.Errno, error, func()) { // rm -rf
		p := r.pickPath(m, true)
		want := m.resolveErr(parentOf(p))
		switch {
		case want != 0:
		case !m.isDir(parentOf(p)):
			want = syscall.ENOTDIR
		case m[p] == nil:
			want = syscall.ENOENT
		}
		parent, name, err := parentIno(tx, p)
		if err == nil {
			err = tx.RemoveAll(parent, name)
		}
		return fmt.Sprintf("removeall %q", p), want, err, func() { m.removeTree(p) }
	})
	add(18, func() (string, syscall.Errno, error, func()) { // rename
		src := r.pickPath(m, r.pct(30))
		var dst string
		if sn := m[src]; sn != nil && r.pct(70) {
			dst = r.pickNew(m, sn.kind == cas.EntryDir)
		} else {
			dst = r.pickPath(m, r.pct(30))
		}
		var flags uint32
		switch r.rng.IntN(7) {
		case 0:
			flags = journal.RenameNoReplace
		case 1:
			flags = journal.RenameExchange
		}
		sp, dp := parentOf(src), parentOf(dst)
		sn, dn := m[src], m[dst]
		want := m.resolveErr(sp)
		if want == 0 {
			want = m.resolveErr(dp)
		}
		switch {
		case want != 0:
		case !m.isDir(sp):
			want = syscall.ENOTDIR
		case sn == nil:
			want = syscall.ENOENT
		case !m.isDir(dp):
			want = syscall.ENOTDIR
		case flags == journal.RenameNoReplace && dn != nil:
			want = syscall.EEXIST
		case flags == journal.RenameExchange && dn == nil:
			want = syscall.ENOENT
		case dn == sn:
			// same name or two names of one file: nothing happens
		case sn.kind == cas.EntryDir && under(dp, src):
			want = syscall.EINVAL
		case flags == journal.RenameExchange && dn.kind == cas.EntryDir && under(sp, dst):
			want = syscall.EINVAL
		case flags == journal.RenameExchange:
		case dn == nil:
		case sn.kind == cas.EntryDir && dn.kind != cas.EntryDir:
			want = syscall.ENOTDIR
		case sn.kind != cas.EntryDir && dn.kind == cas.EntryDir:
			want = syscall.EISDIR
		case dn.kind == cas.EntryDir && m.hasChildren(dst):
			want = syscall.ENOTEMPTY
		}
		desc := fmt.Sprintf("rename %q -> %q flags %d", src, dst, flags)
		op, on, err := parentIno(tx, src)
		if err == nil {
			var np int64
			var nn []byte
			if np, nn, err = parentIno(tx, dst); err == nil {
				err = tx.Rename(op, on, np, nn, flags)
			}
		}
		return desc, want, err, func() {
			if dn == sn {
				return
			}
			if flags == journal.RenameExchange {
				a, b := m.take(src), m.take(dst)
				m.put(dst, a)
				m.put(src, b)
				return
			}
			m.removeTree(dst)
			m.put(dst, m.take(src))
		}
	})
	add(6, func() (string, syscall.Errno, error, func()) { // hard link
		src := r.pickPath(m, false)
		if n := m[src]; n != nil && n.kind != cas.EntryFile && n.kind != cas.EntryDir {
			return "", 0, nil, nil // art keeps link groups for regular files only
		}
		dst := r.pickNew(m, false)
		want := m.resolveErr(src)
		if want == 0 {
			want = m.resolveErr(parentOf(dst))
		}
		switch {
		case want != 0:
		case m[src].kind == cas.EntryDir:
			want = syscall.EPERM
		case !m.isDir(parentOf(dst)):
			want = syscall.ENOTDIR
		case m[dst] != nil:
			want = syscall.EEXIST
		}
		desc := fmt.Sprintf("link %q -> %q", src, dst)
		n, err := tx.Resolve([]byte(src))
		if err == nil {
			var parent int64
			var name []byte
			if parent, name, err = parentIno(tx, dst); err == nil {
				_, err = tx.Link(n.Ino, parent, name)
			}
		}
		return desc, want, err, func() { m[dst] = m[src] }
	})
	add(6, func() (string, syscall.Errno, error, func()) { // chmod / chown / utimes
		p := r.pickPath(m, r.pct(30))
		mask := journal.SetMode
		a := journal.Attr{Mode: []uint32{0o600, 0o644, 0o755, 0o700, 0o1777}[r.rng.IntN(5)]}
		if r.pct(30) {
			mask |= journal.SetUID | journal.SetGID
			a.UID, a.GID = uint32(r.rng.IntN(5)), uint32(r.rng.IntN(5))
		}
		if r.pct(30) {
			mask |= journal.SetMTime
			a.MTime = r.tick()
		}
		want := m.resolveErr(p)
		desc := fmt.Sprintf("setattr %q mask %#x mode %04o", p, mask, a.Mode)
		n, err := tx.Resolve([]byte(p))
		if err == nil {
			_, err = tx.SetAttr(n.Ino, mask, a)
		}
		return desc, want, err, func() {
			mn := m[p]
			mn.mode = a.Mode
			if mask&journal.SetUID != 0 {
				mn.uid, mn.gid = a.UID, a.GID
			}
			if mask&journal.SetMTime != 0 {
				mn.mtime = a.MTime
			}
		}
	})
	add(5, func() (string, syscall.Errno, error, func()) { // setxattr
		p := r.pickPath(m, r.pct(30))
		name := fmt.Sprintf("user.k%d", r.rng.IntN(3))
		value := fmt.Sprintf("v%d", r.step)
		want := m.resolveErr(p)
		n, err := tx.Resolve([]byte(p))
		if err == nil {
			err = tx.SetXattr(n.Ino, name, []byte(value))
		}
		return fmt.Sprintf("setxattr %q %s=%s", p, name, value), want, err, func() { m[p].xattrs[name] = value }
	})
	add(2, func() (string, syscall.Errno, error, func()) { // removexattr
		p := r.pickPath(m, r.pct(30))
		name := fmt.Sprintf("user.k%d", r.rng.IntN(3))
		want := m.resolveErr(p)
		if want == 0 {
			if _, ok := m[p].xattrs[name]; !ok {
				want = syscall.ENODATA
			}
		}
		n, err := tx.Resolve([]byte(p))
		if err == nil {
			err = tx.RemoveXattr(n.Ino, name)
		}
		return fmt.Sprintf("removexattr %q %s", p, name), want, err, func() { delete(m[p].xattrs, name) }
	})
	add(1, func() (string, syscall.Errno, error, func()) { // replace the xattr set
		p := r.pickPath(m, r.pct(30))
		xs := []cas.Xattr{{Name: "user.set", Value: []byte(fmt.Sprint(r.step))}}
		want := m.resolveErr(p)
		n, err := tx.Resolve([]byte(p))
		if err == nil {
			_, err = tx.SetAttr(n.Ino, journal.SetXattrs, journal.Attr{Xattrs: xs})
		}
		return fmt.Sprintf("setattr %q xattrs", p), want, err, func() {
			m[p].xattrs = map[string]string{"user.set": string(xs[0].Value)}
		}
	})

	desc, want, err, apply := ops[r.rng.IntN(len(ops))]()
	if desc == "" && err == nil {
		return nil
	}
	got := errnoIn(err)
	r.logOp("%s => %s", desc, errnoName(got))
	r.stats[strings.Fields(desc)[0]+" "+errnoName(got)]++
	r.ops++
	if got != want {
		return fmt.Errorf("%s: store says %s (%v), model says %s", desc, errnoName(got), err, errnoName(want))
	}
	if err == nil {
		apply()
	}
	return nil
}

var errAbort = errors.New("test abort")

// runTx performs 1-4 random operations in one Do (or a BeginOp with two
// Updates), sometimes aborting, and keeps the branch's model and undo history.
func (r *modelRun) runTx(b *branchState) {
	before := b.m.clone()
	var opErr error
	abort := r.pct(3)
	n := 1 + r.rng.IntN(4)
	snapshot := r.pct(2)
	var snap journal.Snapshot
	appended := 0
	fn := func(tx *journal.Tx) error {
		for range n {
			if opErr = r.randomOp(tx, b.m); opErr != nil {
				return opErr
			}
		}
		if snapshot {
			var err error
			if snap, err = tx.Snapshot(fmt.Sprintf("step %d", r.step)); err != nil {
				opErr = err
				return err
			}
			r.logOp("tx.Snapshot => %s", snap.ID.Short())
		}
		if abort {
			r.logOp("abort transaction")
			return errAbort
		}
		appended += tx.Appended()
		return nil
	}
	if r.pct(10) {
		// A long operation: BeginOp, two Updates, End.
		op, err := r.db.BeginOp(r.ctx, b.name, "run", fmt.Sprintf("step %d", r.step))
		if err != nil {
			r.fatalf("begin op: %v", err)
		}
		snapshot = false
		for range 2 {
			mid := b.m.clone()
			if err := op.Update(r.ctx, fn); err != nil && !errors.Is(err, errAbort) {
				r.fatalf("update: %v (op error %v)", err, opErr)
			} else if err != nil {
				b.m = mid
			}
			abort = r.pct(3)
		}
		if err := op.End(r.ctx, nil); err != nil {
			r.fatalf("end op: %v", err)
		}
		b.hist = append(b.hist, &hist{kind: "run", before: before, appended: appended > 0})
	} else {
		_, err := r.db.Do(r.ctx, b.name, "run", fmt.Sprintf("step %d", r.step), fn)
		switch {
		case errors.Is(err, errAbort):
			b.m = before.clone()
			return
		case err != nil:
			r.fatalf("do: %v (op error %v)", err, opErr)
		}
		b.hist = append(b.hist, &hist{kind: "run", before: before, appended: appended > 0})
	}
	if snapshot && !abort {
		r.points = append(r.points, point{label: "tx snapshot " + snap.ID.Short(), rev: snap.ID.String()[:12], seq: snap.Seq, root: snap.Root, m: b.m.clone()})
	}
}

// runBatch performs several updates through a Batch (the overlay's write
// path): each update commits or rolls back to its savepoint alone, and the
// batch commits every few updates.
func (r *modelRun) runBatch(b *branchState) {
	before := b.m.clone()
	op, err := r.db.BeginOp(r.ctx, b.name, "run", fmt.Sprintf("step %d batch", r.step))
	if err != nil {
		r.fatalf("begin op: %v", err)
	}
	maxOps := 1 + r.rng.IntN(4)
	batch := op.NewBatch(0, maxOps)
	r.logOp("batch of at most %d updates per commit", maxOps)
	appended := false
	for range 2 + r.rng.IntN(6) {
		mid := b.m.clone()
		abort := r.pct(15)
		var opErr error
		err := batch.Update(r.ctx, func(tx *journal.Tx) error {
			start := tx.Appended()
			for range 1 + r.rng.IntN(2) {
				if opErr = r.randomOp(tx, b.m); opErr != nil {
					return opErr
				}
			}
			if abort {
				r.logOp("abort update")
				return errAbort
			}
			appended = appended || tx.Appended() > start
			return nil
		})
		switch {
		case errors.Is(err, errAbort):
			b.m = mid
		case err != nil:
			r.fatalf("batch update: %v (op error %v)", err, opErr)
		}
	}
	if err := batch.Commit(); err != nil {
		r.fatalf("batch commit: %v", err)
	}
	if err := op.End(r.ctx, nil); err != nil {
		r.fatalf("end op: %v", err)
	}
	b.hist = append(b.hist, &hist{kind: "run", before: before, appended: appended})
}

func (r *modelRun) checkHead(b *branchState) {
	r.t.Helper()
	root := headRoot(r.t, r.db, b.name)
	got, err := treeMapErr(r.db.Objects(), root, true)
	if err != nil {
		r.fatalf("read head of %s: %v", b.name, err)
	}
	if d := mapDiff(b.m.describe(true), got); d != "" {
		r.fatalf("head of %s differs from the model:\n%s", b.name, d)
	}
	// The live projection (what the overlay serves), link counts included.
	_, err = r.db.Do(r.ctx, b.name, "read", "walk", func(tx *journal.Tx) error {
		got, err = projMap(tx)
		return err
	})
	if err != nil {
		r.fatalf("walk projection of %s: %v", b.name, err)
	}
	if d := mapDiff(b.m.describeNlink(), got); d != "" {
		r.fatalf("projection of %s differs from the model:\n%s", b.name, d)
	}
}

// describeNlink is describe(true) with each node's link count, and the
// root's link count under "".
func (m model) describeNlink() map[string]string {
	out := m.describe(true)
	names := map[*mnode]int{}
	subdirs := map[string]int{}
	for p, n := range m {
		names[n]++
		if n.kind == cas.EntryDir {
			subdirs[parentOf(p)]++
		}
	}
	for p, n := range m {
		nlink := names[n]
		if n.kind == cas.EntryDir {
			nlink = 2 + subdirs[p]
		}
		out[p] += fmt.Sprintf(":n%d", nlink)
	}
	out[""] = fmt.Sprintf("root:n%d", 2+subdirs[""])
	return out
}

// projMap describes a branch's projection through Tx.ReadDir like
// describeNlink describes the model.
func projMap(tx *journal.Tx) (map[string]string, error) {
	ctx := context.Background()
	out := map[string]string{}
	names := map[int64][]string{}
	var walk func(dir int64, prefix string) error
	walk = func(dir int64, prefix string) error {
		ents, err := tx.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range ents {
			n := de.Node
			p := prefix + string(de.Name)
			names[n.Ino] = append(names[n.Ino], p)
			// Lookup agrees with ReadDir.
			if l, err := tx.Lookup(dir, de.Name); err != nil || l.Ino != n.Ino {
				return fmt.Errorf("lookup %q: ino %d, %v; readdir says %d", p, l.Ino, err, n.Ino)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s:%04o:u%d:g%d", n.Kind, n.Mode, n.UID, n.GID)
			switch n.Kind {
			case cas.EntryFile:
				var buf strings.Builder
				if _, err := tx.Objects().ReadFile(ctx, n.Content, &buf); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				fmt.Fprintf(&b, ":m%d:%s", n.MTime, contentDesc(buf.String()))
				if int64(buf.Len()) != n.Size {
					fmt.Fprintf(&b, ":SIZE=%d", n.Size)
				}
			case cas.EntrySymlink:
				fmt.Fprintf(&b, ":m%d:%q", n.MTime, n.Link)
			default:
				fmt.Fprintf(&b, ":m%d", n.MTime)
			}
			out[p] = b.String() // completed below
			if n.IsDir() {
				if err := walk(n.Ino, p+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(journal.RootIno, ""); err != nil {
		return nil, err
	}
	// Link counts are read after the walk: a directory not loaded yet
	// reports 2 until something looks inside it.
	root, err := tx.Get(journal.RootIno)
	if err != nil {
		return nil, err
	}
	out[""] = fmt.Sprintf("root:n%d", root.Nlink)
	for ino, ps := range names {
		n, err := tx.Get(ino)
		if err != nil {
			return nil, err
		}
		sort.Strings(ps)
		for _, p := range ps {
			if len(ps) > 1 {
				out[p] += fmt.Sprintf(":links=%v", ps)
			}
			out[p] += xattrString(n.Xattrs) + fmt.Sprintf(":n%d", n.Nlink)
		}
	}
	return out, nil
}

func (r *modelRun) record(b *branchState) {
	br, err := r.db.Branch(r.ctx, b.name)
	if err != nil {
		r.fatalf("branch: %v", err)
	}
	r.points = append(r.points, point{label: fmt.Sprintf("%s@%d (step %d)", b.name, br.HeadSeq, r.step),
		rev: fmt.Sprintf("@%d", br.HeadSeq), m: b.m.clone()})
}

func (r *modelRun) snapshot(b *branchState) {
	s, err := r.db.TakeSnapshot(r.ctx, b.name, fmt.Sprintf("step %d", r.step))
	if err != nil {
		r.fatalf("snapshot: %v", err)
	}
	r.logOp("snapshot %s of %s", s.ID.Short(), b.name)
	b.hist = append(b.hist, &hist{kind: "snapshot", before: b.m.clone(), appended: true})
	r.points = append(r.points, point{label: "snapshot " + s.ID.Short(), rev: s.ID.String()[:12], seq: s.Seq, root: s.Root, m: b.m.clone()})
}

func (r *modelRun) undo(b *branchState) {
	var target *hist
	for i := len(b.hist) - 1; i >= 0; i-- {
		h := b.hist[i]
		if h.kind != "undo" && h.kind != "snapshot" && h.appended && !h.undone {
			target = h
			break
		}
	}
	_, err := r.db.Undo(r.ctx, b.name)
	r.logOp("undo on %s => %v", b.name, err)
	if target == nil || target.kind == "branch" {
		if !errors.Is(err, journal.ErrNothingToUndo) {
			r.fatalf("undo on %s: got %v, want ErrNothingToUndo", b.name, err)
		}
		return
	}
	if err != nil {
		r.fatalf("undo on %s: %v", b.name, err)
	}
	before := b.m.clone()
	b.m = target.before.clone()
	target.undone = true
	b.hist = append(b.hist, &hist{kind: "undo", before: before, appended: true})
}

func (r *modelRun) checkout(b *branchState) {
	if len(r.points) == 0 {
		return
	}
	p := r.points[len(r.points)-1-r.rng.IntN(min(len(r.points), 8))]
	st, err := r.db.Resolve(r.ctx, p.rev, b.name)
	if err != nil {
		r.fatalf("resolve %s (%s): %v", p.rev, p.label, err)
	}
	if _, err := r.db.Checkout(r.ctx, b.name, st); err != nil {
		r.fatalf("checkout %s to %s: %v", b.name, p.label, err)
	}
	r.logOp("checkout %s to %s", b.name, p.label)
	b.hist = append(b.hist, &hist{kind: "checkout", before: b.m.clone(), appended: true})
	b.m = p.m.clone()
}

// TestModelRandomOps runs thousands of random namespace operations on two
// branches and checks every recorded state, the heads, Verify and Diff
// against an in-memory model.
func TestModelRandomOps(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	var r *modelRun
	t.Cleanup(func() {
		if t.Failed() && r != nil {
			t.Logf("seed %d (rerun with -seed=%d); last operations:\n  %s", seed, seed, strings.Join(r.recent, "\n  "))
		}
	})
	target := 4000 // operations, 1-4 per transaction
	if testing.Short() {
		target = 800
	}
	if *opsFlag > 0 {
		target = max(*opsFlag, 200) // enough to branch half-way
	}
	ctx := context.Background()
	db := openStore(t)
	r = &modelRun{t: t, ctx: ctx, db: db, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), clock: 1e18, stats: map[string]int{}}
	for i := range 6 {
		d := fmt.Sprintf("d%d", i)
		r.dirs = append(r.dirs, d)
		for j := range 3 {
			r.dirs = append(r.dirs, fmt.Sprintf("%s/e%d", d, j))
		}
	}
	for i := range 10 {
		r.leaves = append(r.leaves, fmt.Sprintf("f%d", i))
	}
	main := &branchState{name: journal.DefaultBranch, m: model{}, hist: []*hist{{kind: "branch", before: model{}, appended: true}}}
	var side *branchState
	start := time.Now()
	for r.step = 0; r.ops < target; r.step++ {
		b := main
		if side != nil && r.pct(50) {
			b = side
		}
		switch {
		case side == nil && r.ops >= target/2 && len(r.points) > 0:
			// Branch from a recorded point of main's past.
			p := r.points[r.rng.IntN(len(r.points))]
			st, err := db.Resolve(ctx, p.rev, "main")
			if err != nil {
				r.fatalf("resolve %s: %v", p.rev, err)
			}
			if _, err := db.CreateBranch(ctx, "side", st); err != nil {
				r.fatalf("create branch: %v", err)
			}
			r.logOp("branch side from %s", p.label)
			side = &branchState{name: "side", m: p.m.clone(), hist: []*hist{{kind: "branch", appended: true}}}
			r.checkHead(side)
		case r.step%97 == 50:
			r.snapshot(b)
		case r.step%61 == 30:
			r.record(b)
		case side != nil && r.step%89 == 7:
			r.checkout(b)
		case r.step%53 == 11 || (r.step%53 == 12 && r.pct(50)):
			r.undo(b)
		case r.step%400 == 399:
			// Everything lives in the file: close and reopen the store.
			path := r.db.Path()
			if err := r.db.Close(); err != nil {
				r.fatalf("close: %v", err)
			}
			ndb, err := journal.Open(ctx, path, journal.Options{})
			if err != nil {
				r.fatalf("reopen: %v", err)
			}
			t.Cleanup(func() { ndb.Close() })
			r.db, db = ndb, ndb
			r.logOp("reopen store")
		case r.pct(15):
			r.runBatch(b)
		default:
			r.runTx(b)
		}
		if r.step%250 == 249 {
			r.checkHead(main)
			if side != nil {
				r.checkHead(side)
			}
		}
	}
	t.Logf("%d operations in %d steps in %v; %d paths on main, %d on side, %d recorded states", r.ops, r.step, time.Since(start).Round(time.Millisecond),
		len(main.m), len(side.m), len(r.points))
	if testing.Verbose() {
		var keys []string
		for k := range r.stats {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("  %-30s %d", k, r.stats[k])
		}
	}
	r.step = -1
	r.checkHead(main)
	r.checkHead(side)
	r.record(main)
	r.record(side)

	// Every recorded state, by @SEQ or snapshot id, still materializes to
	// what the model held then.
	for _, p := range r.points {
		st, err := db.Resolve(ctx, p.rev, "main")
		if err != nil {
			r.fatalf("resolve %s (%s): %v", p.rev, p.label, err)
		}
		if !p.root.IsZero() && st.Root != p.root {
			r.fatalf("%s resolves to root %s, recorded %s", p.label, st.Root.Short(), p.root.Short())
		}
		if p.seq != 0 {
			// The snapshot's event seq names the same state.
			at, err := db.Resolve(ctx, fmt.Sprintf("@%d", p.seq), "main")
			if err != nil {
				r.fatalf("resolve @%d (%s): %v", p.seq, p.label, err)
			}
			if at.Root != p.root || at.Snapshot.String()[:12] != p.rev {
				r.fatalf("@%d = root %s snapshot %s, want %s of %s", p.seq, at.Root.Short(), at.Snapshot.Short(), p.root.Short(), p.label)
			}
		}
		got, err := treeMapErr(db.Objects(), st.Root, true)
		if err != nil {
			r.fatalf("read %s: %v", p.label, err)
		}
		if d := mapDiff(p.m.describe(true), got); d != "" {
			r.fatalf("state %s (%s) differs from the model:\n%s", p.label, p.rev, d)
		}
	}

	// Diff between recorded states lists exactly the paths the models
	// differ in.
	roots := make([]cas.ID, len(r.points))
	for i, p := range r.points {
		roots[i] = resolve(t, db, p.rev).Root
	}
	for i := 0; i < 40 && len(r.points) > 1; i++ {
		a, b := r.rng.IntN(len(r.points)), r.rng.IntN(len(r.points))
		if i < len(r.points)-1 && i < 20 {
			a, b = i, i+1
		}
		pa, pb := r.points[a], r.points[b]
		want := changedKeys(pa.m.describe(false), pb.m.describe(false))
		got := diffPaths(t, db.Objects(), roots[a], roots[b])
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			da, db := pa.m.describe(false), pb.m.describe(false)
			var detail strings.Builder
			for _, p := range want {
				fmt.Fprintf(&detail, "  %q\n    a: %s\n    b: %s\n", p, da[p], db[p])
			}
			r.fatalf("Diff(%s, %s):\n got  %q\n want %q\n%s", pa.label, pb.label, got, want, detail.String())
		}
	}

	rep, err := db.Verify(ctx, journal.VerifyOptions{Rebuild: true})
	if err != nil {
		r.fatalf("verify: %v", err)
	}
	if !rep.OK() || len(rep.Rebuilt) != 0 {
		r.fatalf("verify: problems %+v, rebuilt %v", rep.Problems, rep.Rebuilt)
	}
	if got, want := rep.Branches, 2; got != want {
		t.Fatalf("verify saw %d branches, want %d", got, want)
	}
	t.Logf("verify: %d objects, %d events, %d snapshots; total %v", rep.Objects, rep.Events, rep.Snapshots,
		time.Since(start).Round(time.Millisecond))
}
