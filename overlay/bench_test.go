package overlay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkNamespace measures the metadata path in process, where
// `go test -cpuprofile` sees the daemon: what tar x does per file
// (create, write, futimens, fchown, fchmod, close) and what rm -rf does (unlink, rmdir).
// It is the quick loop for profiling; `go run ./cmd/bench -run overlay` is
// the measurement against ext4 and loopback.
//
//	go test -run '^$' -bench Namespace -cpuprofile /tmp/ns.prof ./overlay
func BenchmarkNamespace(b *testing.B) {
	_, mnt, _ := mount(b)
	content := make([]byte, 3000) // about the median source file
	for i := range content {
		content[i] = byte('a' + i%26)
	}
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	const dirs, perDir = 10, 50
	run := 0 // a fresh name for every iteration of every run (b.N grows)
	next := func(prefix string) string { run++; return filepath.Join(mnt, fmt.Sprintf("%s%d", prefix, run)) }
	b.Run("untar", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			root := next("u")
			for d := 0; d < dirs; d++ {
				dir := filepath.Join(root, fmt.Sprintf("d%d", d))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				for f := 0; f < perDir; f++ {
					extract(b, filepath.Join(dir, fmt.Sprintf("f%d.go", f)), content, mtime)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirs*perDir), "ns/file")
	})
	b.Run("create", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dir := next("c")
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := 0; f < dirs*perDir; f++ {
				fh, err := os.Create(filepath.Join(dir, fmt.Sprint(f)))
				if err != nil {
					b.Fatal(err)
				}
				if err := fh.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirs*perDir), "ns/file")
	})
	b.Run("walk", func(b *testing.B) {
		// What git status does to the work tree: list every directory and
		// lstat every entry, again and again.
		root := next("w")
		for d := 0; d < dirs; d++ {
			dir := filepath.Join(root, fmt.Sprintf("d%d", d))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := 0; f < perDir; f++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(f)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				var st unix.Stat_t
				return unix.Lstat(p, &st)
			})
			if err != nil {
				b.Fatal(err)
			}
			// A change elsewhere, as git status's index.lock is.
			if err := os.WriteFile(filepath.Join(mnt, "lock"), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(filepath.Join(mnt, "lock")); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirs*perDir), "ns/file")
	})
	b.Run("write4k", func(b *testing.B) {
		// Row 2 of the overlay bench: a new file written in 4 KiB calls.
		block := content[:0:0]
		block = append(block, make([]byte, 4096)...)
		for i := 0; i < b.N; i++ {
			f, err := os.Create(next("w4k"))
			if err != nil {
				b.Fatal(err)
			}
			for j := 0; j < 2048; j++ {
				if _, err := f.Write(block); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2048), "ns/write")
	})
	b.Run("rm", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			root := next("r")
			for d := 0; d < dirs; d++ {
				dir := filepath.Join(root, fmt.Sprintf("d%d", d))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				for f := 0; f < perDir; f++ {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(f)), content, 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StartTimer()
			if err := os.RemoveAll(root); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirs*perDir), "ns/file")
	})
}

// extract writes one file as GNU tar x does as root (strace of tar 1.34):
// open O_EXCL with mode 0600, write, futimens, fchown, fchmod, close.
func extract(b *testing.B, p string, content []byte, mtime time.Time) {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, content); err != nil {
		b.Fatal(err)
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fchown(fd, os.Getuid(), os.Getgid()); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fchmod(fd, 0o644); err != nil {
		b.Fatal(err)
	}
}
