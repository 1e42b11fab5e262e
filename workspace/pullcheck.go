package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// A pull must not destroy what the host has and the store does not: an
// edit made on the host since art last captured or pulled the workspace,
// a file created there, a deletion. The import records say what the host
// had then (capture.go): a host path the plan would change is checked
// against its record as a capture would check it (an equal stat that was
// not racy proves it unchanged; otherwise the content is compared), and
// only the paths the plan changes are checked, so a pull that writes
// nothing reads nothing more.

// TouchOp is what a pull does to one host path.
type TouchOp int

const (
	TouchCreate  TouchOp = iota + 1 // the host has nothing there
	TouchReplace                    // what the host has there is replaced
	TouchDelete                     // removed (a directory with all below it)
	TouchMode                       // its permission bits change
)

func (o TouchOp) String() string {
	switch o {
	case TouchCreate:
		return "create"
	case TouchReplace:
		return "replace"
	case TouchDelete:
		return "delete"
	case TouchMode:
		return "mode"
	}
	return "?"
}

// Touch is one host path the plan changes, workspace-relative ("src/a.go").
// Kind is the state's entry kind for a create or replace.
type Touch struct {
	Path string
	Op   TouchOp
	Kind cas.EntryKind
}

// HostChange is a host path that a pull would change although the host
// changed it since art last captured or pulled the workspace: its content
// is nowhere in the store.
type HostChange struct {
	Path string `json:"path"` // workspace-relative
	What string `json:"what"` // "changed", "new" (the store never had it), "deleted"
}

// Touches lists the host paths the plan changes, in plan order. Paths it
// leaves as they are (content and mode equal; only an mtime or xattrs to
// set) are not listed.
func (p *ExportPlan) Touches() []Touch {
	ex := p.ex
	var out []Touch
	replaced := map[string]bool{}
	for i := range ex.plan {
		a := &ex.plan[i]
		switch a.kind {
		case actRemove:
			if a.replace {
				replaced[a.rel] = true
				out = append(out, Touch{Path: a.rel, Op: TouchReplace})
			} else {
				out = append(out, Touch{Path: a.rel, Op: TouchDelete})
			}
		case actPlace, actMkdir, actSymlink, actFifo, actLink:
			kind := a.e.Kind
			if replaced[a.rel] {
				// The replace listed above: it now knows what comes.
				for j := len(out) - 1; j >= 0; j-- {
					if out[j].Path == a.rel && out[j].Op == TouchReplace {
						out[j].Kind = kind
						break
					}
				}
				continue
			}
			op := TouchCreate
			if a.kind == actLink {
				// A link replaces whatever has the name (apply).
				if _, err := ex.root.Lstat(a.rel); err == nil {
					op = TouchReplace
				}
			}
			out = append(out, Touch{Path: a.rel, Op: op, Kind: kind})
		case actMeta:
			if a.rel == "." || !a.hostHas || a.e.Kind == cas.EntrySymlink {
				continue // created (or replaced) by the plan: the mode comes with it
			}
			if a.hostMode != a.e.Mode {
				out = append(out, Touch{Path: a.rel, Op: TouchMode, Kind: a.e.Kind})
			}
		}
	}
	return out
}

// HostChanges returns the host paths the plan would change that the host
// changed since the import records of branch in db were made (what art
// last captured or pulled there): content that exists nowhere else. It
// only reads the store. A path below a directory the host created is
// named by that directory.
func (p *ExportPlan) HostChanges(ctx context.Context, db *journal.DB, branch string) ([]HostChange, error) {
	touches := p.Touches()
	if len(touches) == 0 {
		return nil, nil
	}
	var out []HostChange
	err := db.View(ctx, branch, func(tx *journal.Tx) error {
		c := &hostCheck{ex: p.ex, tx: tx}
		// Only the directory the records were made of can have deleted
		// anything since (a pull into a new or other directory of the
		// same name is not a host's deletion).
		if rec, ok, err := tx.ImportRecord("/" + p.ex.name); err != nil {
			return err
		} else if fi, err := p.ex.root.Lstat("."); err == nil && ok && rec.Kind == cas.EntryDir {
			c.sameDir = rec.Ino == fi.Sys().(*syscall.Stat_t).Ino
		}
		fresh := map[string]bool{} // directories the plan creates or puts in place of something else
		for _, t := range touches {
			if err := ctx.Err(); err != nil {
				return err
			}
			if fresh[path.Dir(t.Path)] {
				// Inside a directory the plan makes: its record (if any)
				// was checked with the directory.
				if t.Kind == cas.EntryDir {
					fresh[t.Path] = true
				}
				continue
			}
			var err error
			switch t.Op {
			case TouchCreate:
				err = c.gone(t.Path)
			case TouchReplace, TouchDelete:
				// A directory replaced goes with all below it.
				err = c.check(t.Path, true, false)
			case TouchMode:
				err = c.check(t.Path, false, true)
			}
			if err != nil {
				return err
			}
			if t.Kind == cas.EntryDir && (t.Op == TouchCreate || t.Op == TouchReplace) {
				fresh[t.Path] = true
			}
		}
		out = c.out
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

type hostCheck struct {
	ex      *exporter
	tx      *journal.Tx
	out     []HostChange
	sameDir bool // the host directory is the one the records were made of
}

func (c *hostCheck) add(rel, what string) { c.out = append(c.out, HostChange{Path: rel, What: what}) }

// record returns the import record of workspace path rel. A directory from
// a store that did not record directories has none of its own: one with
// records below it came from an import then (as dirRecord says).
func (c *hostCheck) record(rel string, dir bool) (journal.StatCache, bool, error) {
	sp := c.storePath(rel)
	r, ok, err := c.tx.ImportRecord(sp)
	if err != nil || ok || !dir {
		return r, ok, err
	}
	below, err := c.tx.HasStatCacheUnder(sp)
	if err != nil || !below {
		return r, false, err
	}
	return journal.StatCache{Kind: cas.EntryDir, Mode: journal.ModeUnknown}, true, nil
}

// gone checks a path the plan creates: if the records have it, the host
// deleted it since - unless another branch that knew the workspace has no
// record of it (a pull of that branch may have removed it: nothing lost).
func (c *hostCheck) gone(rel string) error {
	if _, err := c.ex.root.Lstat(rel); err == nil {
		return c.check(rel, true, false) // appeared since the plan was made
	}
	if !c.sameDir {
		return nil
	}
	_, ok, err := c.record(rel, true)
	if err != nil || !ok {
		return err
	}
	others, n, err := c.tx.OtherRecords("/"+c.ex.name, c.storePath(rel))
	if err != nil {
		return err
	}
	if len(others) == n {
		c.add(rel, "deleted")
	}
	return nil
}

func (c *hostCheck) storePath(rel string) string { return "/" + c.ex.name + "/" + rel }

// check compares host path rel with its record: deep descends into a
// directory (the plan removes all below it), modeOnly compares only the
// permission bits (the plan keeps the content). A host entry that the
// pull's branch's record does not prove unchanged may still be one that
// another branch captured or pulled (the host holds that branch's state):
// its content is in the store all the same.
func (c *hostCheck) check(rel string, deep, modeOnly bool) error {
	fi, err := c.ex.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	kind := kindOf(st.Mode)
	if kind == 0 {
		return nil // a fifo, socket or device: never captured, nothing to keep
	}
	rec, ok, err := c.record(rel, kind == cas.EntryDir)
	if err != nil {
		return err
	}
	what := "new"
	if ok {
		if what, err = c.judge(rel, st, kind, rec, modeOnly); err != nil {
			return err
		}
	}
	if what != "" {
		others, _, err := c.tx.OtherRecords("/"+c.ex.name, c.storePath(rel))
		if err != nil {
			return err
		}
		for _, o := range others {
			w, err := c.judge(rel, st, kind, o, modeOnly)
			if err != nil {
				return err
			}
			if w == "" {
				what = ""
				break
			}
		}
	}
	if what == "new" {
		c.add(rel, what)
		return nil // everything below it is new too
	}
	if what != "" {
		c.add(rel, what)
	}
	if kind != cas.EntryDir || !deep || what != "" {
		return nil
	}
	names, err := hostNames(c.ex.root, rel)
	if err != nil {
		return err
	}
	for _, n := range names {
		child := path.Join(rel, n)
		if isPolicy(child) || c.ex.keep[child] {
			continue // never removed by a pull
		}
		if err := c.check(child, true, false); err != nil {
			return err
		}
	}
	return nil
}

// judge compares host entry rel (stat st, kind) with import record rec:
// "" if the record proves it unchanged, else "changed".
func (c *hostCheck) judge(rel string, st *syscall.Stat_t, kind cas.EntryKind, rec journal.StatCache, modeOnly bool) (string, error) {
	recKind := rec.Kind
	if recKind == 0 {
		recKind = cas.EntryFile
	}
	mode := st.Mode & 0o7777
	if recKind != kind || (kind != cas.EntrySymlink && rec.Mode != journal.ModeUnknown && rec.Mode != mode) {
		return "changed", nil
	}
	if modeOnly {
		return "", nil
	}
	switch kind {
	case cas.EntryFile:
		if !rec.Racy && statSameSys(rec, st) {
			return "", nil
		}
		same, err := c.ex.sameStored(rel, rec.Manifest)
		if err != nil || !same {
			return "changed", err
		}
	case cas.EntrySymlink:
		target, err := c.ex.root.Readlink(rel)
		if err != nil {
			return "", err
		}
		if cas.Sum([]byte(target)) != rec.Manifest {
			return "changed", nil
		}
	}
	return "", nil
}

func statSameSys(c journal.StatCache, st *syscall.Stat_t) bool {
	return c.Size == st.Size && c.MTime == st.Mtim.Nano() && c.CTime == st.Ctim.Nano() && c.Ino == st.Ino
}

// sameStored reports whether host file rel holds the stored content id. A
// content the store no longer has cannot prove anything: false.
func (ex *exporter) sameStored(rel string, id cas.ID) (bool, error) {
	f, err := ex.root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	cw := &compareWriter{r: f}
	if _, err := ex.objs.ReadFile(ex.ctx, id, cw); err != nil && !errors.Is(err, errDiffers) {
		if errors.Is(err, cas.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if cw.differs {
		return false, nil
	}
	var one [1]byte
	n, _ := f.Read(one[:])
	return n == 0, nil
}
