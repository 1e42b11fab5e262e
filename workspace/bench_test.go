package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/artrt/art/workspace"
)

// BenchmarkCaptureNoop measures a capture that finds nothing changed, of
// a copy of Go's src/ (about 11,000 files): the cost every art run pays
// before its command starts. The copy is left to age past the racy window
// first, so that every stat is trusted as in a workspace at rest.
func BenchmarkCaptureNoop(b *testing.B) {
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
	if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Dir: ws, Capture: true}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := workspace.Import(ctx, db, workspace.ImportOptions{Dir: ws, Capture: true})
		if err != nil {
			b.Fatal(err)
		}
		if st.BytesRead != 0 || st.Changed+st.New+st.Deleted != 0 {
			b.Fatalf("no-op capture did something: %+v", st)
		}
	}
}
