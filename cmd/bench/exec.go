package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artrt/art/journal"
	_ "github.com/mattn/go-sqlite3" // to read the objects table of a store
)

// command runs name args in dir and returns its stdout and wall time. A
// failure includes stderr.
func (b *bench) command(dir string, env []string, name string, args ...string) ([]byte, time.Duration, error) {
	out, d, _, err := b.commandCPU(dir, env, name, args...)
	return out, d, err
}

// commandCPU is command that also returns the CPU time (user + system) the
// process used.
func (b *bench) commandCPU(dir string, env []string, name string, args ...string) ([]byte, time.Duration, time.Duration, error) {
	cmd := exec.CommandContext(b.ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return nil, d, 0, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(stderr.Bytes()))
	}
	return stdout.Bytes(), d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// selfCPU is the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sh runs a shell command line.
func (b *bench) sh(dir, line string) (time.Duration, error) {
	_, d, err := b.command(dir, nil, "sh", "-c", line)
	return d, err
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// gitEnv isolates git from the user's configuration and keeps it from
// packing objects behind the benchmark's back (gc.auto would make .git
// shrink in the middle of a measurement).
var gitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com",
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
}

// gitCmd runs git on repository gitDir with work tree work.
func (b *bench) gitCmd(gitDir, work string, args ...string) ([]byte, time.Duration, error) {
	return b.command(work, gitEnv, "git", append([]string{"--git-dir=" + gitDir, "--work-tree=" + work}, args...)...)
}

// gitCommitAll times `git add -A && git commit` (two processes, one
// measurement).
func (b *bench) gitCommitAll(gitDir, work, msg string) (time.Duration, error) {
	_, d1, err := b.gitCmd(gitDir, work, "add", "-A")
	if err != nil {
		return 0, err
	}
	_, d2, err := b.gitCmd(gitDir, work, "commit", "-q", "-m", msg)
	return d1 + d2, err
}

// gitInit makes an empty repository at gitDir for work tree work.
func (b *bench) gitInit(gitDir, work string) error {
	_, _, err := b.gitCmd(gitDir, work, "init", "-q")
	return err
}

// duBytes is the apparent size of everything below path (du -sb).
func duBytes(path string) (int64, error) {
	var n int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// storeBytes is the size of a store: the SQLite file, its WAL and its
// pack directory.
func storeBytes(path string) int64 { return journal.DiskBytes(path) }

func removeStore(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
	os.RemoveAll(path + ".packs")
}

// objectBytes is the stored (compressed) size of the objects in a store by
// kind: 1 chunks, 2 manifests, 3 trees. It reads the objects table
// read-only (docs/store-format.md) while no art process has the store open.
func objectBytes(path string) (map[int]int64, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query(`SELECT kind, sum(length(data) + pack_len) FROM objects GROUP BY kind`)
	if err != nil {
		return nil, fmt.Errorf("read objects of %s: %w", path, err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var kind int
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			return nil, err
		}
		out[kind] = n
	}
	return out, rows.Err()
}

// timed runs f and returns its wall time. f runs under the pprof labels
// bench=what and n=size, so one phase of a -cpuprofile can be picked out:
// go tool pprof -tagfocus bench=snapshot FILE.
func (b *bench) timed(what string, n int, f func(ctx context.Context) error) (time.Duration, error) {
	var err error
	start := time.Now()
	pprof.Do(b.ctx, pprof.Labels("bench", what, "n", strconv.Itoa(n)), func(ctx context.Context) { err = f(ctx) })
	return time.Since(start), err
}

// median of ds (the upper one for an even count). ds is not changed.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// repeat runs f n times and returns the median of what it measured.
func repeat(n int, f func(i int) (time.Duration, error)) (time.Duration, error) {
	var ds []time.Duration
	for i := range n {
		d, err := f(i)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	return median(ds), nil
}
