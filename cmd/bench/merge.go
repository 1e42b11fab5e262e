package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/artrt/art/journal"
)

// mergeSection: two branches of one n-file tree that changed disjoint
// halves (every file of the first half on one, of the second on the
// other) merged by `art merge` (the whole process, as a user runs it),
// next to git merging the same trees: `git merge-tree --write-tree` (the
// merge alone, no work tree) and `git merge` of a checked-out branch
// (which also writes the changed files to the work tree).
func (b *bench) mergeSection() error {
	n := 10000
	if b.cfg.quick {
		n = quickFiles
	}
	file := filepath.Join(b.tmp, "merge.db")
	defer removeStore(file)
	db, err := b.buildLib(b.ctx, file, n)
	if err != nil {
		return err
	}
	s0, err := db.TakeSnapshot(b.ctx, journal.DefaultBranch, "base")
	if err != nil {
		db.Close()
		return err
	}
	base := journal.State{BranchID: s0.BranchID, Branch: s0.Branch, Seq: s0.Seq, Root: s0.Root, Snapshot: s0.ID}
	var first, second []string
	for i := range n {
		if i < n/2 {
			first = append(first, libPath(i))
		} else {
			second = append(second, libPath(i))
		}
	}
	for _, side := range []struct {
		branch string
		paths  []string
	}{{"half-a", first}, {"half-b", second}} {
		if _, err := db.CreateBranch(b.ctx, side.branch, base); err != nil {
			db.Close()
			return err
		}
		if err := editBranch(b.ctx, db, side.branch, side.paths, side.branch); err != nil {
			db.Close()
			return err
		}
	}
	if err := db.Close(); err != nil {
		return err
	}
	var arts []time.Duration
	for i := range b.libReps() {
		// Each repetition merges into a fresh branch at half-a's head
		// (untimed), so every merge is the first of its branch.
		into := fmt.Sprintf("merge-%d", i)
		if _, _, err := b.command("", nil, b.art, "branch", "-d", file, into, "--from", "half-a"); err != nil {
			return fmt.Errorf("art branch: %w", err)
		}
		out, d, err := b.command("", nil, b.art, "merge", "-d", file, "half-b", "--into", into, "--json")
		if err != nil {
			return fmt.Errorf("art merge: %w", err)
		}
		var res struct {
			Merged    []json.RawMessage `json:"merged"`
			Conflicts []json.RawMessage `json:"conflicts"`
			Applied   bool              `json:"applied"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			return fmt.Errorf("art merge --json: %w", err)
		}
		if !res.Applied || len(res.Merged) != len(second) || len(res.Conflicts) != 0 {
			return fmt.Errorf("art merge: %d paths merged, %d conflicts, applied %v; want %d, 0, true", len(res.Merged), len(res.Conflicts), res.Applied, len(second))
		}
		arts = append(arts, d)
	}
	at := median(arts)
	b.progress("merge of %d files, disjoint halves: art merge %s", n, fmtDur(at))
	r := row{fmt.Sprintf("4b. Merge: two branches of %s files that changed disjoint halves", fmtInt(n)),
		fmt.Sprintf("`art merge` %s", fmtDur(at)), "-", "", ""}
	if b.git {
		mt, gm, err := b.gitMergePeer(n, first, second)
		if err != nil {
			return err
		}
		r.peer = fmt.Sprintf("`git merge-tree --write-tree` %s · `git merge` %s", fmtDur(mt), fmtDur(gm))
		r.ratio = fmt.Sprintf("%s · %s", fmtRatio(float64(at)/float64(mt)), fmtRatio(float64(at)/float64(gm)))
	}
	b.rep.add(r)
	b.rep.note("Merge: art's time is the whole `art merge` process (open the store, merge base, two diffs, plan, one transaction of %s path events and a snapshot; the host directory is untouched). `git merge-tree --write-tree` merges the same commits without a work tree; `git merge` also rewrites the %s changed files in its work tree.", fmtInt(len(second)), fmtInt(len(second)))
	return nil
}

// editBranch rewrites the files at paths on branch in one operation.
func editBranch(ctx context.Context, db *journal.DB, branch string, paths []string, tag string) error {
	_, err := db.Do(ctx, branch, "bench", "edit "+tag, func(tx *journal.Tx) error {
		for _, p := range paths {
			data := editedContent(p, tag)
			id, _, err := tx.Objects().PutFile(ctx, bytes.NewReader(data))
			if err != nil {
				return err
			}
			n, err := tx.Resolve([]byte(p))
			if err != nil {
				return err
			}
			size := int64(len(data))
			if _, err := tx.Write(n.Ino, id, size, libMTime+1, []journal.Range{{Off: 0, Len: size}}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// gitMergePeer builds a repository of the same tree with branches half-a
// and half-b edited like art's, and times merging half-b into half-a.
func (b *bench) gitMergePeer(n int, first, second []string) (mergeTree, merge time.Duration, err error) {
	gitDir, work := filepath.Join(b.tmp, "git-merge"), filepath.Join(b.tmp, "merge-tree")
	defer os.RemoveAll(gitDir)
	defer os.RemoveAll(work)
	for i := range n {
		p := filepath.Join(work, filepath.FromSlash(libPath(i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, 0, err
		}
		if err := os.WriteFile(p, libContent(i), 0o644); err != nil {
			return 0, 0, err
		}
	}
	if err := b.gitInit(gitDir, work); err != nil {
		return 0, 0, err
	}
	if _, err := b.gitCommitAll(gitDir, work, "base"); err != nil {
		return 0, 0, err
	}
	for _, side := range []struct {
		branch string
		paths  []string
	}{{"half-a", first}, {"half-b", second}} {
		if _, _, err := b.gitCmd(gitDir, work, "checkout", "-q", "-B", side.branch, "HEAD"); err != nil {
			return 0, 0, err
		}
		if side.branch == "half-b" {
			if _, _, err := b.gitCmd(gitDir, work, "reset", "-q", "--hard", "HEAD~1"); err != nil {
				return 0, 0, err
			}
		}
		for _, p := range side.paths {
			if err := os.WriteFile(filepath.Join(work, filepath.FromSlash(p)), editedContent(p, side.branch), 0o644); err != nil {
				return 0, 0, err
			}
		}
		if _, err := b.gitCommitAll(gitDir, work, "edit "+side.branch); err != nil {
			return 0, 0, err
		}
	}
	mergeTree, err = repeat(b.libReps(), func(int) (time.Duration, error) {
		_, d, err := b.gitCmd(gitDir, work, "merge-tree", "--write-tree", "half-a", "half-b")
		return d, err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("git merge-tree: %w", err)
	}
	if _, _, err := b.gitCmd(gitDir, work, "checkout", "-q", "half-a"); err != nil {
		return 0, 0, err
	}
	merge, err = repeat(b.libReps(), func(int) (time.Duration, error) {
		_, d, err := b.gitCmd(gitDir, work, "merge", "-q", "--no-edit", "half-b")
		if err != nil {
			return d, err
		}
		// Back to half-a (the merge commit's first parent), untimed.
		_, _, err = b.gitCmd(gitDir, work, "reset", "-q", "--hard", "HEAD~1")
		return d, err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("git merge: %w", err)
	}
	return mergeTree, merge, nil
}
