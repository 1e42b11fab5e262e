package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/artrt/art/internal/minioserver"
	"github.com/artrt/art/remote/s3api"
)

// startS3 starts MinIO on loopback (see internal/minioserver) with a bucket and
// returns the environment and URL for art push to it.
func (b *bench) startS3() ([]string, string, error) {
	srv, err := minioserver.Start()
	if err != nil {
		return nil, "", err
	}
	c, err := s3api.New(s3api.Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		return nil, "", err
	}
	if err := c.MakeBucket(b.ctx, "bench"); err != nil {
		return nil, "", err
	}
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_REGION=" + srv.Region, "ART_S3_ENDPOINT=" + srv.Endpoint}
	return env, "s3://bench/art", nil
}

// remoteStats is the part of `art push REMOTE --json` the benchmark reads.
type remoteStats struct {
	Objects    int64 `json:"objects"`
	Bytes      int64 `json:"bytes"`
	DedupBytes int64 `json:"dedup_bytes"`
}

// peerRun is one tool's first and incremental backup of the tree.
type peerRun struct {
	name            string
	first, second   time.Duration
	firstB, secondB int64 // bytes the repository grew by
}

// remoteSection: art push to another store file next to restic backup and
// borg create into local repositories and git push to a local bare
// repository, first of the whole tree, then after editing 1% of its files
// (one round: these tools are slow, and the bytes are what is compared).
func (b *bench) remoteSection() error {
	t, err := b.ingestTree()
	if err != nil {
		return err
	}
	dir := filepath.Join(b.tmp, "remote")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	local, remote := filepath.Join(dir, "local.db"), filepath.Join(dir, "remote.db")
	if _, _, err := b.push(t.dir, local); err != nil {
		return err
	}
	artPushTo := func(env []string, remote string) (remoteStats, time.Duration, error) {
		out, d, err := b.command("", env, b.art, "push", "-d", local, remote, "main", "--json")
		var st remoteStats
		if err == nil {
			err = json.Unmarshal(out, &st)
		}
		return st, d, err
	}
	artPush := func() (remoteStats, time.Duration, error) { return artPushTo(nil, remote) }
	first, firstT, err := artPush()
	if err != nil {
		return err
	}
	b.progress("remote: first art push %s, %s", fmtBytes(first.Bytes), fmtDur(firstT))
	s3env, s3url, err := b.startS3()
	defer minioserver.Stop()
	var s3first, s3second remoteStats
	var s3firstT, s3secondT time.Duration
	if err != nil {
		b.rep.note("Remote: no S3 row (%v).", err)
		s3url = ""
	} else if s3first, s3firstT, err = artPushTo(s3env, s3url); err != nil {
		return err
	}

	peers := b.remotePeers(t, dir)
	runs := make([]peerRun, len(peers))
	for i, p := range peers {
		if err := p.init(); err != nil {
			return err
		}
		before, _ := duBytes(p.repo)
		d, err := p.backup(1)
		if err != nil {
			return err
		}
		after, _ := duBytes(p.repo)
		runs[i] = peerRun{name: p.name, first: d, firstB: after - before}
		b.progress("remote: first %s %s, %s", p.name, fmtBytes(after-before), fmtDur(d))
	}

	n := max(1, len(t.files)/100)
	for j, i := range pickFiles(len(t.files), n, b.cfg.seed, 1000) {
		if _, err := editFile(filepath.Join(t.dir, t.files[i]), j%2 == 0, fmt.Sprintf("rm%d", j)); err != nil {
			return err
		}
	}
	_, importT, err := b.push(t.dir, local)
	if err != nil {
		return err
	}
	second, secondT, err := artPush()
	if err != nil {
		return err
	}
	b.progress("remote: second art push %s, %s (+ import %s)", fmtBytes(second.Bytes), fmtDur(secondT), fmtDur(importT))
	if s3url != "" {
		if s3second, s3secondT, err = artPushTo(s3env, s3url); err != nil {
			return err
		}
		b.progress("remote: S3 pushes %s, %s", fmtBytes(s3first.Bytes), fmtBytes(s3second.Bytes))
	}
	for i, p := range peers {
		before, _ := duBytes(p.repo)
		d, err := p.backup(2)
		if err != nil {
			return err
		}
		after, _ := duBytes(p.repo)
		runs[i].second, runs[i].secondB = d, after-before
		b.progress("remote: second %s %s, %s", p.name, fmtBytes(after-before), fmtDur(d))
	}

	b.remoteRows(t, remoteResult{n: n, first: first, second: second, firstT: firstT, secondT: secondT, importT: importT,
		s3url: s3url, s3first: s3first, s3second: s3second, s3firstT: s3firstT, s3secondT: s3secondT, runs: runs})
	return nil
}

// remotePeer is a backup tool the remote section compares art push with.
type remotePeer struct {
	name   string
	repo   string
	env    []string
	init   func() error
	backup func(round int) (time.Duration, error)
}

// remotePeers returns the peers installed here (restic, borg, and git
// unless -quick), each with its repository under dir, backing up t.
func (b *bench) remotePeers(t *tree, dir string) []remotePeer {
	var peers []remotePeer
	if _, err := exec.LookPath("restic"); err == nil {
		repo := filepath.Join(dir, "restic")
		env := []string{"RESTIC_PASSWORD=bench", "RESTIC_CACHE_DIR=" + filepath.Join(dir, "restic-cache")}
		peers = append(peers, remotePeer{name: "`restic backup`", repo: repo, env: env,
			init: func() error { _, _, err := b.command("", env, "restic", "-q", "-r", repo, "init"); return err },
			backup: func(int) (time.Duration, error) {
				_, d, err := b.command(t.dir, env, "restic", "-q", "-r", repo, "backup", ".")
				return d, err
			}})
	} else {
		b.rep.note("Remote: restic not installed (apt-get install restic); no restic row.")
	}
	if _, err := exec.LookPath("borg"); err == nil {
		repo := filepath.Join(dir, "borg")
		env := []string{"BORG_PASSPHRASE=", "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes",
			"BORG_BASE_DIR=" + filepath.Join(dir, "borg-base")}
		peers = append(peers, remotePeer{name: "`borg create`", repo: repo, env: env,
			init: func() error {
				_, _, err := b.command("", env, "borg", "init", "--encryption=none", repo)
				return err
			},
			backup: func(round int) (time.Duration, error) {
				_, d, err := b.command(t.dir, env, "borg", "create", fmt.Sprintf("%s::r%d", repo, round), ".")
				return d, err
			}})
	} else {
		b.rep.note("Remote: borg not installed (apt-get install borgbackup); no borg row.")
	}
	gitWork, gitBare := filepath.Join(dir, "git"), filepath.Join(dir, "git-bare")
	if b.git {
		peers = append(peers, remotePeer{name: "`git push` (after `git add -A && git commit`, not timed)", repo: gitBare,
			init: func() error {
				if err := b.gitInit(gitWork, t.dir); err != nil {
					return err
				}
				_, _, err := b.command("", gitEnv, "git", "init", "-q", "--bare", gitBare)
				return err
			},
			backup: func(round int) (time.Duration, error) {
				if _, err := b.gitCommitAll(gitWork, t.dir, fmt.Sprintf("round %d", round)); err != nil {
					return 0, err
				}
				_, d, err := b.gitCmd(gitWork, t.dir, "push", "-q", gitBare, "HEAD:refs/heads/main")
				return d, err
			}})
	}
	return peers
}

// remoteResult is what the remote section measured: art's pushes (to a
// store file and, when MinIO runs, to S3) and the peers' backups.
type remoteResult struct {
	n                        int // files edited
	first, second            remoteStats
	firstT, secondT, importT time.Duration
	s3url                    string // "" when there is no S3 row
	s3first, s3second        remoteStats
	s3firstT, s3secondT      time.Duration
	runs                     []peerRun
}

// remoteRows adds the remote section's rows and note to the report.
func (b *bench) remoteRows(t *tree, res remoteResult) {
	first, second, firstT, secondT, importT := res.first, res.second, res.firstT, res.secondT, res.importT
	s3url, s3first, s3second, s3firstT, s3secondT := res.s3url, res.s3first, res.s3second, res.s3firstT, res.s3secondT
	n, runs := res.n, res.runs
	goal := "<= 0.5% of tree bytes (best remote): "
	best := second.Bytes
	if s3url != "" {
		best = s3second.Bytes
	}
	if float64(best) <= 0.005*float64(t.bytes) {
		goal += "**met**"
	} else {
		goal += "**missed**"
	}
	label1 := "3a. Remote: first push of the tree to a local repository"
	label2 := fmt.Sprintf("3b. Remote: push after editing 1%% of the files (%s, seeded)", fmtInt(n))
	art1 := fmt.Sprintf("`art push -d S R.db`: sent %s = %s of tree bytes; %s", fmtBytes(first.Bytes), fmtPct(first.Bytes, t.bytes), fmtDur(firstT))
	art2 := fmt.Sprintf("`art push -m` %s, then `art push -d S R.db`: sent %s = %s of tree bytes; %s", fmtDur(importT),
		fmtBytes(second.Bytes), fmtPct(second.Bytes, t.bytes), fmtDur(secondT))
	if s3url != "" {
		art1 += fmt.Sprintf("; to S3 (MinIO, loopback): %s = %s; %s", fmtBytes(s3first.Bytes), fmtPct(s3first.Bytes, t.bytes), fmtDur(s3firstT))
		art2 += fmt.Sprintf("; to S3 (MinIO, loopback; trees as deltas): %s = %s; %s", fmtBytes(s3second.Bytes), fmtPct(s3second.Bytes, t.bytes), fmtDur(s3secondT))
	}
	if len(runs) == 0 {
		b.rep.add(row{label1, art1, "-", "", "-"})
		b.rep.add(row{label2, art2, "-", "", goal})
		return
	}
	for i, r := range runs {
		l1, a1 := "", ""
		if i == 0 {
			l1, a1 = label1, art1
		}
		b.rep.add(row{l1, a1, fmt.Sprintf("%s: repository +%s = %s; %s", r.name, fmtBytes(r.firstB), fmtPct(r.firstB, t.bytes), fmtDur(r.first)),
			fmt.Sprintf("art/peer bytes %s, time %s", fmtRatio(float64(first.Bytes)/float64(r.firstB)), fmtRatio(float64(firstT)/float64(r.first))), "-"})
	}
	for i, r := range runs {
		l2, a2, g := "", "", ""
		if i == 0 {
			l2, a2, g = label2, art2, goal
		}
		b.rep.add(row{l2, a2, fmt.Sprintf("%s: repository +%s = %s; %s", r.name, fmtBytes(r.secondB), fmtPct(r.secondB, t.bytes), fmtDur(r.second)),
			fmt.Sprintf("art/peer bytes %s, time %s", fmtRatio(float64(second.Bytes)/float64(r.secondB)), fmtRatio(float64(secondT)/float64(r.second))), g})
	}
	b.rep.note("Remote: one round; art's bytes are what push sent (`--json` bytes: stored objects into the store file; on S3 packs, with trees as deltas, and their indexes), the peers' the growth of their repository (restic: encrypted, zstd; borg: no encryption, lz4 by default; git: the pushed pack). art's time is the transfer alone; its import (`art push -m`) is listed separately, while restic and borg scan the tree themselves.")
}
