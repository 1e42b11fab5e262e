package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/merge"
)

// A pull with --merge lands a state in a host directory that has edits of
// its own (git stash; git pull; git stash pop, without the stash). For
// every path HostChanges names, three versions meet: the base (what the
// branch's import record says the host had when art last captured or
// pulled it; none without a record), the host's file now, and the
// state's entry. The rules are art merge's, with the host as "ours":
//
//   - the state left the path as in the base: the host's version stays;
//   - both the same: kept once;
//   - both changed a file: contents and modes are merged separately (a
//     side that kept the base's takes the other's); two different
//     contents are merged line by line if all three are text (merge.Text,
//     git merge-file's result), else conflict;
//   - anything else (deleted on one side and changed on the other, added
//     on both sides differently, a kind changed, a hard-linked entry, a
//     base the store no longer has) is a conflict.
//
// Conflicts refuse the pull before anything is written, unless Markers:
// text files then get git's diff3 markers, and every other conflicting
// path keeps the host's version (the state's is in the store). A path
// whose host content after the pull is not the state's (or that the host
// keeps deleted) is recorded as the state's entry with no stat, racy
// (Apply, Written): the next capture reads it, finds the host changed and
// the branch not, and records the host's version; the next pull merges
// against the state's.

// ErrHostConflicts refuses a pull --merge whose host and state changed the
// same paths in ways that do not merge; nothing was written.
var ErrHostConflicts = errclass.New(errclass.Conflict, "host and state changed the same paths")

// HostMergeOptions configure MergeHost.
type HostMergeOptions struct {
	Branch  string       // whose import records are the base
	Markers bool         // write conflicts (markers in text files) instead of refusing
	Labels  merge.Labels // marker labels: Ours is the host, Theirs the state
}

// HostMergePath is one host path MergeHost decided, workspace-relative.
type HostMergePath struct {
	Path   string `json:"path"`
	Action string `json:"action"`           // "kept" (the host's version), "merged", "conflict"
	Reason string `json:"reason,omitempty"` // a conflict's cause
	Hunks  int    `json:"hunks,omitempty"`  // conflicting hunks of a text file
}

// HostMerge is what MergeHost decided, path by path.
type HostMerge struct {
	Paths     []HostMergePath `json:"paths"`
	Conflicts int             `json:"conflicts"`
}

// hostDecision changes the plan for one path: keep drops every action at
// or below rel (the host keeps what it has there); otherwise the file
// placed at rel gets entry e and, if data is set, that content.
type hostDecision struct {
	rel      string
	keep     bool
	metaOnly bool // keep only the host directory's own mode (its entries are paths of their own)
	e        *cas.Entry
	data     []byte
	sync     bool // the host then holds the state's entry exactly: recorded as pulled
	expect   hostStamp
}

// hostStamp is a host file's stat when MergeHost read it: a file written
// over by the merge must still have it when the merge is carried out (an
// edit made meanwhile would be lost).
type hostStamp struct {
	size, mtime, ctime int64
	ino                uint64
}

func stampOf(st *syscall.Stat_t) hostStamp {
	return hostStamp{st.Size, st.Mtim.Nano(), st.Ctim.Nano(), st.Ino}
}

// checkStamps refuses, before anything is written, a pull --merge whose
// host files changed since MergeHost read them.
func (ex *exporter) checkStamps() error {
	for i := range ex.plan {
		a := &ex.plan[i]
		if a.expect == nil {
			continue
		}
		fi, err := ex.root.Lstat(a.rel)
		if err != nil || stampOf(fi.Sys().(*syscall.Stat_t)) != *a.expect {
			return fmt.Errorf("%s changed on the host while merging: nothing written, run the pull again", termtext.Quote(ex.name+"/"+a.rel))
		}
	}
	return nil
}

// MergeHost turns the plan into a merge of the state with the host's own
// changes (see above). With conflicts and without Markers it returns them
// with ErrHostConflicts and leaves the plan as it was.
func (p *ExportPlan) MergeHost(ctx context.Context, db *journal.DB, o HostMergeOptions) (*HostMerge, error) {
	changes, err := p.HostChanges(ctx, db, o.Branch)
	if err != nil || len(changes) == 0 {
		return &HostMerge{}, err
	}
	touched := map[string]bool{}
	for _, t := range p.Touches() {
		touched[t.Path] = true
	}
	ex := p.ex
	hm := &HostMerge{}
	var decisions []hostDecision
	unkeepable := false
	err = db.View(ctx, o.Branch, func(tx *journal.Tx) error {
		for _, hc := range changes {
			if err := ctx.Err(); err != nil {
				return err
			}
			m := &hostMerger{ex: ex, tx: tx, o: o, touched: touched}
			d, res, err := m.decide(hc)
			if err != nil {
				return fmt.Errorf("merge %s: %w", hc.Path, err)
			}
			if d != nil && d.keep && ex.dropsLink(d.rel) {
				// Keeping the host's version would leave the state's other
				// names of a hard-link group linking to the host's file:
				// refused even with Markers.
				res, d = HostMergePath{Path: hc.Path, Action: "conflict", Reason: "changed on the host, hard-linked in the state"}, nil
				unkeepable = true
			}
			if res.Action == "conflict" {
				hm.Conflicts++
			}
			hm.Paths = append(hm.Paths, res)
			if d != nil {
				decisions = append(decisions, *d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if hm.Conflicts > 0 && (!o.Markers || unkeepable) {
		return hm, ErrHostConflicts
	}
	for _, d := range decisions {
		if err := ex.applyDecision(d); err != nil {
			return nil, err
		}
	}
	return hm, nil
}

type hostMerger struct {
	ex      *exporter
	tx      *journal.Tx
	o       HostMergeOptions
	touched map[string]bool
}

func conflict(rel, reason string) (*hostDecision, HostMergePath, error) {
	// Under Markers the host keeps its version: the state's is in the store.
	return &hostDecision{rel: rel, keep: true}, HostMergePath{Path: rel, Action: "conflict", Reason: reason}, nil
}

func kept(rel string) (*hostDecision, HostMergePath, error) {
	return &hostDecision{rel: rel, keep: true}, HostMergePath{Path: rel, Action: "kept"}, nil
}

// decide applies the rules to host change hc.
func (m *hostMerger) decide(hc HostChange) (*hostDecision, HostMergePath, error) {
	rel := hc.Path
	theirs, err := m.ex.stateEntry(rel)
	if err != nil {
		return nil, HostMergePath{}, err
	}
	fi, err := m.ex.root.Lstat(rel)
	hostHas := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, HostMergePath{}, err
	}
	rec, hasRec, err := m.tx.ImportRecord("/" + m.ex.name + "/" + rel)
	if err != nil {
		return nil, HostMergePath{}, err
	}
	if !m.touched[rel] {
		// Below a directory the pull removes or replaces by another kind.
		return conflict(rel, "changed on the host, deleted in the state")
	}
	switch {
	case !hostHas:
		// Deleted on the host: kept deleted if the state has what the host had.
		same, err := m.sameAsRecord(rel, theirs)
		if err != nil {
			return nil, HostMergePath{}, err
		}
		if same {
			return kept(rel)
		}
		return conflict(rel, "deleted on the host, changed in the state")
	case theirs == nil:
		if hc.What == "new" {
			return kept(rel) // the host's new file: the state never had it
		}
		return conflict(rel, "changed on the host, deleted in the state")
	}
	st := fi.Sys().(*syscall.Stat_t)
	hostKind := kindOf(st.Mode)
	if !hasRec || hc.What == "new" {
		if hostKind == cas.EntryFile && theirs.Kind == cas.EntryFile {
			return m.mergeFile(rel, st, nil, theirs) // added on both sides: merged against nothing, as git does
		}
		return conflict(rel, "added on the host and in the state")
	}
	recKind := rec.Kind
	if recKind == 0 {
		recKind = cas.EntryFile
	}
	if same, err := m.sameAsRecord(rel, theirs); err != nil {
		return nil, HostMergePath{}, err
	} else if same {
		return kept(rel)
	}
	if hostKind != theirs.Kind || recKind != hostKind {
		return conflict(rel, "changed on the host and in the state (kind)")
	}
	switch hostKind {
	case cas.EntryFile:
		return m.mergeFile(rel, st, &rec, theirs)
	case cas.EntryDir:
		// Only its mode changed on the host (its entries are paths of their own).
		mode, ok := merge3Mode(rec.Mode, st.Mode&0o7777, theirs.Mode)
		if !ok {
			// Under Markers the host keeps its mode; the entries below
			// are merged as paths of their own.
			return &hostDecision{rel: rel, metaOnly: true}, HostMergePath{Path: rel, Action: "conflict", Reason: "mode changed on the host and in the state"}, nil
		}
		if mode == st.Mode&0o7777 {
			return &hostDecision{rel: rel, metaOnly: true}, HostMergePath{Path: rel, Action: "kept"}, nil
		}
		return nil, HostMergePath{Path: rel, Action: "merged"}, nil
	}
	return conflict(rel, "changed on the host and in the state")
}

// mergeFile merges host file rel (stat st) with the state's file theirs
// against the base record rec (nil: added on both sides, the empty base).
func (m *hostMerger) mergeFile(rel string, st *syscall.Stat_t, rec *journal.StatCache, theirs *cas.Entry) (*hostDecision, HostMergePath, error) {
	if theirs.LinkGroup != 0 {
		return conflict(rel, "changed on the host, hard-linked in the state")
	}
	hostMode := st.Mode & 0o7777
	baseMode := uint32(journal.ModeUnknown)
	if rec != nil {
		baseMode = rec.Mode
	}
	mode, ok := merge3Mode(baseMode, hostMode, theirs.Mode)
	if !ok {
		return conflict(rel, "mode changed on the host and in the state")
	}
	e := *theirs
	e.Mode = mode
	// Contents: a side equal to the base takes the other's.
	hostIsBase := false
	if rec != nil {
		same, err := m.ex.sameStored(rel, rec.Manifest)
		if err != nil {
			return nil, HostMergePath{}, err
		}
		hostIsBase = same
	}
	if hostIsBase {
		return &hostDecision{rel: rel, e: &e, sync: mode == theirs.Mode, expect: stampOf(st)}, HostMergePath{Path: rel, Action: "merged"}, nil
	}
	if same, err := m.ex.sameContent(rel, theirs); err != nil {
		return nil, HostMergePath{}, err
	} else if same {
		if mode == hostMode {
			return &hostDecision{rel: rel, keep: true}, HostMergePath{Path: rel, Action: "kept"}, nil
		}
		return &hostDecision{rel: rel, e: &e, sync: mode == theirs.Mode, expect: stampOf(st)}, HostMergePath{Path: rel, Action: "merged"}, nil
	}
	var base []byte
	if rec != nil {
		if rec.Size > merge.MaxTextSize {
			return conflict(rel, "changed on the host and in the state (not text)")
		}
		b, err := m.ex.readStored(rec.Manifest)
		if errors.Is(err, cas.ErrNotFound) {
			return conflict(rel, "changed on the host and in the state; the base is no longer in the store")
		}
		if err != nil {
			return nil, HostMergePath{}, err
		}
		base = b
	}
	if st.Size > merge.MaxTextSize || theirs.Size > merge.MaxTextSize {
		return conflict(rel, "changed on the host and in the state (not text)")
	}
	ours, err := m.ex.readHost(rel)
	if err != nil {
		return nil, HostMergePath{}, err
	}
	them, err := m.ex.readStored(theirs.Target)
	if err != nil {
		return nil, HostMergePath{}, err
	}
	if !merge.IsText(base) || !merge.IsText(ours) || !merge.IsText(them) {
		return conflict(rel, "changed on the host and in the state (not text)")
	}
	res := merge.Text(base, ours, them, merge.TextOptions{Labels: m.o.Labels})
	e.Size, e.MTime = int64(len(res.Merged)), time.Now().UnixNano()
	if res.Merged == nil {
		res.Merged = []byte{} // nil data would write the state's content
	}
	d := &hostDecision{rel: rel, e: &e, data: res.Merged, expect: stampOf(st)}
	if res.Conflicts > 0 {
		if !m.o.Markers {
			d = nil
		}
		return d, HostMergePath{Path: rel, Action: "conflict", Reason: "changed on the host and in the state (overlapping lines)", Hunks: res.Conflicts}, nil
	}
	return d, HostMergePath{Path: rel, Action: "merged"}, nil
}

// merge3Mode merges permission bits: a side equal to the base takes the
// other's; both changed differently (or no base known) does not merge.
func merge3Mode(base, ours, theirs uint32) (uint32, bool) {
	switch {
	case ours == theirs:
		return ours, true
	case base == journal.ModeUnknown:
		return 0, false
	case ours == base:
		return theirs, true
	case theirs == base:
		return ours, true
	}
	return 0, false
}

// sameAsRecord reports whether the state's entry e at rel (nil: none) is
// what the import records say the host had there: the state did not change
// it since art last captured or pulled it. A directory must match entry by
// entry.
func (m *hostMerger) sameAsRecord(rel string, e *cas.Entry) (bool, error) {
	rec, ok, err := m.tx.ImportRecord("/" + m.ex.name + "/" + rel)
	if err != nil {
		return false, err
	}
	if e == nil || !ok {
		return e == nil && !ok, nil
	}
	kind := rec.Kind
	if kind == 0 {
		kind = cas.EntryFile
	}
	if kind != e.Kind {
		return false, nil
	}
	if e.Kind != cas.EntrySymlink && rec.Mode != journal.ModeUnknown && rec.Mode != e.Mode {
		return false, nil
	}
	switch e.Kind {
	case cas.EntryFile:
		return rec.Manifest == e.Target, nil
	case cas.EntrySymlink:
		return rec.Manifest == cas.Sum(e.Link), nil
	case cas.EntryDir:
		t, err := m.ex.objs.GetTree(m.ex.ctx, e.Target)
		if err != nil {
			return false, err
		}
		for i := range t.Entries {
			c := t.Entries[i]
			if same, err := m.sameAsRecord(path.Join(rel, string(c.Name)), &c); err != nil || !same {
				return false, err
			}
		}
		// Entries the records have below it and the state does not were
		// deleted in the state: the host deleted them too.
		return true, nil
	}
	return false, nil
}

// stateEntry returns the state's entry at workspace path rel, nil if none.
func (ex *exporter) stateEntry(rel string) (*cas.Entry, error) {
	top, err := ex.objs.GetTree(ex.ctx, ex.opts.State.Root)
	if err != nil {
		return nil, err
	}
	e, ok := top.Lookup([]byte(ex.name))
	for _, n := range strings.Split(rel, "/") {
		if !ok || e.Kind != cas.EntryDir {
			return nil, nil
		}
		t, err := ex.objs.GetTree(ex.ctx, e.Target)
		if err != nil {
			return nil, err
		}
		e, ok = t.Lookup([]byte(n))
	}
	if !ok {
		return nil, nil
	}
	c := ex.sanitize(*e)
	return &c, nil
}

// limitBuffer refuses to grow past merge.MaxTextSize.
type limitBuffer struct{ bytes.Buffer }

var errTooBig = errors.New("larger than a text merge takes")

func (b *limitBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > merge.MaxTextSize {
		return 0, errTooBig
	}
	return b.Buffer.Write(p)
}

func (ex *exporter) readStored(id cas.ID) ([]byte, error) {
	var b limitBuffer
	if _, err := ex.objs.ReadFile(ex.ctx, id, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// readHost reads host file rel without following a link, bounded.
func (ex *exporter) readHost(rel string) ([]byte, error) {
	f, err := ex.root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, merge.MaxTextSize+1))
	if err == nil && len(b) > merge.MaxTextSize {
		err = errTooBig
	}
	return b, err
}

// dropsLink reports whether keeping the host's version at rel would drop
// the write of a name of a hard-link group (whose other names would then
// link to the host's file).
func (ex *exporter) dropsLink(rel string) bool {
	for i := range ex.plan {
		a := &ex.plan[i]
		if under(a.rel, rel) && (a.kind == actPlace || a.kind == actLink) && a.e != nil && a.e.LinkGroup != 0 {
			return true
		}
	}
	return false
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// applyDecision changes the plan for d.
func (ex *exporter) applyDecision(d hostDecision) error {
	if !d.sync {
		if ex.hostOwned == nil {
			ex.hostOwned = map[string]bool{}
		}
		// true: everything below rel too.
		ex.hostOwned[d.rel] = !d.metaOnly
	}
	if d.keep || d.metaOnly {
		plan := ex.plan[:0]
		for _, a := range ex.plan {
			if d.keep && under(a.rel, d.rel) || d.metaOnly && a.rel == d.rel && a.kind == actMeta {
				continue
			}
			plan = append(plan, a)
		}
		ex.plan = plan
		ex.recount()
		return nil
	}
	found := false
	for i := range ex.plan {
		a := &ex.plan[i]
		if a.rel != d.rel {
			continue
		}
		switch {
		case a.kind == actPlace:
			a.e, a.data, found = d.e, d.data, true
		case a.kind == actMeta && d.data == nil:
			a.e, found = d.e, true
		default:
			continue
		}
		expect := d.expect
		a.expect = &expect
	}
	if !found {
		return fmt.Errorf("internal error: no write of %s planned to merge into", d.rel)
	}
	ex.recount()
	return nil
}

// recount rebuilds the list of files to stage and their bytes after the
// plan changed.
func (ex *exporter) recount() {
	ex.writes, ex.total = ex.writes[:0], 0
	for i := range ex.plan {
		if ex.plan[i].kind == actPlace {
			ex.writes = append(ex.writes, i)
			ex.total += ex.plan[i].e.Size
		}
	}
}

// hostOwns reports whether rel keeps content of the host's that is not
// the state's (itself, or a directory above it with all below): no import
// record may claim it.
func (ex *exporter) hostOwns(rel string) bool {
	if len(ex.hostOwned) == 0 {
		return false
	}
	if _, ok := ex.hostOwned[rel]; ok {
		return true
	}
	for p := path.Dir(rel); p != "." && p != "/"; p = path.Dir(p) {
		if ex.hostOwned[p] {
			return true
		}
	}
	return false
}

// String is a one-line label for a merge path.
func (h HostMergePath) String() string { return h.Action + " " + h.Path }
