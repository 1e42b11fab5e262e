package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the art binary the tests built (artBinary), which
// would otherwise be left in the temp dir by every run of the package.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtArt != "" {
		os.RemoveAll(filepath.Dir(builtArt))
	}
	os.Exit(code)
}
