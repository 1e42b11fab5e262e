package execapi

import (
	"context"
	"os/exec"
	"testing"
)

// BenchmarkRunnerTrue is the engine's cost per request around a process:
// compare with BenchmarkBareExecTrue (go test -bench . ./execapi).
func BenchmarkRunnerTrue(b *testing.B) {
	r := NewProcessExecutor(b.TempDir(), nil)
	req := &Request{Command: []string{"/bin/true"}, Isolation: Isolation{Network: true}}
	for b.Loop() {
		if resp := r.Exec(context.Background(), req); resp.Status != StatusSuccess {
			b.Fatal(resp.Error)
		}
	}
}

func BenchmarkBareExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeOne is decode + validate + run + encode of one request.
func BenchmarkServeOne(b *testing.B) {
	srv := &Server{Executor: NewProcessExecutor(b.TempDir(), nil), Policy: Policy{Protected: StorePaths("/s/ws.db")}}
	req := []byte(`{"command":["/bin/true"],"isolation":{"network":true}}`)
	for b.Loop() {
		if resp := srv.Handle(context.Background(), req); resp.Status != StatusSuccess {
			b.Fatal(resp.Error)
		}
	}
}
