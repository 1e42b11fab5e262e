package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/execapi"
	"github.com/artrt/art/journal"
)

// mkdirRun stands in for the sandbox: each request creates the directory
// named by its last argument, journaled under the request's op, as the
// overlay would journal a mkdir made inside the sandbox.
func mkdirRun(ctx context.Context, req *execapi.Request, op *journal.Op) *execapi.Response {
	name := req.Command[len(req.Command)-1]
	err := op.Update(ctx, func(tx *journal.Tx) error {
		_, err := tx.Create(journal.RootIno, []byte(name), journal.Attr{Kind: cas.EntryDir, Mode: 0o755})
		return err
	})
	if err != nil {
		return execapi.Failed(execapi.Errorf(execapi.CodeExecFailed, "%v", err))
	}
	return &execapi.Response{Status: execapi.StatusSuccess}
}

// TestExecJournal: a stream of 100 requests over one store; each is an
// exec op in art log, snapshots chain from one request to the next, and
// each response's changes name what the request did.
func TestExecJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ws.db")
	db, err := journal.Open(ctx, path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := &execapi.Server{Executor: &journaledExecutor{db: db, branch: journal.DefaultBranch, run: mkdirRun}}
	var in strings.Builder
	const n = 100
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"command":["mkdir","d%03d"]}`+"\n", i)
	}
	in.WriteString(`{"command":["mkdir","quiet"],"snapshot":false}` + "\n")
	in.WriteString(`{"command":["mkdir","elsewhere"],"branch":"other"}` + "\n")
	var out bytes.Buffer
	if err := srv.Serve(ctx, strings.NewReader(in.String()), &out, execapi.JSONL); err != nil {
		t.Fatal(err)
	}
	resps := execResponses(t, out.String())
	if len(resps) != n+2 {
		t.Fatalf("%d responses", len(resps))
	}
	for i, r := range resps[:n] {
		if r.Status != execapi.StatusSuccess || r.SnapshotBefore == "" || r.SnapshotAfter == "" || r.SnapshotBefore == r.SnapshotAfter {
			t.Fatalf("response %d: %s, snapshots %q -> %q, error %+v", i, r.Status, r.SnapshotBefore, r.SnapshotAfter, r.Error)
		}
		if i > 0 && r.SnapshotBefore != resps[i-1].SnapshotAfter {
			t.Errorf("response %d: snapshot_before %s, previous snapshot_after %s: not chained", i, r.SnapshotBefore, resps[i-1].SnapshotAfter)
		}
		want := execapi.Changes{Added: 1, Paths: []execapi.PathChange{{Path: fmt.Sprintf("d%03d", i), Change: "added"}}}
		if r.Changes == nil || fmt.Sprint(*r.Changes) != fmt.Sprint(want) {
			t.Errorf("response %d: changes %+v, want %+v", i, r.Changes, want)
		}
	}
	if q := resps[n]; q.Status != execapi.StatusSuccess || q.SnapshotBefore != "" || q.SnapshotAfter != "" || q.Changes != nil {
		t.Errorf("snapshot false: %+v", q)
	}
	if o := resps[n+1]; o.Error == nil || o.Error.Code != execapi.CodeUnsupported {
		t.Errorf("another branch: %+v", o.Error)
	}

	// The log: one exec op per request that ran, newest first, with its
	// snapshot; the first request also snapshotted the empty head.
	ops, err := db.Ops(ctx, journal.LogQuery{Branch: journal.DefaultBranch})
	if err != nil {
		t.Fatal(err)
	}
	var execs []journal.OpInfo
	for _, o := range ops {
		if o.Kind == "exec" {
			execs = append(execs, o)
		}
	}
	if len(execs) != n+1 {
		t.Fatalf("%d exec ops in art log, want %d", len(execs), n+1)
	}
	for i, o := range execs[1:] { // newest first; execs[0] is "quiet"
		r := resps[n-1-i]
		if !strings.HasPrefix(o.Description, r.ExecutionID+" mkdir d") || o.Status == nil || *o.Status != 0 ||
			len(o.Snapshots) != 1 || o.Snapshots[0].ID.String() != r.SnapshotAfter {
			t.Fatalf("op %d: %+v\nresponse %+v", o.ID, o, r)
		}
	}
}

// execResponses reads a stream of responses, one JSON object a line.
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

// TestExecStoreErrorCodes: a store error around a request carries the
// exec API's code of its class (execapi.CodeOf), as the CLI and MCP
// class it: a branch that is not there is E6002 end to end; a missing
// file is E6002 too (it was E6001 before the one table, while MCP said
// E6002 and the CLI exit 3), a bad revision E1001.
func TestExecStoreErrorCodes(t *testing.T) {
	ctx := context.Background()
	db, err := journal.Open(ctx, filepath.Join(t.TempDir(), "ws.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := &execapi.Server{Executor: &journaledExecutor{db: db, branch: "gone", run: mkdirRun}}
	var out bytes.Buffer
	if err := srv.Serve(ctx, strings.NewReader(`{"command":["mkdir","d"]}`+"\n"), &out, execapi.JSONL); err != nil {
		t.Fatal(err)
	}
	if r := execResponses(t, out.String()); len(r) != 1 || r[0].Error == nil || r[0].Error.Code != execapi.CodeRevNotFound {
		t.Fatalf("a request on a branch that is not there: %+v", r)
	}
	for _, c := range []struct {
		err  error
		what string
		want execapi.Error
	}{
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.ENOENT}, "", execapi.Error{Code: execapi.CodeRevNotFound, Message: "open f: no such file or directory"}},
		{journal.ErrBadRev, "resolve", execapi.Error{Code: execapi.CodeMalformed, Message: "resolve: bad revision syntax"}},
		{syscall.ENOSPC, "journal under x", execapi.Error{Code: execapi.CodeStore, Message: "journal under x: no space left on device"}},
		{cas.ErrCorrupt, "changes of x", execapi.Error{Code: execapi.CodeStore, Message: "changes of x: corrupt object"}},
	} {
		if got := storeError(c.err, c.what); got.Code != c.want.Code || got.Message != c.want.Message {
			t.Errorf("storeError(%v, %q) = %+v, want %+v", c.err, c.what, got, c.want)
		}
	}
}
