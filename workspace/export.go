package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"golang.org/x/sys/unix"
)

// ArtDir is the workspace directory art keeps for itself; sandbox policy
// (.art/config/binds.json) lives in it. Export never writes, replaces or
// deletes it or anything below it, whatever the state holds: what the next
// sandbox obeys only ever comes from the host.
const ArtDir = ".art"

// Bounds of what one export may expand to. A state is a DAG of trees: a
// few kilobytes can name a subtree at billions of paths, so a state is
// measured (each distinct tree read once) before anything is planned.
// Entries and bytes are limits a user can raise (ExportOptions); depth
// is not: a path 1,024 directories deep is already near PATH_MAX (4,096
// bytes) with short names, and no tool on the host could address more.
const (
	DefaultMaxEntries = 10_000_000
	DefaultMaxBytes   = 1 << 40
	MaxDepth          = 1024
)

// ErrTooLarge reports a state that expands past an export's bounds.
var ErrTooLarge = errclass.New(errclass.Invalid, "state too large")

// ExportOptions configure Export.
type ExportOptions struct {
	Dir   string // host workspace directory (created if missing)
	State journal.State
	// Checksum compares the bytes of files whose size and mtime match
	// instead of trusting them (rsync's quick check is the default).
	Checksum bool
	Entries  io.Writer // seed-format lines ("FILE ws/main.py (1234 bytes)"); nil discards
	Warn     io.Writer // warnings; nil discards
	Progress func(done, total int64)
	// Keep lists host files never removed or replaced (the store's own
	// files when it lives inside the workspace: see StoreFiles).
	Keep []string
	// SameOwner applies the stored owners and setuid/setgid bits, as
	// tar's --same-owner (root restoring a store of its own). Without it
	// a store never decides who owns a file or what running it grants:
	// setuid and setgid bits are dropped, and new files belong to the
	// destination directory's owner (to the invoking user if it cannot
	// give them away); existing files keep their owners.
	SameOwner bool
	// MaxEntries and MaxBytes bound the paths and file bytes the state
	// may expand to; 0 means DefaultMaxEntries / DefaultMaxBytes.
	MaxEntries, MaxBytes int64
	// Written, if set, receives after a successful export every file,
	// directory and symlink of the state as the host now has it: its
	// store path ("/ws/main.py") and the record an import would have made
	// of it (kind, host mode, host stat, a file's manifest, the cas.Sum of
	// a symlink's target) - what the import records hold, so that the
	// next capture knows the host holds the pulled state, not edits, and
	// the next pull knows what the host had. A path a pull --merge left
	// with content of the host's (MergeHost) gets the state's entry
	// without a stat, racy: what the host holds there is a change.
	Written func(path string, c journal.StatCache)
}

// ExportStats summarizes an export.
type ExportStats struct {
	Files        int   `json:"files"`
	Dirs         int   `json:"dirs"`
	Symlinks     int   `json:"symlinks"`
	Written      int   `json:"written"`
	Deleted      int   `json:"deleted"`
	Updated      int   `json:"updated"` // metadata only
	Unchanged    int   `json:"unchanged"`
	Skipped      int   `json:"skipped"`
	BytesWritten int64 `json:"bytes_written"`
}

type actionKind int

const (
	actRemove actionKind = iota
	actMkdir
	actPlace // move staged content into place
	actSymlink
	actFifo
	actLink
	actMeta
)

type action struct {
	kind    actionKind
	rel     string
	e       *cas.Entry
	staged  string // actPlace: name in the staging dir
	linkTo  string // actLink: first name of the group
	content bool   // actMeta on a file: content already equal
	replace bool   // actRemove that makes way for a new entry
	// hostMode is, for an actMeta of an entry the host has, its
	// permission bits when planned (hostHas set): Touches compares them
	// with the state's without another lstat.
	hostMode uint32
	hostHas  bool
	data     []byte     // actPlace: this content (a merge's), not e.Target's
	expect   *hostStamp // a pull --merge's: the host file's stat when it was merged
}

// hostMeta is an actMeta of entry e at rel whose host counterpart had
// stat st (nil: none, the plan creates it).
func hostMeta(rel string, e *cas.Entry, st *syscall.Stat_t) action {
	a := action{kind: actMeta, rel: rel, e: e, content: true}
	if st != nil {
		a.hostMode, a.hostHas = st.Mode&0o7777, true
	}
	return a
}

type exporter struct {
	ctx    context.Context
	objs   *cas.Store
	opts   ExportOptions
	name   string
	root   *os.Root
	plan   []action
	writes []int // indices into plan of actPlace actions (plan grows, so no pointers)
	groups map[uint64]string
	stats  ExportStats
	out    io.Writer
	warn   io.Writer
	warned bool
	total  int64
	keep   map[string]bool // workspace-relative paths never touched
	files  []pulledFile    // every regular file of the state, for Written
	// owner of new files and directories without SameOwner: the
	// destination's, when this process may give files away; else -1.
	uid, gid int
	// relinked maps a hard-link group's first name to the name later
	// links go to once the first inode has as many links as the file
	// system allows (EMLINK): a copy that starts a new inode.
	relinked map[string]string
	// hostOwned names the paths a pull --merge left with content of the
	// host's (pullmerge.go): true for a path with all below it, false
	// for a directory's own mode only.
	hostOwned map[string]bool
}

// pulledFile is an entry of the state as the host will have it (a file,
// directory or symlink), for ExportOptions.Written.
type pulledFile struct {
	rel     string
	kind    cas.EntryKind
	content cas.ID // a file's manifest, cas.Sum of a symlink's target
	mode    uint32 // the state's permission bits (as written without SameOwner)
}

// Export makes opts.Dir equal to /<name>/ of opts.State, writing only what
// differs. Nothing is changed on the host unless every tree of the state is
// valid and every new file's content was read back and verified.
func Export(ctx context.Context, objs *cas.Store, opts ExportOptions) (ExportStats, error) {
	p, err := PlanExport(ctx, objs, opts)
	if err != nil {
		return ExportStats{}, err
	}
	defer p.Close()
	return p.Apply()
}

// ExportPlan is an export decided but not carried out (restic's prune:
// plan, then execute): every tree of the state read and validated, the
// host compared with it, the actions that make the host equal to it listed.
// Nothing of the host has been changed yet (beyond creating opts.Dir when
// missing and removing staging directories a killed pull left). Apply
// carries it out; Close releases it either way.
type ExportPlan struct {
	ex      *exporter
	entries *bytes.Buffer // entry lines, written to opts.Entries by Apply
}

// PlanExport plans Export of opts.State into opts.Dir.
func PlanExport(ctx context.Context, objs *cas.Store, opts ExportOptions) (*ExportPlan, error) {
	name, err := Name(opts.Dir)
	if err != nil {
		return nil, err
	}
	ex := &exporter{ctx: ctx, objs: objs, opts: opts, name: name, groups: map[uint64]string{},
		out: io.Discard, warn: orDiscard(opts.Warn), keep: keepSet(opts.Dir, opts.Keep)}
	p := &ExportPlan{ex: ex}
	if opts.Entries != nil {
		// The lines are printed only once the plan is carried out: a
		// refused pull prints none.
		p.entries = &bytes.Buffer{}
		ex.out = p.entries
	}
	top, err := objs.GetTree(ctx, opts.State.Root)
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", opts.State.Root.Short(), err)
	}
	ws, ok := top.Lookup([]byte(name))
	if !ok || ws.Kind != cas.EntryDir {
		return nil, fmt.Errorf("state %s has no workspace %s (push it first, or pull into a directory named like the workspace)", opts.State.Root.Short(), termtext.Quote("/"+name+"/"))
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if ex.root, err = os.OpenRoot(opts.Dir); err != nil {
		return nil, err
	}
	ok = false
	defer func() {
		if !ok {
			ex.root.Close()
		}
	}()
	ex.uid, ex.gid = -1, -1
	if fi, err := ex.root.Stat("."); err == nil && os.Geteuid() == 0 {
		st := fi.Sys().(*syscall.Stat_t)
		ex.uid, ex.gid = int(st.Uid), int(st.Gid)
	}
	// 0. Measure: a bomb of shared subtrees or a chain of nested
	// directories is refused before it costs more than its size.
	if err := ex.measure(ws.Target); err != nil {
		return nil, err
	}
	ex.removeStaleStaging()
	fmt.Fprintf(ex.out, "Workspace name: %s\nExporting from: %s\n", termtext.Quote(name), termtext.Quote("/"+name+"/"))
	// 1. Plan: reads and validates every tree before anything is written.
	if err := ex.walk("", ws.Target, true); err != nil {
		return nil, err
	}
	// The destination directory itself is the user's: without SameOwner
	// it keeps its mode (a state's 0777 would open it to everyone).
	top0 := ex.sanitize(*ws)
	if fi, err := ex.root.Lstat("."); err == nil && !opts.SameOwner {
		top0.Mode = fi.Sys().(*syscall.Stat_t).Mode & 0o7777
	}
	ex.plan = append(ex.plan, action{kind: actMeta, rel: ".", e: &top0})
	ok = true
	return p, nil
}

// Close releases the plan; the host is left as it is.
func (p *ExportPlan) Close() error { return p.ex.root.Close() }

// Apply carries the plan out: stages every new file's content, verified,
// then moves entries into place. Call it once.
func (p *ExportPlan) Apply() (ExportStats, error) {
	ex, opts, name := p.ex, p.ex.opts, p.ex.name
	if p.entries != nil {
		if _, err := p.entries.WriteTo(opts.Entries); err != nil {
			return ExportStats{}, err
		}
		ex.out = opts.Entries
	}
	// 2. Stage new contents, verified, in a private directory.
	top, err := ex.root.Lstat(".")
	if err != nil {
		return ex.stats, err
	}
	staging, err := ex.stage()
	if err != nil {
		return ex.stats, err
	}
	defer ex.root.RemoveAll(staging)
	if err := ex.checkStamps(); err != nil {
		ex.root.RemoveAll(staging)
		ex.setMTime(".", top.ModTime().UnixNano())
		return ex.stats, err
	}
	// 3. Apply.
	for i := range ex.plan {
		if err := ex.apply(&ex.plan[i], staging); err != nil {
			return ex.stats, err
		}
	}
	if opts.Written != nil {
		for _, f := range ex.files {
			if ex.hostOwns(f.rel) {
				// The host keeps its own or a merged content here: the
				// record says the state's, with no stat (racy), so that
				// nothing proves the host unchanged. The next capture
				// reads it, finds the host changed and the branch not,
				// and takes the host's; the next pull merges against
				// the state's.
				opts.Written("/"+name+"/"+f.rel, journal.StatCache{Kind: f.kind, Mode: f.mode, Manifest: f.content, Racy: f.kind != cas.EntryDir})
				continue
			}
			fi, err := ex.root.Lstat(f.rel)
			if err != nil {
				continue // a kept file (the store's own) or a race: no entry
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || kindOf(st.Mode) != f.kind {
				continue
			}
			sc := journal.StatCache{Kind: f.kind, Mode: st.Mode & 0o7777, Ino: st.Ino, Manifest: f.content}
			switch f.kind {
			case cas.EntryDir:
				// A directory's stat changes with its children: not kept.
			case cas.EntrySymlink:
				sc.Mode = 0o777
				fallthrough
			default:
				sc.Size, sc.MTime, sc.CTime = st.Size, st.Mtim.Sec*1e9+st.Mtim.Nsec, st.Ctim.Sec*1e9+st.Ctim.Nsec
			}
			opts.Written("/"+name+"/"+f.rel, sc)
		}
	}
	return ex.stats, nil
}

func isPolicy(rel string) bool {
	return rel == ArtDir || strings.HasPrefix(rel, ArtDir+"/")
}

// policyWarning skips the state's .art. A directory is what a capture
// of a workspace stores (the host's own .art): skipped quietly. Anything
// else there was not made by art.
func (ex *exporter) policyWarning(e *cas.Entry) {
	ex.stats.Skipped++
	if e.Kind != cas.EntryDir && !ex.warned {
		fmt.Fprintf(ex.warn, "warning: not writing %s from the store (a %s): %s/ only ever comes from the host\n", ArtDir, e.Kind, ArtDir)
		ex.warned = true
	}
}

// sanitize is the entry as it may be written: without SameOwner, no
// setuid or setgid bit.
func (ex *exporter) sanitize(e cas.Entry) cas.Entry {
	if !ex.opts.SameOwner {
		e.Mode &^= unix.S_ISUID | unix.S_ISGID
	}
	return e
}

// removeStaleStaging removes staging directories a pull killed before it
// could clean up left at the top of the destination (SIGKILL, power
// loss); their contents were never visible. Only what art made is
// removed: a directory named as stage names them (the prefix and 12 hex
// digits) that holds stage's marker, or is empty (killed between the
// mkdir and the marker). A user's own directory of a similar name is
// left alone, and a pull never writes such a name from a state.
func (ex *exporter) removeStaleStaging() {
	names, err := hostNames(ex.root, ".")
	if err != nil {
		return
	}
	for _, n := range names {
		if !isStagingName(n) {
			continue
		}
		fi, err := ex.root.Lstat(n)
		if err != nil || !fi.IsDir() {
			continue
		}
		if m, err := ex.root.Lstat(path.Join(n, stagingMarker)); err == nil && m.Mode().IsRegular() {
			ex.root.RemoveAll(n)
		} else {
			ex.root.Remove(n) // only if empty
		}
	}
}

// stagingMarker is the file stage creates first in its directory: the
// proof, for a later pull, that the directory is art's to remove.
const stagingMarker = ".art-staging"

// isStagingName reports whether n is a name stage may have chosen.
func isStagingName(n string) bool {
	h, ok := strings.CutPrefix(n, stagingPrefix)
	if !ok || len(h) != 12 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

func hostNames(r *os.Root, rel string) ([]string, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// walk plans directory rel (tree id) whose host counterpart exists as a
// directory when hostDir is set: what the host has that the tree does not
// goes (planExtras), then each entry of the tree is planned (planEntry).
func (ex *exporter) walk(rel string, id cas.ID, hostDir bool) error {
	if err := ex.ctx.Err(); err != nil {
		return err
	}
	t, err := ex.objs.GetTree(ex.ctx, id)
	if err != nil {
		return fmt.Errorf("read %s: %w", termtext.Quote(ex.name+"/"+rel), err)
	}
	if hostDir {
		if err := ex.planExtras(rel, t); err != nil {
			return err
		}
	}
	for i := range t.Entries {
		t.Entries[i] = ex.sanitize(t.Entries[i]) // t is this walk's own decoded copy
		if err := ex.planEntry(rel, &t.Entries[i], hostDir); err != nil {
			return err
		}
	}
	return nil
}

// planExtras plans the removal of what host directory rel has that tree t
// does not (but the policy file, the store being read and a pull's staging
// directories).
func (ex *exporter) planExtras(rel string, t *cas.Tree) error {
	names, err := hostNames(ex.root, relOrDot(rel))
	if err != nil {
		return err
	}
	for _, n := range names {
		child := path.Join(rel, n)
		if _, ok := t.Lookup([]byte(n)); ok || isPolicy(child) || ex.keep[child] || (rel == "" && strings.HasPrefix(n, stagingPrefix)) {
			continue
		}
		ex.plan = append(ex.plan, action{kind: actRemove, rel: child})
	}
	return nil
}

// planEntry plans tree entry e of directory rel (whose host counterpart
// exists when hostDir is set), and walks into it if it is a directory.
func (ex *exporter) planEntry(rel string, e *cas.Entry, hostDir bool) error {
	if err := cas.ValidName(e.Name); err != nil { // defence in depth: the decoder checks too
		return fmt.Errorf("read %s: %w", termtext.Quote(ex.name+"/"+rel), err)
	}
	child := path.Join(rel, string(e.Name))
	if isPolicy(child) {
		ex.policyWarning(e)
		return nil
	}
	if rel == "" && strings.HasPrefix(string(e.Name), stagingPrefix) {
		// The name is art's own (a pull's staging directory): a state
		// holding one was not made by art, and writing it would let
		// the store name what a later pull removes.
		ex.stats.Skipped++
		fmt.Fprintf(ex.warn, "warning: not writing %s from the store: %s* names are art's staging directories\n", termtext.Quote(child), stagingPrefix)
		return nil
	}
	if ex.keep[child] {
		fmt.Fprintf(ex.warn, "warning: not replacing %s: it is the store being read\n", termtext.Quote(child))
		ex.stats.Skipped++
		return nil
	}
	st, err := ex.hostStat(child, e, hostDir)
	if err != nil {
		return err
	}
	label := termtext.Quote(ex.name + "/" + child)
	switch e.Kind {
	case cas.EntryDir:
		ex.stats.Dirs++
		fmt.Fprintf(ex.out, "DIR  %s\n", label)
		if st == nil {
			ex.plan = append(ex.plan, action{kind: actMkdir, rel: child, e: e})
		}
		if err := ex.walk(child, e.Target, st != nil); err != nil {
			return err
		}
		ex.files = append(ex.files, pulledFile{rel: child, kind: cas.EntryDir, mode: e.Mode})
		ex.plan = append(ex.plan, hostMeta(child, e, st))
	case cas.EntryFile:
		ex.stats.Files++
		fmt.Fprintf(ex.out, "FILE %s (%d bytes)\n", label, e.Size)
		if err := ex.planFile(child, e, st); err != nil {
			return err
		}
		ex.files = append(ex.files, pulledFile{child, cas.EntryFile, e.Target, e.Mode})
	case cas.EntrySymlink:
		ex.stats.Symlinks++
		fmt.Fprintf(ex.out, "LINK %s -> %s\n", label, termtext.QuotePath(e.Link))
		if st != nil {
			target, err := ex.root.Readlink(child)
			if err != nil {
				return err
			}
			if target != string(e.Link) {
				ex.plan = append(ex.plan, action{kind: actRemove, rel: child, replace: true})
				st = nil
			}
		}
		if st == nil {
			ex.plan = append(ex.plan, action{kind: actSymlink, rel: child, e: e})
		}
		ex.files = append(ex.files, pulledFile{child, cas.EntrySymlink, cas.Sum(e.Link), 0o777})
		ex.plan = append(ex.plan, hostMeta(child, e, st))
	case cas.EntryFifo:
		if st == nil {
			ex.plan = append(ex.plan, action{kind: actFifo, rel: child, e: e})
		}
		ex.plan = append(ex.plan, hostMeta(child, e, st))
	}
	return nil
}

// hostStat returns the lstat of host path child, which entry e will be
// written to, if the host has something there that the plan keeps (nil:
// nothing, or something planned for removal: another kind, or a symlink
// or fifo with other names).
func (ex *exporter) hostStat(child string, e *cas.Entry, hostDir bool) (*syscall.Stat_t, error) {
	if !hostDir {
		return nil, nil
	}
	fi, err := ex.root.Lstat(child)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	hostKind := kindOf(st.Mode)
	if st.Mode&unix.S_IFMT == unix.S_IFIFO {
		hostKind = cas.EntryFifo
	}
	if hostKind != e.Kind {
		ex.plan = append(ex.plan, action{kind: actRemove, rel: child, replace: true})
		return nil, nil
	}
	// A symlink or fifo can be a hard link too, maybe to one outside
	// the destination: its metadata is never changed in place; it is
	// replaced by a new inode (cheap: no content). Files: planFile.
	if st.Nlink > 1 && (e.Kind == cas.EntrySymlink || e.Kind == cas.EntryFifo) {
		ex.plan = append(ex.plan, action{kind: actRemove, rel: child, replace: true})
		return nil, nil
	}
	return st, nil
}

// measure refuses a workspace tree that expands past the export's
// bounds, before anything is planned: cas.Sizer reads each distinct tree
// once and stops as soon as the nesting passes MaxDepth.
func (ex *exporter) measure(id cas.ID) error {
	maxE, maxB := ex.opts.MaxEntries, ex.opts.MaxBytes
	if maxE <= 0 {
		maxE = DefaultMaxEntries
	}
	if maxB <= 0 {
		maxB = DefaultMaxBytes
	}
	z := cas.NewSizer(ex.objs)
	z.MaxDepth = MaxDepth
	x, err := z.Tree(ex.ctx, id)
	if errors.Is(err, cas.ErrTooDeep) {
		return fmt.Errorf("%w: %s nests directories more than %d deep", ErrTooLarge, termtext.Quote(ex.name), MaxDepth)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", termtext.Quote(ex.name), err)
	}
	if x.Entries > maxE || x.Bytes > maxB {
		return fmt.Errorf("%w: %s expands to %d entries and %d bytes (limits %d and %d; raise them with --max-entries / --max-bytes)",
			ErrTooLarge, termtext.Quote(ex.name), x.Entries, x.Bytes, maxE, maxB)
	}
	return nil
}

func relOrDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

func (ex *exporter) planFile(rel string, e *cas.Entry, st *syscall.Stat_t) error {
	if e.LinkGroup != 0 {
		if first, ok := ex.groups[e.LinkGroup]; ok {
			ex.plan = append(ex.plan, action{kind: actLink, rel: rel, e: e, linkTo: first})
			return nil
		}
		ex.groups[e.LinkGroup] = rel
	}
	if st != nil && st.Size == e.Size {
		same := st.Mtim.Nano() == e.MTime && !ex.opts.Checksum
		if !same {
			eq, err := ex.sameContent(rel, e)
			if err != nil {
				return err
			}
			same = eq
		}
		// A file with more than one name may share its inode with a
		// file outside the destination (a hard link the user made):
		// changing its metadata in place would change that file too. It
		// is replaced by a new inode instead, unless nothing differs.
		if same && st.Nlink > 1 && !ex.metaSame(rel, st, e) {
			same = false
		}
		if same {
			ex.plan = append(ex.plan, hostMeta(rel, e, st))
			return nil
		}
	}
	if st != nil {
		ex.plan = append(ex.plan, action{kind: actRemove, rel: rel, replace: true})
	}
	ex.plan = append(ex.plan, action{kind: actPlace, rel: rel, e: e})
	ex.writes = append(ex.writes, len(ex.plan)-1)
	ex.total += e.Size
	return nil
}

// metaSame reports whether host file rel (stat st) already has e's
// metadata, xattrs included.
func (ex *exporter) metaSame(rel string, st *syscall.Stat_t, e *cas.Entry) bool {
	if st.Mode&0o7777 != e.Mode || st.Mtim.Nano() != e.MTime {
		return false
	}
	if ex.opts.SameOwner && (st.Uid != e.UID || st.Gid != e.GID) {
		return false
	}
	f, err := ex.root.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	have, err := readFdXattrs(int(f.Fd()))
	return err == nil && sameXattrs(have, e.Xattrs)
}

// sameContent compares a host file with a stored one byte by byte.
func (ex *exporter) sameContent(rel string, e *cas.Entry) (bool, error) {
	f, err := ex.root.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false, nil // unreadable: rewrite it
	}
	defer f.Close()
	cw := &compareWriter{r: f}
	if _, err := ex.objs.ReadFile(ex.ctx, e.Target, cw); err != nil && !errors.Is(err, errDiffers) {
		return false, fmt.Errorf("read %s from store: %w", termtext.Quote(ex.name+"/"+rel), err)
	}
	if cw.differs {
		return false, nil
	}
	var one [1]byte
	n, _ := f.Read(one[:])
	return n == 0, nil
}

var errDiffers = errors.New("content differs")

type compareWriter struct {
	r       io.Reader
	buf     []byte
	differs bool
}

func (c *compareWriter) Write(p []byte) (int, error) {
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	b := c.buf[:len(p)]
	if _, err := io.ReadFull(c.r, b); err != nil || !bytes.Equal(b, p) {
		c.differs = true
		return 0, errDiffers
	}
	return len(p), nil
}

// stage writes every new file's content into a fresh staging directory,
// verified chunk by chunk, with its metadata applied. On error it removes
// the staging directory, leaving the host as it was.
func (ex *exporter) stage() (string, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	staging := stagingPrefix + hex.EncodeToString(rnd[:])
	if len(ex.writes) == 0 {
		return staging, nil
	}
	// Creating the staging directory bumps the workspace directory's
	// mtime; a failed pull puts it back so the host is exactly as before.
	top, err := ex.root.Lstat(".")
	if err != nil {
		return "", err
	}
	if err := ex.root.Mkdir(staging, 0o700); err != nil {
		return "", fmt.Errorf("create staging directory: %w", err)
	}
	abort := func() {
		ex.root.RemoveAll(staging)
		ex.setMTime(".", top.ModTime().UnixNano())
	}
	m, err := ex.root.OpenFile(path.Join(staging, stagingMarker), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		abort()
		return "", fmt.Errorf("create staging directory: %w", err)
	}
	m.Close()
	dir, err := ex.root.Open(staging)
	if err != nil {
		abort()
		return "", err
	}
	defer dir.Close()
	var done int64
	for i, idx := range ex.writes {
		a := &ex.plan[idx]
		a.staged = fmt.Sprint(i)
		if err := ex.stageOne(path.Join(staging, a.staged), a); err != nil {
			abort()
			return "", fmt.Errorf("write %s: %w (nothing was changed in %s)", termtext.Quote(ex.name+"/"+a.rel), err, termtext.Quote(ex.opts.Dir))
		}
		done += a.e.Size
		ex.stats.BytesWritten += a.e.Size
		if ex.opts.Progress != nil {
			ex.opts.Progress(done, ex.total)
		}
	}
	// One syncfs instead of an fsync per file: the contents are durable
	// before any of them becomes visible.
	if err := unix.Syncfs(int(dir.Fd())); err != nil {
		abort()
		return "", fmt.Errorf("sync staged files: %w", err)
	}
	return staging, nil
}

func (ex *exporter) stageOne(rel string, a *action) error {
	f, err := ex.root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if a.data != nil {
		if _, err := f.Write(a.data); err != nil {
			return err
		}
	} else if err := ex.objs.WriteSparse(ex.ctx, a.e.Target, f); err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != a.e.Size {
		return fmt.Errorf("staged size %v, want %d: %w", fi.Size(), a.e.Size, cas.ErrCorrupt)
	}
	return ex.fileMeta(f, a.e, true)
}

// fileMeta applies xattrs, owner and mode to an open file or directory;
// fresh says art just created it (its owner is then the destination's,
// without SameOwner; an existing file keeps its owner).
func (ex *exporter) fileMeta(f *os.File, e *cas.Entry, fresh bool) error {
	fd := int(f.Fd())
	if err := syncXattrs(fd, e.Xattrs); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	uid, gid := -1, -1
	switch {
	case ex.opts.SameOwner:
		uid, gid = int(e.UID), int(e.GID)
	case fresh:
		uid, gid = ex.uid, ex.gid
	}
	if uid >= 0 && (st.Uid != uint32(uid) || st.Gid != uint32(gid)) {
		if err := unix.Fchown(fd, uid, gid); err != nil && !errors.Is(err, unix.EPERM) {
			return err
		}
	}
	// Always after the chown, which clears setuid and setgid bits.
	if st.Mode&0o7777 != e.Mode || uid >= 0 {
		return unix.Fchmod(fd, e.Mode)
	}
	return nil
}

func syncXattrs(fd int, want []cas.Xattr) error {
	buf := make([]byte, 4096)
	n, err := unix.Flistxattr(fd, buf)
	if errors.Is(err, unix.ENOTSUP) {
		if len(want) > 0 {
			return fmt.Errorf("set xattrs: %w", err)
		}
		return nil
	}
	if err != nil && !errors.Is(err, unix.ERANGE) {
		return err
	}
	have := map[string]bool{}
	if err == nil {
		for _, name := range bytes.Split(buf[:n], []byte{0}) {
			if bytes.HasPrefix(name, []byte("user.")) {
				have[string(name)] = true
			}
		}
	}
	for _, x := range want {
		delete(have, x.Name)
		if err := unix.Fsetxattr(fd, x.Name, x.Value, 0); err != nil {
			return fmt.Errorf("set xattr %s: %w", termtext.Quote(x.Name), err)
		}
	}
	for name := range have {
		if err := unix.Fremovexattr(fd, name); err != nil && !errors.Is(err, unix.ENODATA) {
			return err
		}
	}
	return nil
}

// parent opens the directory holding rel and returns it with rel's base
// name, for *at system calls on a single, already contained component.
func (ex *exporter) parent(rel string) (*os.File, string, error) {
	f, err := ex.root.Open(relOrDot(path.Dir(rel)))
	if err != nil {
		return nil, "", err
	}
	return f, path.Base(rel), nil
}

func (ex *exporter) apply(a *action, staging string) error {
	label := termtext.Quote(ex.name + "/" + a.rel)
	switch a.kind {
	case actRemove:
		if !a.replace {
			fmt.Fprintf(ex.out, "DELETE %s\n", label)
			ex.stats.Deleted++
		}
		return ex.root.RemoveAll(a.rel)
	case actMkdir:
		if err := ex.root.Mkdir(a.rel, 0o700); err != nil { // real mode after the children
			return err
		}
		return ex.giveAway(a.rel)
	case actPlace:
		ex.stats.Written++
		if a.staged == "" {
			return fmt.Errorf("internal error: %s was not staged", termtext.Quote(a.rel))
		}
		if err := ex.root.Rename(path.Join(staging, a.staged), a.rel); err != nil {
			return err
		}
		return ex.setMTime(a.rel, a.e.MTime)
	case actSymlink:
		if err := ex.root.Symlink(string(a.e.Link), a.rel); err != nil {
			return err
		}
		ex.stats.Written++
		return ex.giveAway(a.rel)
	case actFifo:
		dir, base, err := ex.parent(a.rel)
		if err != nil {
			return err
		}
		defer dir.Close()
		ex.stats.Written++
		if err := unix.Mkfifoat(int(dir.Fd()), base, a.e.Mode); err != nil {
			return err
		}
		return ex.giveAway(a.rel)
	case actLink:
		if fa, err := ex.root.Lstat(a.rel); err == nil {
			if fb, err := ex.root.Lstat(a.linkTo); err == nil && os.SameFile(fa, fb) {
				ex.stats.Unchanged++
				return nil
			}
			if err := ex.root.RemoveAll(a.rel); err != nil {
				return err
			}
		}
		ex.stats.Written++
		to := a.linkTo
		if r, ok := ex.relinked[to]; ok {
			to = r
		}
		err := ex.root.Link(to, a.rel)
		if errors.Is(err, unix.EMLINK) {
			// The inode has as many names as the file system allows
			// (ext4: 65,000): a copy starts a new inode for the rest of
			// the group. Planned, staged and verified like the first.
			if err = ex.copyFile(a.rel, a.e); err == nil {
				if ex.relinked == nil {
					ex.relinked = map[string]string{}
				}
				ex.relinked[a.linkTo] = a.rel
			}
		}
		return err
	case actMeta:
		return ex.meta(a)
	}
	return fmt.Errorf("unknown action %d", a.kind)
}

// meta brings an existing entry's metadata in line; counted as unchanged or
// updated.
func (ex *exporter) meta(a *action) error {
	fi, err := ex.root.Lstat(a.rel)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	e := a.e
	same := st.Mtim.Nano() == e.MTime
	if ex.opts.SameOwner && (st.Uid != e.UID || st.Gid != e.GID) {
		same = false
	}
	if e.Kind != cas.EntrySymlink && st.Mode&0o7777 != e.Mode {
		same = false
	}
	if !same && e.Kind != cas.EntryDir && st.Nlink > 1 {
		// Planned as unchanged, now with another name that may be
		// outside the destination: never change a shared inode.
		return fmt.Errorf("%s: changed while pulling (it gained a hard link); run the pull again", termtext.Quote(ex.name+"/"+a.rel))
	}
	if e.Kind == cas.EntryFile || e.Kind == cas.EntryDir {
		f, err := ex.root.OpenFile(a.rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		if have, err := readFdXattrs(int(f.Fd())); err != nil || !sameXattrs(have, e.Xattrs) {
			same = false
		}
		if !same {
			if err := ex.fileMeta(f, e, false); err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", termtext.Quote(ex.name+"/"+a.rel), err)
			}
		}
		f.Close()
	} else if !same && ex.opts.SameOwner && (st.Uid != e.UID || st.Gid != e.GID) {
		dir, base, err := ex.parent(a.rel)
		if err != nil {
			return err
		}
		err = unix.Fchownat(int(dir.Fd()), base, int(e.UID), int(e.GID), unix.AT_SYMLINK_NOFOLLOW)
		dir.Close()
		if err != nil && !errors.Is(err, unix.EPERM) {
			return err
		}
	}
	if e.Kind == cas.EntryFile && !same {
		ex.stats.Updated++
	} else if e.Kind == cas.EntryFile {
		ex.stats.Unchanged++
	}
	if same {
		return nil
	}
	if e.Kind == cas.EntryFifo && st.Mode&0o7777 != e.Mode {
		if err := ex.root.Chmod(a.rel, fs.FileMode(e.Mode)); err != nil {
			return err
		}
	}
	return ex.setMTime(a.rel, e.MTime)
}

// giveAway makes rel, which art just created, the destination owner's
// (see ExportOptions.SameOwner); without privilege it is already the
// invoking user's.
func (ex *exporter) giveAway(rel string) error {
	if ex.opts.SameOwner || ex.uid < 0 {
		return nil // SameOwner: the owner comes with the metadata
	}
	if err := ex.root.Lchown(rel, ex.uid, ex.gid); err != nil && !errors.Is(err, unix.EPERM) {
		return err
	}
	return nil
}

// copyFile writes a new inode at rel with e's content, read from the
// store and verified, and its metadata, durably, through a temporary name
// beside it.
func (ex *exporter) copyFile(rel string, e *cas.Entry) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rel), stagingPrefix+hex.EncodeToString(rnd[:]))
	dst, err := ex.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = func() error {
		if err := ex.objs.WriteSparse(ex.ctx, e.Target, dst); err != nil {
			return err
		}
		if err := ex.fileMeta(dst, e, true); err != nil {
			return err
		}
		return dst.Sync()
	}()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ex.root.Rename(tmp, rel)
	}
	if err != nil {
		ex.root.Remove(tmp)
		return err
	}
	return ex.setMTime(rel, e.MTime)
}

func readFdXattrs(fd int) ([]cas.Xattr, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Flistxattr(fd, buf)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, err
	}
	var xs []cas.Xattr
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		if !bytes.HasPrefix(name, []byte("user.")) {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Fgetxattr(fd, string(name), v)
		if err != nil {
			return nil, err
		}
		xs = append(xs, cas.Xattr{Name: string(name), Value: v[:m]})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	return xs, nil
}

func (ex *exporter) setMTime(rel string, mtime int64) error {
	dir, base, err := ex.parent(rel)
	if err != nil {
		return err
	}
	defer dir.Close()
	if rel == "." {
		base = "."
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime)}
	return unix.UtimesNanoAt(int(dir.Fd()), base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// StoreFiles lists the files of the SQLite store at path (the database,
// its WAL, shared-memory index and rollback journal), its pack directory
// (cas.PacksDir) and its redo logs' (journal.RedoDir), absolute. A store
// kept inside the workspace must never be captured or overwritten.
func StoreFiles(path string) []string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	return []string{abs, abs + "-wal", abs + "-shm", abs + "-journal", cas.PacksDir(abs), journal.RedoDir(abs)}
}

// keepSet maps the absolute paths in keep that lie inside dir to their
// workspace-relative paths.
func keepSet(dir string, keep []string) map[string]bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, k := range keep {
		if rel, err := filepath.Rel(abs, k); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			m[filepath.ToSlash(rel)] = true
		}
	}
	return m
}
