package overlay

// PassthroughAll makes every open that may be served by passthrough be,
// whatever the file's size, until the returned function restores the
// threshold; tests use it to run their suites over the passthrough path.
func PassthroughAll() (restore func()) {
	old := ptMinCopy
	ptMinCopy = 0
	return func() { ptMinCopy = old }
}

// Fail makes f fail as if its store had failed with err (failed.go).
func Fail(f *FS, err error) { f.fail(err) }
