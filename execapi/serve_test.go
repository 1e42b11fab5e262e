package execapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func newTestServer(t *testing.T) *Server {
	return &Server{Executor: NewProcessExecutor(t.TempDir(), nil), Policy: Policy{Protected: StorePaths("/s/ws.db")}}
}

// netField keeps requests runnable by the process executor as non-root.
func netField() string {
	if os.Geteuid() != 0 {
		return `,"isolation":{"network":true}`
	}
	return ""
}

func decodeResponses(t *testing.T, out string) []Response {
	t.Helper()
	var resps []Response
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var r Response
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("response line %q: %v", sc.Text(), err)
		}
		resps = append(resps, r)
	}
	return resps
}

func TestServeOne(t *testing.T) {
	var out bytes.Buffer
	in := `{"command":["echo","one"]` + netField() + `}`
	if err := newTestServer(t).Serve(context.Background(), strings.NewReader(in), &out, One); err != nil {
		t.Fatal(err)
	}
	resps := decodeResponses(t, out.String())
	if len(resps) != 1 || resps[0].Stdout != "one\n" || resps[0].APIVersion != 1 || !strings.HasPrefix(resps[0].ExecutionID, "ex-") {
		t.Fatalf("responses %+v", resps)
	}
	ts := resps[0].Timestamps
	for _, s := range []string{ts.Received, ts.Started, ts.Finished} {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			t.Errorf("timestamp %q: %v", s, err)
		}
	}

	// One mode: a second document is trailing data, and nothing runs.
	out.Reset()
	in = `{"command":["touch","/tmp/art-should-not-exist"]}` + "\n" + `{"command":["true"]}`
	if err := newTestServer(t).Serve(context.Background(), strings.NewReader(in), &out, One); err != nil {
		t.Fatal(err)
	}
	resps = decodeResponses(t, out.String())
	if len(resps) != 1 || resps[0].Error == nil || resps[0].Error.Code != CodeTrailingData || resps[0].ExitCode != ExitNotRun {
		t.Fatalf("responses %+v", resps)
	}
	if _, err := os.Stat("/tmp/art-should-not-exist"); err == nil {
		t.Error("a rejected request ran")
	}
}

// TestServeJSONLStream: 100 requests answered in order, bad lines answered
// with errors in their place, blank lines skipped.
func TestServeJSONLStream(t *testing.T) {
	var in strings.Builder
	var want []string // expected stdout, or "E...." for an error code
	for i := 0; i < 100; i++ {
		switch {
		case i == 17:
			in.WriteString("{not json\n")
			want = append(want, string(CodeMalformed))
		case i == 42:
			in.WriteString(`{"command":["true"],"bogus":1}` + "\n")
			want = append(want, string(CodeUnknownField))
		case i == 63:
			in.WriteString(`{"command":["true"],"isolation":{"bind_mounts":[{"source":"/s/ws.db","destination":"/x"}]}}` + "\n")
			want = append(want, string(CodeForbiddenSource))
		default:
			fmt.Fprintf(&in, `{"command":["echo","%d"]%s}`+"\n", i, netField())
			want = append(want, fmt.Sprintf("%d\n", i))
		}
		if i%10 == 0 {
			in.WriteString("\n  \n")
		}
	}
	var out bytes.Buffer
	start := time.Now()
	if err := newTestServer(t).Serve(context.Background(), strings.NewReader(strings.TrimSuffix(in.String(), "\n")), &out, JSONL); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	resps := decodeResponses(t, out.String())
	if len(resps) != 100 {
		t.Fatalf("%d responses to 100 requests", len(resps))
	}
	ids := map[string]bool{}
	for i, r := range resps {
		got := r.Stdout
		if r.Error != nil {
			got = string(r.Error.Code)
		}
		if got != want[i] {
			t.Errorf("response %d: %q, want %q", i, got, want[i])
		}
		if ids[r.ExecutionID] {
			t.Errorf("response %d: duplicate execution_id %s", i, r.ExecutionID)
		}
		ids[r.ExecutionID] = true
	}
	t.Logf("100 requests (97 processes) in %v: %v each", took, took/100)
}

func TestServeJSONLLongLine(t *testing.T) {
	in := `{"command":["echo","` + strings.Repeat("a", MaxRequestBytes) + `"]}` + "\n" + `{"command":["echo","after"]` + netField() + `}` + "\n"
	var out bytes.Buffer
	if err := newTestServer(t).Serve(context.Background(), strings.NewReader(in), &out, JSONL); err != nil {
		t.Fatal(err)
	}
	resps := decodeResponses(t, out.String())
	if len(resps) != 2 || resps[0].Error == nil || resps[0].Error.Code != CodeTooLarge ||
		resps[0].Error.Message != "line 1 is longer than 16777216 bytes" || resps[1].Stdout != "after\n" {
		t.Fatalf("responses %+v", resps)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("broken pipe") }

func TestServeReportsWriteErrors(t *testing.T) {
	err := newTestServer(t).Serve(context.Background(), strings.NewReader(`{}`+"\n"+`{}`), failingWriter{}, JSONL)
	if err == nil || err.Error() != "write response: broken pipe" {
		t.Fatalf("err %v", err)
	}
}

func TestServeOneTooLarge(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(`{"command":["echo","` + strings.Repeat("a", MaxRequestBytes) + `"]}`)
	if err := newTestServer(t).Serve(context.Background(), in, &out, One); err != nil {
		t.Fatal(err)
	}
	resps := decodeResponses(t, out.String())
	if len(resps) != 1 || resps[0].Error == nil || resps[0].Error.Code != CodeTooLarge ||
		resps[0].Error.Message != "request is longer than 16777216 bytes" {
		t.Fatalf("responses %+v", resps)
	}
}
