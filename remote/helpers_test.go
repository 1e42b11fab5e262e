package remote

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote/s3api"
	"github.com/artrt/art/workspace"
)

// TestMain runs the tests with a private TMPDIR that must be empty after
// them, and stops MinIO.
func TestMain(m *testing.M) { testutil.Main(m) }

// counter counts HTTP requests to S3.
type counter struct {
	n    atomic.Int64
	next http.RoundTripper
	// slowestPut is the longest PUT so far, in nanoseconds, request to
	// response: gc's grace must exceed it (docs/remotes.md, "Why nothing
	// a ref needs is deleted").
	slowestPut atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if r.Method != http.MethodPut {
		return c.next.RoundTrip(r)
	}
	start := time.Now()
	resp, err := c.next.RoundTrip(r)
	for d := int64(time.Since(start)); ; {
		old := c.slowestPut.Load()
		if d <= old || c.slowestPut.CompareAndSwap(old, d) {
			break
		}
	}
	return resp, err
}

// kind is one remote implementation under test.
type kind struct {
	name string
	// open opens the remote under test (a fresh one per call of newRemote;
	// reopening the same location with reopen).
	newRemote func(t *testing.T) (r Remote, reopen func() Remote)
	// plant stores objects without any check, as a damaged or hostile
	// remote would hold them, and points branch at root.
	plant func(t *testing.T, r Remote, objs []cas.Raw, branch string, root cas.ID)
	// requests counts S3 requests (nil for files).
	requests *counter
}

// forEachKind runs fn against a file remote and an S3 remote on MinIO.
func forEachKind(t *testing.T, fn func(t *testing.T, k *kind)) {
	t.Run("file", func(t *testing.T) { fn(t, fileKind()) })
	t.Run("s3", func(t *testing.T) { fn(t, s3Kind(t)) })
}

func fileKind() *kind {
	return &kind{
		name: "file",
		newRemote: func(t *testing.T) (Remote, func() Remote) {
			path := filepath.Join(t.TempDir(), "remote.db")
			open := func() Remote {
				r, err := OpenFile(context.Background(), path, OpenOptions{Create: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				return r
			}
			return open(), open
		},
		plant: func(t *testing.T, r Remote, objs []cas.Raw, branch string, root cas.ID) {
			ctx := context.Background()
			db := r.(*FileRemote).DB()
			// Raw rows straight into the remote's objects table, unchecked.
			sdb := openSQL(t, db.Path())
			for _, o := range objs {
				if _, err := sdb.ExecContext(ctx, `INSERT OR REPLACE INTO objects (id, kind, codec, size, data) VALUES (?,?,?,?,?)`,
					o.ID[:], int64(o.Kind), int64(o.Codec), o.Size, append([]byte{}, o.Data...)); err != nil {
					t.Fatal(err)
				}
			}
			// Point the branch at root: the journal does not look inside
			// objects when it records a checkout.
			b, err := db.Branch(ctx, branch)
			var expect cas.ID
			if err == nil {
				expect = b.HeadHash
			}
			if _, err := db.MoveBranch(ctx, branch, expect, root, "plant", "plant", 0); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func s3Kind(t *testing.T) *kind {
	srv := testutil.MinIO(t)
	c := &counter{next: http.DefaultTransport}
	cfg := S3Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Transport: c}
	return &kind{
		name:     "s3",
		requests: c,
		newRemote: func(t *testing.T) (Remote, func() Remote) {
			bucket := newBucket(t, cfg)
			open := func() Remote {
				r, err := OpenS3(context.Background(), cfg, bucket, "art/test")
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			return open(), open
		},
		plant: func(t *testing.T, r Remote, objs []cas.Raw, branch string, root cas.ID) {
			ctx := context.Background()
			s := r.(*S3Remote)
			if _, err := s.Send(ctx, objects(objs)); err != nil { // S3 Send stores, it does not check
				t.Fatal(err)
			}
			ref, err := s.Ref(ctx, branch)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetRef(ctx, ref, root); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func newBucket(t *testing.T, cfg S3Config) string {
	t.Helper()
	c, err := s3api.New(s3api.Config{Endpoint: cfg.Endpoint, Region: cfg.Region, AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "art-" + hex.EncodeToString(b)
	if err := c.MakeBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// newStore opens a fresh store.
func newStore(t *testing.T) *journal.DB {
	t.Helper()
	db, err := journal.Open(context.Background(), filepath.Join(t.TempDir(), "art.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// importDir pushes host dir into db's branch main and returns the head root.
func importDir(t *testing.T, db *journal.DB, dir string) cas.ID {
	t.Helper()
	st, err := workspace.Import(context.Background(), db, workspace.ImportOptions{Branch: "main", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return st.Snapshot.Root
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func head(t *testing.T, db *journal.DB, branch string) cas.ID {
	t.Helper()
	st, err := db.Head(context.Background(), branch)
	if err != nil {
		t.Fatal(err)
	}
	return st.Root
}

func verifyClean(t *testing.T, db *journal.DB) {
	t.Helper()
	rep, err := db.Verify(context.Background(), journal.VerifyOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify %s: %+v", db.Path(), rep.Problems)
	}
}

// openSQL opens a store file with database/sql, bypassing every check.
func openSQL(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// objects wraps raws for Send, without delta bases.
func objects(raws []cas.Raw) []Object {
	out := make([]Object, len(raws))
	for i, r := range raws {
		out[i] = Object{Raw: r}
	}
	return out
}
