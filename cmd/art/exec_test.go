package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artrt/art/execapi"
)

// artStdin runs the CLI in-process with stdin.
func artStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"art"}, args...), strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

func execResponses(t *testing.T, out string) []execapi.Response {
	t.Helper()
	var resps []execapi.Response
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20) // a response carries up to max_output_bytes per stream
	for sc.Scan() {
		var r execapi.Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		resps = append(resps, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read responses: %v", err)
	}
	return resps
}

func TestExecUsage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ws.db")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"exec", "-d", db}, exitUsage, "exactly one of --json and --jsonl"},
		{[]string{"exec", "-d", db, "--json", "--jsonl"}, exitUsage, "exactly one of --json and --jsonl"},
		{[]string{"exec", "-d", db, "--json", "ls"}, exitUsage, "exec takes no arguments"},
		{[]string{"exec", "--json"}, exitUsage, "exec needs a store: -d FILE"},
		{[]string{"exec", "-d", db, "--json", "--request", filepath.Join(t.TempDir(), "none.json")}, exitNotFound, "none.json"},
	} {
		out, errs, code := artStdin(t, `{"command":["true"]}`, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) || out != "" {
			t.Errorf("art %s: exit %d stdout %q stderr %q, want exit %d mentioning %q", strings.Join(c.args, " "), code, out, errs, c.code, c.msg)
		}
	}
}

// TestExecCLIStream drives art exec --jsonl through the engine with plain
// processes: answers in order, a bad line answered in place, and the -d
// store protected from bind mounts by the policy art builds.
func TestExecCLIStream(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ws.db")
	net := ""
	if os.Geteuid() != 0 {
		net = `,"isolation":{"network":true}`
	}
	in := strings.Join([]string{
		`{"command":["echo","first"]` + net + `}`,
		`{"command":["sh","-c","exit 7"]` + net + `}`,
		`{"command":["true"],"isolation":{"bind_mounts":[{"source":"` + dir + `","destination":"/mnt"}]}}`,
		`{"command":["true"],"isolation":{"bind_mounts":[{"source":"/srv","destination":"` + dir + `/.art/x"}]}}`,
		`not json`,
		`{"command":["pwd"]` + net + `}`,
	}, "\n")
	out, errs, code := artStdin(t, in, "exec", "-d", db, "-m", dir, "--jsonl", "--unsandboxed-for-tests")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	resps := execResponses(t, out)
	if len(resps) != 6 {
		t.Fatalf("%d responses to 6 requests:\n%s", len(resps), out)
	}
	check := func(i int, status execapi.Status, exit int, code execapi.Code, stdout string) {
		t.Helper()
		r := resps[i]
		var got execapi.Code
		if r.Error != nil {
			got = r.Error.Code
		}
		if r.Status != status || r.ExitCode != exit || got != code || r.Stdout != stdout {
			t.Errorf("response %d: %s %d %s %q, want %s %d %s %q", i, r.Status, r.ExitCode, got, r.Stdout, status, exit, code, stdout)
		}
	}
	check(0, execapi.StatusSuccess, 0, "", "first\n")
	check(1, execapi.StatusError, 7, "", "")
	check(2, execapi.StatusError, -1, execapi.CodeForbiddenSource, "")
	check(3, execapi.StatusError, -1, execapi.CodeForbiddenDest, "")
	check(4, execapi.StatusError, -1, execapi.CodeMalformed, "")
	check(5, execapi.StatusSuccess, 0, "", dir+"\n") // -m is the default working directory

	// --json with --request FILE: exactly one response.
	req := filepath.Join(dir, "req.json")
	if err := os.WriteFile(req, []byte(`{"command":["echo","from file"]`+net+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code = artStdin(t, "", "exec", "-d", db, "--json", "--request", req, "--unsandboxed-for-tests")
	if resps := execResponses(t, out); code != 0 || len(resps) != 1 || resps[0].Stdout != "from file\n" {
		t.Fatalf("exit %d stderr %q responses %q", code, errs, out)
	}
}
