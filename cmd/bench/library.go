package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
)

// The synthetic trees of sections 3 and 4 are built through the library, in
// batches, with the same shape at every size: ws/gGGG/dDDD/fFFF.txt, 100
// files per leaf directory and 32 leaf directories per group. Every path is
// four levels deep, so a one-file change re-encodes four trees whatever N.
const (
	filesPerDir  = 100
	dirsPerGroup = 32
	createBatch  = 5000 // files per transaction while building
	// snapshotReps is how many one-file snapshots are timed per size: they
	// take milliseconds, so many repetitions buy a steadier median.
	snapshotReps = 21
)

// libMTime is the mtime of every synthetic entry: fixed, so equal content
// gives equal trees across runs.
var libMTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func libPath(i int) string {
	leaf := i / filesPerDir
	return fmt.Sprintf("ws/g%03d/d%03d/f%03d.txt", leaf/dirsPerGroup, leaf%dirsPerGroup, i%filesPerDir)
}

func libContent(i int) []byte { return fmt.Appendf(nil, "synthetic file %d\n", i) }

func editedContent(p, tag string) []byte {
	return fmt.Appendf(nil, "synthetic file %s, edited %s\n", p, tag)
}

// buildLib creates a store at file with n synthetic files (distinct
// contents) on branch main.
func (b *bench) buildLib(ctx context.Context, file string, n int) (*journal.DB, error) {
	db, err := journal.Open(ctx, file, journal.Options{Create: true})
	if err != nil {
		return nil, err
	}
	dirs := map[string]int64{".": journal.RootIno}
	var mkdir func(tx *journal.Tx, dir string) (int64, error)
	mkdir = func(tx *journal.Tx, dir string) (int64, error) {
		if ino, ok := dirs[dir]; ok {
			return ino, nil
		}
		parent, err := mkdir(tx, path.Dir(dir))
		if err != nil {
			return 0, err
		}
		nd, err := tx.Create(parent, []byte(path.Base(dir)), journal.Attr{Kind: cas.EntryDir, Mode: 0o755, MTime: libMTime})
		if err != nil {
			return 0, err
		}
		dirs[dir] = nd.Ino
		return nd.Ino, nil
	}
	for start := 0; start < n; start += createBatch {
		end := min(n, start+createBatch)
		_, err := db.Do(ctx, journal.DefaultBranch, "bench", fmt.Sprintf("create files %d-%d", start, end-1), func(tx *journal.Tx) error {
			for i := start; i < end; i++ {
				p := libPath(i)
				parent, err := mkdir(tx, path.Dir(p))
				if err != nil {
					return err
				}
				data := libContent(i)
				id, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(data))
				if err != nil {
					return err
				}
				a := journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: id, Size: int64(len(data)), MTime: libMTime}
				if _, err := tx.Create(parent, []byte(path.Base(p)), a); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("build %d files: %w", n, err)
		}
	}
	return db, nil
}

// editLib rewrites the files at paths in one operation on the default
// branch, as a run that changed them would.
func (b *bench) editLib(ctx context.Context, db *journal.DB, paths []string, tag string) error {
	return editBranch(ctx, db, journal.DefaultBranch, paths, tag)
}

// snapshotLatency: section 3.
func (b *bench) snapshotLatency() error {
	sizes := []int{1000, 10000, 100000}
	if b.cfg.quick {
		sizes = []int{1000, 10000}
	}
	var stores []*snapStore
	defer func() {
		for _, s := range stores {
			s.db.Close()
			removeStore(s.file)
		}
	}()
	for _, n := range sizes {
		s, err := b.newSnapStore(n)
		if err != nil {
			return err
		}
		stores = append(stores, s)
	}
	// Interleave the sizes, so that a burst of load from the machine's
	// other tenants hits all of them alike.
	for rep := range snapshotReps {
		for _, s := range stores {
			if err := b.snapshotOnce(s, rep); err != nil {
				return err
			}
		}
	}
	b.rep.note("Snapshot: the synthetic trees are ws/gGGG/dDDD/fFFF.txt, %d files per leaf directory and %d leaf directories per group, built through the library (tx.Create, %d files per transaction). Each timed snapshot follows a one-file tx.Write in its own operation (the edit transaction, timed too); the sizes take turns, %d rounds. What a snapshot re-encodes grows with the fan-out of the directories on the changed path, not with N.",
		filesPerDir, dirsPerGroup, createBatch, snapshotReps)
	first := stores[0]
	for i, s := range stores {
		lat, edit := median(s.lat), median(s.edits)
		b.progress("snapshot at %d files: %s, edit %s", s.n, fmtDur(lat), fmtDur(edit))
		r := row{fmt.Sprintf("3. Snapshot after changing 1 file, %s files (re-encodes 4 trees, %d entries)", fmtInt(s.n), pathEntries(s.n)),
			fmt.Sprintf("%s (the edit transaction before it: %s)", fmtDur(lat), fmtDur(edit)), "-", "", ""}
		if i == len(stores)-1 {
			growth := float64(lat) / float64(median(first.lat))
			r.ratio = fmt.Sprintf("%s/%s: %s (edit: %s)", fmtCount(s.n), fmtCount(first.n), fmtRatio(growth),
				fmtRatio(float64(edit)/float64(median(first.edits))))
			r.goal = fmt.Sprintf("flat in N (ratio <= 2 for %dx the files): ", s.n/first.n)
			if growth <= 2 {
				r.goal += "**met**"
			} else {
				r.goal += "**missed**"
			}
		}
		b.rep.add(r)
		b.rep.note("Snapshot, %s files: building the store through the library took %s (%s files/s); the first snapshot, which encodes every directory, %s.",
			fmtInt(s.n), fmtDur(s.build), fmtInt(int(float64(s.n)/s.build.Seconds())), fmtDur(s.first))
	}
	return nil
}

// pathEntries is how many tree entries a snapshot re-encodes after a
// change to the first file of an n-file synthetic tree: the entries of the
// root, ws, the file's group and its leaf directory.
func pathEntries(n int) int {
	leaves := (n + filesPerDir - 1) / filesPerDir
	groups := (leaves + dirsPerGroup - 1) / dirsPerGroup
	return 1 + groups + min(leaves, dirsPerGroup) + min(n, filesPerDir)
}

// snapStore is one size of section 3.
type snapStore struct {
	n          int
	file       string
	db         *journal.DB
	build      time.Duration // building the store
	first      time.Duration // its first, full snapshot
	lat, edits []time.Duration
}

// newSnapStore builds a store of n files and takes its first snapshot.
func (b *bench) newSnapStore(n int) (*snapStore, error) {
	s := &snapStore{n: n, file: filepath.Join(b.tmp, fmt.Sprintf("snapshot-%d.db", n))}
	var err error
	s.build, err = b.timed("build", n, func(ctx context.Context) (err error) {
		s.db, err = b.buildLib(ctx, s.file, n)
		return err
	})
	if err != nil {
		removeStore(s.file)
		return nil, err
	}
	s.first, err = b.timed("snapshot-full", n, func(ctx context.Context) error {
		_, err := s.db.TakeSnapshot(ctx, journal.DefaultBranch, "base")
		return err
	})
	if err != nil {
		s.db.Close()
		removeStore(s.file)
		return nil, err
	}
	b.progress("built %d files in %s, first snapshot %s", n, fmtDur(s.build), fmtDur(s.first))
	return s, nil
}

// snapshotOnce changes one file of s and times the snapshot after it.
func (b *bench) snapshotOnce(s *snapStore, rep int) error {
	p := libPath(pickFiles(s.n, 1, b.cfg.seed, uint64(rep))[0])
	tag := fmt.Sprint("rep", rep)
	d, err := b.timed("edit", s.n, func(ctx context.Context) error {
		return b.editLib(ctx, s.db, []string{p}, tag)
	})
	if err != nil {
		return err
	}
	s.edits = append(s.edits, d)
	d, err = b.timed("snapshot", s.n, func(ctx context.Context) error {
		_, err := s.db.TakeSnapshot(ctx, journal.DefaultBranch, tag)
		return err
	})
	s.lat = append(s.lat, d)
	return err
}

// diffCheckout: section 4.
func (b *bench) diffCheckout() error {
	n := 10000
	if b.cfg.quick {
		n = quickFiles
	}
	changes := []int{1, 10, 100, 1000}
	file := filepath.Join(b.tmp, "diff.db")
	defer removeStore(file)
	db, err := b.buildLib(b.ctx, file, n)
	if err != nil {
		return err
	}
	defer db.Close()
	s0, err := db.TakeSnapshot(b.ctx, journal.DefaultBranch, "base")
	if err != nil {
		return err
	}
	base, err := db.Resolve(b.ctx, s0.ID.String(), journal.DefaultBranch)
	if err != nil {
		return err
	}
	var g *gitPeer
	if b.git {
		if g, err = b.newGitPeer(n); err != nil {
			return err
		}
	}
	for _, k := range changes {
		var paths []string
		for _, i := range pickFiles(n, k, b.cfg.seed, uint64(1000+k)) {
			paths = append(paths, libPath(i))
		}
		tag := fmt.Sprint("k", k)
		var diffs, checkouts []time.Duration
		found := 0
		for range b.libReps() {
			// From the base with a collapsed projection, make the same
			// edits (so the same state) and snapshot them.
			if _, err := db.Checkout(b.ctx, journal.DefaultBranch, base); err != nil {
				return err
			}
			if err := b.editLib(b.ctx, db, paths, tag); err != nil {
				return err
			}
			sk, err := db.TakeSnapshot(b.ctx, journal.DefaultBranch, tag)
			if err != nil {
				return err
			}
			found = 0
			d, err := b.timed("diff", k, func(ctx context.Context) error {
				return journal.Diff(ctx, db.Objects(), base.Root, sk.Root, func(c journal.Change) error {
					if (c.New != nil && c.New.Kind == cas.EntryFile) || (c.Old != nil && c.Old.Kind == cas.EntryFile) {
						found++
					}
					return nil
				})
			})
			if err != nil {
				return err
			}
			diffs = append(diffs, d)
			// Back to the base, with the edited directories loaded as
			// they are right after a run.
			d, err = b.timed("checkout", k, func(ctx context.Context) error {
				_, err := db.Checkout(ctx, journal.DefaultBranch, base)
				return err
			})
			if err != nil {
				return err
			}
			checkouts = append(checkouts, d)
		}
		if found != k {
			b.rep.note("Diff with %d changed files reported %d changed files.", k, found)
		}
		dt, ct := median(diffs), median(checkouts)
		b.progress("%d of %d changed: diff %s, checkout %s", k, n, fmtDur(dt), fmtDur(ct))
		r := row{fmt.Sprintf("4. Diff / checkout: %s of %s files changed", fmtInt(k), fmtInt(n)),
			fmt.Sprintf("`journal.Diff` %s · `DB.Checkout` %s", fmtDur(dt), fmtDur(ct)), "-", "", ""}
		if g != nil {
			gd, gc, err := g.measure(paths, tag, b.libReps())
			if err != nil {
				return err
			}
			r.peer = fmt.Sprintf("`git diff --name-only` %s · `git reset --no-refresh` %s", fmtDur(gd), fmtDur(gc))
			r.ratio = fmt.Sprintf("%s · %s", fmtRatio(float64(dt)/float64(gd)), fmtRatio(float64(ct)/float64(gc)))
		}
		b.rep.add(r)
	}
	b.rep.note("Diff / checkout: art's times are in-process library calls on a %s-file store; a checkout moves the branch and resets its projection (the host directory is untouched, as with `git reset --mixed`), timed right after the edit and snapshot so the edited directories are loaded.", fmtInt(n))
	if g != nil {
		b.rep.note("Diff / checkout: git's times include starting a process (`git --version`: %s, median); git reset rewrites the whole index.", fmtDur(g.startup))
	}
	return nil
}

// gitPeer is a git repository of the same synthetic tree, for section 4.
type gitPeer struct {
	b            *bench
	gitDir, work string
	base         string // commit of the unedited tree
	startup      time.Duration
}

func (b *bench) newGitPeer(n int) (*gitPeer, error) {
	g := &gitPeer{b: b, gitDir: filepath.Join(b.tmp, "git-diff"), work: filepath.Join(b.tmp, "diff-tree")}
	for i := range n {
		p := filepath.Join(g.work, filepath.FromSlash(libPath(i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, libContent(i), 0o644); err != nil {
			return nil, err
		}
	}
	if err := b.gitInit(g.gitDir, g.work); err != nil {
		return nil, err
	}
	if _, err := b.gitCommitAll(g.gitDir, g.work, "base"); err != nil {
		return nil, err
	}
	var err error
	if g.base, err = g.head(); err != nil {
		return nil, err
	}
	g.startup, err = repeat(b.libReps(), func(int) (time.Duration, error) {
		_, d, err := b.command("", nil, "git", "--version")
		return d, err
	})
	return g, err
}

func (g *gitPeer) head() (string, error) {
	out, _, err := g.b.gitCmd(g.gitDir, g.work, "rev-parse", "HEAD")
	return strings.TrimSpace(string(out)), err
}

// measure commits the same edits as art made and times diffing that commit
// against the base, and resetting (index and HEAD, not the work tree) from
// it to the base.
func (g *gitPeer) measure(paths []string, tag string, reps int) (diff, reset time.Duration, err error) {
	for _, p := range paths {
		if err := os.WriteFile(filepath.Join(g.work, filepath.FromSlash(p)), editedContent(p, tag), 0o644); err != nil {
			return 0, 0, err
		}
	}
	if _, err := g.b.gitCommitAll(g.gitDir, g.work, tag); err != nil {
		return 0, 0, err
	}
	edited, err := g.head()
	if err != nil {
		return 0, 0, err
	}
	if _, _, err := g.b.gitCmd(g.gitDir, g.work, "reset", "-q", "--hard", g.base); err != nil {
		return 0, 0, err
	}
	diff, err = repeat(reps, func(int) (time.Duration, error) {
		out, d, err := g.b.gitCmd(g.gitDir, g.work, "diff", "--name-only", g.base, edited)
		if err == nil && bytes.Count(out, []byte("\n")) != len(paths) {
			err = fmt.Errorf("git diff listed %d files, want %d", bytes.Count(out, []byte("\n")), len(paths))
		}
		return d, err
	})
	if err != nil {
		return 0, 0, err
	}
	reset, err = repeat(reps, func(int) (time.Duration, error) {
		if _, _, err := g.b.gitCmd(g.gitDir, g.work, "reset", "-q", "--no-refresh", edited); err != nil {
			return 0, err
		}
		_, d, err := g.b.gitCmd(g.gitDir, g.work, "reset", "-q", "--no-refresh", g.base)
		return d, err
	})
	return diff, reset, err
}
