package execapi

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current responses")

// TestGoldenResponses pins whole responses: each request is answered by a
// Server with the process executor and a fixed clock, checked against the
// response schema, normalised (ids, times, usage counters) and compared
// with testdata/golden/NAME.json. Run with -update to accept changes.
func TestGoldenResponses(t *testing.T) {
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	clock := func() time.Time { return fixed }
	runner := &Runner{Prepare: ProcessCommand("/", nil), Now: clock, KillGrace: 100 * time.Millisecond}
	srv := &Server{Executor: runner, Policy: Policy{Protected: StorePaths("/var/lib/art/ws.db")}, Now: clock}
	schema := loadSchema(t, "exec-response.v1.json")
	net := ""
	if os.Geteuid() != 0 {
		net = `,"isolation":{"network":true}`
	}
	for _, c := range []struct{ name, req string }{
		{"success", `{"command":["echo","hello, <world> & co"]` + net + `}`},
		{"nonzero", `{"command":["sh","-c","echo oops >&2; exit 3"]` + net + `}`},
		{"stdin", `{"command":["cat"],"stdin":"from stdin\n"` + net + `}`},
		{"timeout", `{"command":["sleep","10"],"timeout_ms":100` + net + `}`},
		{"truncated", `{"command":["printf","0123456789abcdef"],"resources":{"max_output_bytes":8}` + net + `}`},
		{"killed", `{"command":["sh","-c","kill -9 $$"]` + net + `}`},
		{"not_found", `{"command":["no-such-command-art"]` + net + `}`},
		{"malformed", `{"command":["true"]`},
		{"unknown_field", `{"command":["true"],"timeout":5}`},
		{"env_key", `{"command":["true"],"environment":{"MY-VAR":"x"}}`},
		{"limit_range", `{"command":["true"],"resources":{"memory_bytes":-1}}`},
		{"forbidden_dest", `{"command":["true"],"isolation":{"bind_mounts":[{"source":"/srv","destination":"/proc/1"}]}}`},
		{"forbidden_source", `{"command":["true"],"isolation":{"bind_mounts":[{"source":"/var/lib","destination":"/mnt"}]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv.NewID = func() string { return "ex-0000000000000001" }
			b, err := Encode(srv.Handle(context.Background(), []byte(c.req)))
			if err != nil {
				t.Fatal(err)
			}
			if probs := validateJSON(t, schema, b); len(probs) > 0 {
				t.Fatalf("response violates the schema: %v\n%s", probs, b)
			}
			var resp Response
			if err := json.Unmarshal(b, &resp); err != nil {
				t.Fatal(err)
			}
			resp.Metrics = Metrics{} // usage varies from run to run
			line, err := Encode(&resp)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, line, "", "  "); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("response differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}
