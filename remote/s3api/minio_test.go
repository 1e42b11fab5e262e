package s3api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// counting counts the requests sent through it.
type counting struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// minioBucket returns a client of the test process's MinIO, the count of
// its requests, and a fresh bucket.
func minioBucket(t *testing.T) (*Client, *counting, string) {
	t.Helper()
	srv := testutil.MinIO(t)
	cnt := &counting{next: http.DefaultTransport}
	c, err := New(Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Transport: cnt})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "s3api-" + hex.EncodeToString(b)
	if err := c.MakeBucket(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}
	return c, cnt, bucket
}

func readAll(t *testing.T, c *Client, bucket, key string) ([]byte, ObjectInfo) {
	t.Helper()
	o, err := c.GetObject(context.Background(), bucket, key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, o.ObjectInfo
}

// oddKeys are keys whose encoding the signature and the listing must get
// right: every byte class the URI encoding treats differently, UTF-8,
// XML's special characters, control characters, a long key. (MinIO
// refuses some keys S3 takes, as names it cannot map to its files: empty
// or "." and ".." segments, a trailing "/"; they are left out.)
var oddKeys = []string{
	"plain",
	"p/with space",
	"p/plus+and%percent",
	"p/q?uestion#hash&amp=eq",
	"p/xml<&>\"'",
	"p/ünïcödé/日本語",
	"p/ctl\x01\x1f\x7f",
	"p/new\nline\ttab",
	"p/~tilde-._!$'()*,;:@[]",
	"p/" + strings.Repeat(strings.Repeat("k", 200)+"/", 4) + "end", // MinIO: at most 255 bytes a segment
}

func TestOddKeys(t *testing.T) {
	c, _, bucket := minioBucket(t)
	ctx := context.Background()
	for i, k := range oddKeys {
		data := []byte(fmt.Sprintf("object %d %q", i, k))
		info, err := c.PutObject(ctx, bucket, k, data, PutOptions{ContentType: "application/octet-stream"})
		if err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		if info.ETag == "" {
			t.Fatalf("put %q: no ETag", k)
		}
		got, ginfo := readAll(t, c, bucket, k)
		if !bytes.Equal(got, data) || ginfo.ETag != info.ETag || ginfo.Size != int64(len(data)) {
			t.Fatalf("get %q: %q %+v, want %q etag %s", k, got, ginfo, data, info.ETag)
		}
		st, err := c.StatObject(ctx, bucket, k)
		if err != nil || st.ETag != info.ETag || st.Size != int64(len(data)) || st.LastModified.IsZero() {
			t.Fatalf("stat %q: %+v %v", k, st, err)
		}
	}
	var listed []string
	for o, err := range c.ListObjects(ctx, bucket, "", 3) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, o.Key)
	}
	want := slices.Clone(oddKeys)
	sort.Strings(want)
	sort.Strings(listed)
	if !slices.Equal(listed, want) {
		t.Fatalf("listed %q\nwant %q", listed, want)
	}
	for _, k := range oddKeys {
		if err := c.RemoveObject(ctx, bucket, k); err != nil {
			t.Fatalf("remove %q: %v", k, err)
		}
		if _, err := c.StatObject(ctx, bucket, k); !IsNotFound(err) {
			t.Fatalf("stat of removed %q: %v, want not found", k, err)
		}
	}
}

func TestRangeReads(t *testing.T) {
	c, cnt, bucket := minioBucket(t)
	ctx := context.Background()
	data := make([]byte, 100_000)
	rand.Read(data)
	if _, err := c.PutObject(ctx, bucket, "obj", data, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 1}, {0, 100_000}, {1, 2}, {4095, 70_001}, {99_999, 100_000}} {
		before := cnt.n.Load()
		got, err := c.ReadRange(ctx, bucket, "obj", r[0], r[1])
		if err != nil {
			t.Fatalf("range %v: %v", r, err)
		}
		if !bytes.Equal(got, data[r[0]:r[1]]) {
			t.Fatalf("range %v: wrong bytes", r)
		}
		if n := cnt.n.Load() - before; n != 1 {
			t.Fatalf("range %v: %d requests", r, n)
		}
	}
	// Past the end: the store says so (416), or the object is short.
	if _, err := c.ReadRange(ctx, bucket, "obj", 100_000, 100_010); err == nil {
		t.Fatal("a range past the end read")
	}
	if _, err := c.ReadRange(ctx, bucket, "obj", 99_990, 100_010); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a range over the end: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := c.ReadRange(ctx, bucket, "missing", 0, 10); !IsNotFound(err) {
		t.Fatalf("range of a missing object: %v", err)
	}
}

func TestConditionalPut(t *testing.T) {
	c, _, bucket := minioBucket(t)
	ctx := context.Background()
	v1, err := c.PutObject(ctx, bucket, "ref", []byte("1"), PutOptions{IfNoneMatch: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, bucket, "ref", []byte("x"), PutOptions{IfNoneMatch: true}); !IsPreconditionFailed(err) {
		t.Fatalf("create over an existing object: %v, want precondition failed", err)
	}
	v2, err := c.PutObject(ctx, bucket, "ref", []byte("2"), PutOptions{IfMatch: v1.ETag})
	if err != nil {
		t.Fatal(err)
	}
	if v2.ETag == v1.ETag {
		t.Fatal("the ETag did not change")
	}
	if _, err := c.PutObject(ctx, bucket, "ref", []byte("x"), PutOptions{IfMatch: v1.ETag}); !IsPreconditionFailed(err) {
		t.Fatalf("write on a stale ETag: %v, want precondition failed", err)
	}
	if got, _ := readAll(t, c, bucket, "ref"); string(got) != "2" {
		t.Fatalf("ref holds %q after refused writes", got)
	}
	if _, err := c.PutObject(ctx, bucket, "none", []byte("x"), PutOptions{IfMatch: v1.ETag}); err == nil {
		t.Fatalf("If-Match on a missing object: %v", err)
	}
}

// TestListPagination: a listing longer than a page follows continuation
// tokens, one request per page, and sees every key once.
func TestListPagination(t *testing.T) {
	c, cnt, bucket := minioBucket(t)
	ctx := context.Background()
	var want []string
	for i := 0; i < 23; i++ {
		k := fmt.Sprintf("pre/%02d", i)
		want = append(want, k)
		if _, err := c.PutObject(ctx, bucket, k, []byte(k), PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PutObject(ctx, bucket, "other", []byte("x"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := cnt.n.Load()
	var got []string
	for o, err := range c.ListObjects(ctx, bucket, "pre/", 5) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Size != int64(len(o.Key)) || o.ETag == "" || o.LastModified.IsZero() {
			t.Fatalf("listed %+v", o)
		}
		got = append(got, o.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if n := cnt.n.Load() - before; n != 5 {
		t.Fatalf("%d requests for 23 keys in pages of 5, want 5", n)
	}
	// Stopping early sends no further request.
	before = cnt.n.Load()
	for range c.ListObjects(ctx, bucket, "pre/", 5) {
		break
	}
	if n := cnt.n.Load() - before; n != 1 {
		t.Fatalf("%d requests for a listing stopped at its first key", n)
	}
	for o, err := range c.ListObjects(ctx, bucket, "nothing/", 0) {
		t.Fatalf("empty prefix listed %+v %v", o, err)
	}
}

func TestMissing(t *testing.T) {
	c, _, bucket := minioBucket(t)
	ctx := context.Background()
	if _, err := c.GetObject(ctx, bucket, "missing"); !IsNotFound(err) {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.StatObject(ctx, bucket, "missing"); !IsNotFound(err) {
		t.Fatalf("stat: %v", err)
	}
	if err := c.RemoveObject(ctx, bucket, "missing"); err != nil {
		t.Fatalf("remove of a missing key: %v", err)
	}
	_, err := c.GetObject(ctx, bucket+"-none", "k")
	if ErrorCode(err) != "NoSuchBucket" || IsNotFound(err) {
		t.Fatalf("get from a missing bucket: %v (code %q)", err, ErrorCode(err))
	}
	for _, err := range c.ListObjects(ctx, bucket+"-none", "", 0) {
		if ErrorCode(err) != "NoSuchBucket" {
			t.Fatalf("list of a missing bucket: %v", err)
		}
	}
	// Wrong credentials: the server's answer, not a retry loop.
	srv := testutil.MinIO(t)
	bad, _ := New(Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: "wrong"})
	if _, err := bad.StatObject(ctx, bucket, "k"); err == nil || IsNotFound(err) {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := bad.PutObject(ctx, bucket, "k", []byte("x"), PutOptions{}); ErrorCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
}
