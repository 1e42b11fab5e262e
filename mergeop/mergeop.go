// Package mergeop merges one recorded state of a store into a branch as one
// operation: the merge base from the journal's history (DB.MergeBase), the
// three-way plan of package merge over the paths either side changed, text
// merges of files both sides edited, then one op of kind "merge" on the
// branch that begins with the merge marker (Tx.MarkMerge), applies the
// result as ordinary path events (so log --path and blame see them) and
// ends with a snapshot, so art undo reverts it.
package mergeop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/merge"
)

// ConflictMode says what a merge does with conflicting paths.
type ConflictMode uint8

const (
	Refuse  ConflictMode = iota // change nothing and list them (ErrConflicts)
	Markers                     // text conflicts get git's diff3 markers, others keep ours; the op is marked conflicted
	Ours                        // each conflict (each hunk of a text) takes ours
	Theirs                      // each conflict (each hunk of a text) takes theirs
)

// ParseConflictMode maps the CLI's and MCP's names to a mode.
func ParseConflictMode(s string) (ConflictMode, error) {
	switch s {
	case "", "refuse":
		return Refuse, nil
	case "markers":
		return Markers, nil
	case "ours":
		return Ours, nil
	case "theirs":
		return Theirs, nil
	}
	return 0, fmt.Errorf("unknown conflict mode %s: want refuse, markers, ours or theirs", termtext.Quoted(s))
}

func (m ConflictMode) String() string {
	return [...]string{"refuse", "markers", "ours", "theirs"}[m]
}

// ErrConflicts is returned, with the Result listing them, when a merge in
// Refuse mode finds conflicts: nothing was changed.
var ErrConflicts = errclass.New(errclass.Conflict, "merge has conflicts")

// ErrMoved is returned when the branch changed between planning and
// applying (another writer); nothing was changed and a retry will do.
var ErrMoved = errclass.New(errclass.Conflict, "the branch moved while the merge was planned")

// Options says what to merge where.
type Options struct {
	Source     journal.State // the state merged in (journal.DB.Resolve)
	SourceName string        // the revision as the user named it: messages and marker labels
	Into       string        // the branch changed
	Conflict   ConflictMode
	Message    string // the snapshot's message; "" makes one
}

// Path is one path of a merge's result, as --json and MCP list it.
type Path struct {
	Path string `json:"path"`
	// Action: "add" or "take" (theirs' entry, new or replacing ours'),
	// "delete", "meta" (mode or xattrs merged), "text" (a line merge),
	// "conflict".
	Action string `json:"action"`
	// Reason says why a path conflicts.
	Reason string `json:"reason,omitempty"`
	// Resolution is what a conflict became: "markers" (a text with
	// git's conflict markers), "ours", "theirs", or "" when refused.
	Resolution string `json:"resolution,omitempty"`
	// Hunks is a text conflict's number of conflicting hunks.
	Hunks int `json:"hunks,omitempty"`
}

// Result describes a merge; its JSON is art merge --json's and the MCP
// merge tool's.
type Result struct {
	Into   journal.State  `json:"into"`   // the branch before the merge
	Source journal.State  `json:"source"` // the state merged in
	Base   *journal.State `json:"base"`   // null: no common history (the empty tree)
	// UpToDate: the source holds nothing the branch lacks; nothing was
	// recorded.
	UpToDate  bool   `json:"up_to_date"`
	Merged    []Path `json:"merged"`
	Conflicts []Path `json:"conflicts"`
	// Conflicted: the merge was recorded with conflict markers (Markers
	// mode with text conflicts, or conflicts kept as ours).
	Conflicted bool              `json:"conflicted"`
	Applied    bool              `json:"applied"`
	Op         int64             `json:"op,omitempty"`
	Snapshot   *journal.Snapshot `json:"snapshot,omitempty"`
}

// Merge merges opts.Source into branch opts.Into. A branch a live session
// holds is refused (journal.BranchInUseError) before anything is read. In
// Refuse mode, conflicts return the Result with ErrConflicts and change
// nothing. The whole merge is one write transaction.
func Merge(ctx context.Context, db *journal.DB, opts Options) (*Result, error) {
	if err := db.BranchFree(opts.Into); err != nil {
		return nil, err
	}
	into, err := db.Head(ctx, opts.Into)
	if err != nil {
		return nil, err
	}
	res := &Result{Into: into, Source: opts.Source, Merged: []Path{}, Conflicts: []Path{}}
	base, ok, err := db.MergeBase(ctx, into, opts.Source)
	if err != nil {
		return nil, err
	}
	if ok {
		res.Base = &base
	}
	if opts.Source.Root == base.Root || opts.Source.Root == into.Root {
		res.UpToDate = true
		return res, nil
	}
	desc := fmt.Sprintf("merge %s into %s", opts.SourceName, opts.Into)
	op, err := db.BeginOp(ctx, opts.Into, "merge", desc)
	if err != nil {
		return nil, err
	}
	err = op.Update(ctx, func(tx *journal.Tx) error {
		root, err := tx.Root()
		if err != nil {
			return err
		}
		if root != into.Root {
			return ErrMoved
		}
		m := &merger{ctx: ctx, tx: tx, objs: tx.Objects(), opts: opts, res: res, intoName: into.Branch, dirs: map[string]int64{}}
		if err := m.plan(base.Root, into.Root, opts.Source.Root); err != nil {
			return err
		}
		if err := m.mergeTexts(); err != nil {
			return err
		}
		m.report()
		if len(res.Conflicts) > 0 && opts.Conflict == Refuse {
			return ErrConflicts
		}
		if err := tx.MarkMerge(opts.Source, desc); err != nil {
			return err
		}
		if err := m.apply(); err != nil {
			return err
		}
		msg := opts.Message
		if msg == "" {
			msg = desc
			if res.Conflicted {
				what := "paths"
				if len(res.Conflicts) == 1 {
					what = "path"
				}
				msg += fmt.Sprintf(" (conflicted: %d %s)", len(res.Conflicts), what)
			}
		}
		s, err := tx.Snapshot(msg)
		if err != nil {
			return err
		}
		res.Snapshot = &s
		return nil
	})
	if err != nil {
		// Not cancelled with ctx: a merge interrupted by a signal must not
		// leave an empty op behind.
		if _, derr := op.Discard(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, derr)
		}
		if errors.Is(err, ErrConflicts) {
			return res, err
		}
		return nil, fmt.Errorf("merge into %s: %w", termtext.Quote(opts.Into), err)
	}
	// A conflicted merge ends with status 1, which art log and art status
	// show; a clean one with none, like any other op.
	var status *int
	if res.Conflicted {
		one := 1
		status = &one
	}
	if err := op.End(context.WithoutCancel(ctx), status); err != nil {
		return nil, err
	}
	res.Applied, res.Op = true, op.ID
	return res, nil
}

// merger is one merge inside its write transaction.
type merger struct {
	ctx      context.Context
	tx       *journal.Tx
	objs     *cas.Store
	opts     Options
	res      *Result
	intoName string

	// entries: the cas entries of the three sides at the paths either
	// side changed (a nil map value: absent).
	base, ours, theirs map[string]*cas.Entry
	plan_              *merge.Plan
	// texts: merged contents of MergeText steps, by path; hunks: the text
	// conflicts' hunk counts; binary: MergeText steps that are no text.
	texts  map[string]cas.ID
	sizes  map[string]int64
	hunks  map[string]int
	binary map[string]bool
	// dirs: inodes of directories of the branch by path, as apply goes.
	dirs map[string]int64
}

func (m *merger) favor() merge.Side {
	if m.opts.Conflict == Theirs {
		return merge.Theirs
	}
	return merge.Ours
}

// plan diffs base against each side and plans the paths either changed.
func (m *merger) plan(base, ours, theirs cas.ID) error {
	m.base, m.ours, m.theirs = map[string]*cas.Entry{}, map[string]*cas.Entry{}, map[string]*cas.Entry{}
	changed := map[string]bool{}
	collect := func(side map[string]*cas.Entry, to cas.ID) error {
		return journal.Diff(m.ctx, m.objs, base, to, func(c journal.Change) error {
			p := string(c.Path)
			changed[p] = true
			m.base[p] = c.Old
			side[p] = c.New
			return nil
		})
	}
	if err := collect(m.ours, ours); err != nil {
		return fmt.Errorf("diff base and %s: %w", termtext.Quote(m.intoName), err)
	}
	if err := collect(m.theirs, theirs); err != nil {
		return fmt.Errorf("diff base and %s: %w", termtext.Quoted(m.opts.SourceName), err)
	}
	bt, ot, tt := merge.Tree{}, merge.Tree{}, merge.Tree{}
	for p := range changed {
		// A path one diff did not report is as in base on that side.
		if _, ok := m.ours[p]; !ok {
			m.ours[p] = m.base[p]
		}
		if _, ok := m.theirs[p]; !ok {
			m.theirs[p] = m.base[p]
		}
		put(bt, p, m.base[p])
		put(ot, p, m.ours[p])
		put(tt, p, m.theirs[p])
	}
	m.plan_ = merge.PlanTrees(bt, ot, tt, m.favor())
	return nil
}

func put(t merge.Tree, p string, e *cas.Entry) {
	if e != nil {
		t[p] = entryOf(e)
	}
}

// entryOf is what a merge compares of a cas entry: kind, mode, content and
// xattrs (not times, sizes or owners).
func entryOf(e *cas.Entry) *merge.Entry {
	me := &merge.Entry{Mode: e.Mode}
	switch e.Kind {
	case cas.EntryFile:
		me.Kind, me.ID = merge.File, string(e.Target[:])
	case cas.EntryDir:
		me.Kind = merge.Dir
	case cas.EntrySymlink:
		me.Kind, me.ID = merge.Symlink, string(e.Link)
	default:
		me.Kind, me.ID = merge.Special, e.Kind.String()
	}
	if len(e.Xattrs) > 0 {
		me.Xattrs = make(map[string]string, len(e.Xattrs))
		for _, x := range e.Xattrs {
			me.Xattrs[x.Name] = string(x.Value)
		}
	}
	return me
}

// mergeTexts runs the line merges the plan asks for and stores their
// results.
func (m *merger) mergeTexts() error {
	m.texts, m.sizes, m.hunks, m.binary = map[string]cas.ID{}, map[string]int64{}, map[string]int{}, map[string]bool{}
	labels := merge.Labels{Ours: m.intoName, Base: "base", Theirs: m.opts.SourceName}
	if b := m.res.Base; b != nil && !b.Snapshot.IsZero() {
		labels.Base = b.Snapshot.Short()
	} else if b != nil {
		labels.Base = fmt.Sprintf("@%d", b.Seq)
	}
	to := merge.TextOptions{Labels: labels}
	switch m.opts.Conflict {
	case Ours:
		to.Favor = merge.Ours
	case Theirs:
		to.Favor = merge.Theirs
	}
	for _, s := range m.plan_.Steps {
		if s.Action != merge.MergeText {
			continue
		}
		var sides [3][]byte
		text := true
		for i, e := range []*cas.Entry{m.base[s.Path], m.ours[s.Path], m.theirs[s.Path]} {
			if e == nil || e.Kind != cas.EntryFile {
				continue // an add/add merges against an empty base, as git does
			}
			if e.Size > merge.MaxTextSize {
				text = false
				break
			}
			var buf bytes.Buffer
			if _, err := m.objs.ReadFile(m.ctx, e.Target, &buf); err != nil {
				return fmt.Errorf("read %s: %w", termtext.Quote(s.Path), err)
			}
			if !merge.IsText(buf.Bytes()) {
				text = false
				break
			}
			sides[i] = buf.Bytes()
		}
		if !text {
			m.binary[s.Path] = true
			continue
		}
		r := merge.Text(sides[0], sides[1], sides[2], to)
		if r.Conflicts > 0 {
			m.hunks[s.Path] = r.Conflicts
		} else if r.Favored > 0 {
			m.hunks[s.Path] = r.Favored
		}
		if r.Conflicts > 0 && m.opts.Conflict == Refuse {
			continue // nothing will be written
		}
		id, _, err := m.objs.PutFile(m.ctx, bytes.NewReader(r.Merged))
		if err != nil {
			return fmt.Errorf("store merged %s: %w", termtext.Quote(s.Path), err)
		}
		m.texts[s.Path], m.sizes[s.Path] = id, int64(len(r.Merged))
	}
	return nil
}

// report fills the Result's path lists from the plan and the text merges.
func (m *merger) report() {
	res := m.res
	resolution := ""
	switch m.opts.Conflict {
	case Markers, Ours:
		resolution = "ours"
	case Theirs:
		resolution = "theirs"
	}
	for _, s := range m.plan_.Steps {
		switch {
		case s.Action == merge.Conflict:
			res.Conflicts = append(res.Conflicts, Path{Path: s.Path, Action: "conflict", Reason: s.Reason, Resolution: resolution})
		case s.Action == merge.MergeText && m.binary[s.Path]:
			res.Conflicts = append(res.Conflicts, Path{Path: s.Path, Action: "conflict",
				Reason: "changed by both and not text (binary, or over " + fmt.Sprint(merge.MaxTextSize>>20) + " MiB)", Resolution: resolution})
		case s.Action == merge.MergeText && m.hunks[s.Path] > 0:
			p := Path{Path: s.Path, Action: "conflict", Reason: "overlapping changes", Hunks: m.hunks[s.Path]}
			switch m.opts.Conflict {
			case Markers:
				p.Resolution = "markers"
			case Ours, Theirs:
				p.Resolution = resolution
			}
			res.Conflicts = append(res.Conflicts, p)
		case s.Action == merge.MergeText:
			res.Merged = append(res.Merged, Path{Path: s.Path, Action: "text"})
		case s.Action == merge.Take && s.Result == nil:
			res.Merged = append(res.Merged, Path{Path: s.Path, Action: "delete"})
		case s.Action == merge.Take && s.Ours == nil:
			res.Merged = append(res.Merged, Path{Path: s.Path, Action: "add"})
		case s.Action == merge.Take:
			res.Merged = append(res.Merged, Path{Path: s.Path, Action: "take"})
		case s.Action == merge.SetMeta:
			res.Merged = append(res.Merged, Path{Path: s.Path, Action: "meta"})
		}
	}
	res.Conflicted = m.opts.Conflict == Markers && len(res.Conflicts) > 0
}

// apply writes the result into the branch, directory before contents.
func (m *merger) apply() error {
	for _, s := range m.plan_.Steps {
		if err := m.applyStep(s); err != nil {
			return fmt.Errorf("apply %s: %w", termtext.Quote(s.Path), err)
		}
	}
	return nil
}

// want is the cas entry a step leaves at its path (nil: absent), with the
// merged content of a text merge.
func (m *merger) want(s merge.Step) *cas.Entry {
	if s.Result == nil {
		return nil
	}
	switch s.Result {
	case s.Ours:
		return m.ours[s.Path]
	case s.Theirs:
		return m.theirs[s.Path]
	}
	// A merged entry: the content is the side's whose content it has
	// (times and owners come along), mode and xattrs are the merge's.
	src := m.ours[s.Path]
	if t := m.theirs[s.Path]; s.Result.ID == entryOf(t).ID {
		src = t
	}
	e := *src
	e.Mode = s.Result.Mode
	e.Xattrs = nil
	for _, n := range slices.Sorted(maps.Keys(s.Result.Xattrs)) {
		e.Xattrs = append(e.Xattrs, cas.Xattr{Name: n, Value: []byte(s.Result.Xattrs[n])})
	}
	if id, ok := m.texts[s.Path]; ok {
		// New content gets a new time, so build tools see the change.
		e.Target, e.Size, e.MTime = id, m.sizes[s.Path], time.Now().UnixNano()
	}
	return &e
}

func (m *merger) applyStep(s merge.Step) error {
	if s.Action == merge.MergeText {
		switch {
		case m.binary[s.Path] && m.opts.Conflict == Theirs:
			s.Result = s.Theirs // a conflict that is no text: the favored side's entry
		case m.binary[s.Path], m.texts[s.Path].IsZero():
			return nil // ours stays (a refused text conflict never gets here)
		}
	}
	want := m.want(s)
	tx := m.tx
	path := []byte(s.Path)
	parent, name := int64(journal.RootIno), path
	if i := bytes.LastIndexByte(path, '/'); i >= 0 {
		ino, err := m.dir(s.Path[:i])
		if err != nil {
			if want == nil && absent(err) {
				return nil // its directory went before it
			}
			return err
		}
		parent, name = ino, path[i+1:]
	}
	cur, err := tx.Lookup(parent, name)
	switch {
	case err != nil && !absent(err):
		return err
	case err != nil:
		if want == nil {
			return nil
		}
		return m.create(s.Path, parent, name, want)
	case want == nil:
		return m.removeAll(s.Path, parent, name)
	}
	// Present and wanted: change in place when the kind stays and the node
	// has no other names (a write to a hard-linked node would change them
	// too); otherwise replace.
	if cur.Kind != want.Kind || (want.Kind == cas.EntrySymlink && !bytes.Equal(cur.Link, want.Link)) ||
		(cur.Kind == cas.EntryFile && cur.Nlink > 1) {
		if err := m.removeAll(s.Path, parent, name); err != nil {
			return err
		}
		return m.create(s.Path, parent, name, want)
	}
	if want.Kind == cas.EntryFile && cur.Content != want.Target {
		if _, err := tx.Write(cur.Ino, want.Target, want.Size, want.MTime, nil); err != nil {
			return err
		}
	}
	var mask uint32
	if cur.Mode != want.Mode {
		mask |= journal.SetMode
	}
	if !sameXattrs(cur.Xattrs, want.Xattrs) {
		mask |= journal.SetXattrs
	}
	if mask != 0 {
		if _, err := tx.SetAttr(cur.Ino, mask, journal.Attr{Mode: want.Mode, Xattrs: want.Xattrs}); err != nil {
			return err
		}
	}
	return nil
}

// dir returns the inode of directory p, remembered across steps: steps
// come in tree order, so siblings share their parent's lookup.
func (m *merger) dir(p string) (int64, error) {
	if ino, ok := m.dirs[p]; ok {
		return ino, nil
	}
	n, err := m.tx.Resolve([]byte(p))
	if err != nil {
		return 0, err
	}
	if n.Kind != cas.EntryDir {
		return 0, syscall.ENOTDIR
	}
	m.dirs[p] = n.Ino
	return n.Ino, nil
}

// removeAll removes p (and what is below it) and forgets the directories
// it held.
func (m *merger) removeAll(p string, parent int64, name []byte) error {
	for d := range m.dirs {
		if d == p || strings.HasPrefix(d, p+"/") {
			delete(m.dirs, d)
		}
	}
	return m.tx.RemoveAll(parent, name)
}

func (m *merger) create(p string, parent int64, name []byte, e *cas.Entry) error {
	a := journal.Attr{Kind: e.Kind, Mode: e.Mode, UID: e.UID, GID: e.GID, MTime: e.MTime, Xattrs: e.Xattrs}
	switch e.Kind {
	case cas.EntryFile:
		a.Content, a.Size = e.Target, e.Size
	case cas.EntrySymlink:
		a.Link, a.Size = e.Link, int64(len(e.Link))
	}
	n, err := m.tx.Create(parent, name, a)
	if err == nil && e.Kind == cas.EntryDir {
		m.dirs[p] = n.Ino
	}
	return err
}

func sameXattrs(a, b []cas.Xattr) bool {
	return slices.EqualFunc(a, b, func(x, y cas.Xattr) bool { return x.Name == y.Name && bytes.Equal(x.Value, y.Value) })
}

// absent reports whether err says a path does not exist (or a component
// of it is no directory).
func absent(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR)
}
