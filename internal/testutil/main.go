package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// Main runs a package's tests (call it from TestMain) in a temporary
// directory of their own: TMPDIR points into it for the test process and
// for every process it starts (art binaries, MinIO, git, the sandbox's
// host side), so a file a test or a program under test forgets to remove
// is found here instead of piling up in /tmp. After the tests it stops
// MinIO, lists what is left, fails the run if anything is, and removes
// the directory. BuildDir is exempt: it holds what tests build once per
// process (the art binary).
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

var (
	buildMu  sync.Mutex
	buildDir string
)

func runMain(m *testing.M) int {
	root, err := os.MkdirTemp("", "art-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testutil: private TMPDIR:", err)
		return 1
	}
	// Traversable, as /tmp is: tests run binaries as other users.
	os.Chmod(root, 0o755)
	os.Setenv("TMPDIR", root)
	os.Setenv("ART_TMPDIR", root) // art sessions' private copies (else /var/tmp)
	code := m.Run()
	StopMinIO()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	left, _ := leftovers(root)
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left %d entries in their TMPDIR (every test must clean up what it makes, also on failure):\n", len(left))
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "  "+l)
		}
		if code == 0 {
			code = 1
		}
	}
	if err := os.RemoveAll(root); err != nil {
		fmt.Fprintln(os.Stderr, "testutil: remove TMPDIR:", err)
	}
	return code
}

// BuildDir is a directory for what tests build once per process (removed
// by Main, not counted as left behind). Without Main it is a fresh
// directory under os.TempDir() that the caller must remove.
func BuildDir() (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		return buildDir, nil
	}
	d, err := os.MkdirTemp("", "art-build-")
	if err != nil {
		return "", err
	}
	os.Chmod(d, 0o755)
	buildDir = d
	return d, nil
}

// leftovers lists the entries directly in dir but the build directory.
func leftovers(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if filepath.Join(dir, e.Name()) == buildDir {
			continue
		}
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}
