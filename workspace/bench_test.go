package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/artrt/art/workspace"
)

// BenchmarkCaptureNoop measures a capture that finds nothing changed, of
// a copy of Go's src/ (about 11,000 files): the cost every art run pays
// before its command starts. The copy is left to age past the racy window
// first, so that every stat is trusted as in a workspace at rest.
func BenchmarkCaptureNoop(b *testing.B) { benchNoop(b, true) }

// BenchmarkPushNoop is BenchmarkCaptureNoop for art push (-m): the branch
// is made equal to the host, owner, mtime and xattrs included.
func BenchmarkPushNoop(b *testing.B) { benchNoop(b, false) }

func benchNoop(b *testing.B, capture bool) {
	src := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(src); err != nil {
		b.Skip("no GOROOT/src")
	}
	ws := filepath.Join(b.TempDir(), "src")
	if out, err := exec.Command("cp", "-a", src, ws).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v: %s", err, out)
	}
	time.Sleep(2500 * time.Millisecond)
	ctx := context.Background()
	db, _ := openDB(b)
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: capture}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var st workspace.ImportStats
		var err error
		// Labelled, so that a -cpuprofile can leave out the first import.
		pprof.Do(ctx, pprof.Labels("bench", "noop"), func(ctx context.Context) {
			st, err = workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: capture})
		})
		if err != nil {
			b.Fatal(err)
		}
		if st.BytesRead != 0 || st.Changed+st.New+st.Deleted != 0 {
			b.Fatalf("no-op capture did something: %+v", st)
		}
	}
}
