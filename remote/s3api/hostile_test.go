package s3api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Fault injection: an httptest server plays a hostile or broken store
// (the one use of a fake S3 here; everything else runs on MinIO).

// hostile starts a server answering with h and a client of it that tries
// each request at most twice.
func hostile(t *testing.T, h http.HandlerFunc) (*Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "a", SecretKey: "s", Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

// endless is a reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestOversizedErrorBody: an error answer with an endless body is read
// only up to its bound.
func TestOversizedErrorBody(t *testing.T) {
	var sent atomic.Int64
	c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<Error><Code>AccessDenied</Code><Message>")
		n, _ := io.Copy(w, io.LimitReader(endless{}, 1<<30))
		sent.Add(n)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.StatObject(ctx, "bkt", "k")
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusForbidden {
		t.Fatalf("got %v", err)
	}
	// An unterminated document is not half-read: the code is the
	// status's.
	if e.Code != "AccessDenied" || len(err.Error()) > 400 {
		t.Fatalf("error %q (code %q)", err.Error()[:min(400, len(err.Error()))], e.Code)
	}
	if ctx.Err() != nil {
		t.Fatal("the client read on until the deadline")
	}
}

// TestHostileErrorText: the server's error text reaches a message only
// escaped and shortened.
func TestHostileErrorText(t *testing.T) {
	c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<Error><Code>Bad&#27;]0;pwned&#7;</Code><Message>%s&#27;[2J</Message></Error>", strings.Repeat("m", 5000))
	})
	_, err := c.PutObject(context.Background(), "bkt", "k", []byte("x"), PutOptions{})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\x07") || len(msg) > 600 {
		t.Fatalf("unsafe or unbounded message: %q", msg)
	}
	if ErrorCode(err) != "Bad\x1b]0;pwned\x07" {
		t.Fatalf("code %q", ErrorCode(err))
	}
}

func TestMalformedListing(t *testing.T) {
	for name, body := range map[string]string{
		"not XML":            "this is not xml",
		"unterminated":       "<ListBucketResult><Contents><Key>a</Key>",
		"mismatched":         "<ListBucketResult><Contents><Key>a</Size></Contents></ListBucketResult>",
		"wrong root":         "<Error><Code>x</Code></Error>",
		"bad size":           "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
		"bad entity":         "<ListBucketResult><Contents><Key>a&bogus;</Key><Size>1</Size></Contents></ListBucketResult>",
		"doctype":            `<!DOCTYPE x [<!ENTITY a "b">]><ListBucketResult></ListBucketResult>`,
		"deep":               "<ListBucketResult>" + strings.Repeat("<a>", 100) + strings.Repeat("</a>", 100) + "</ListBucketResult>",
		"outside the prefix": "<ListBucketResult><Contents><Key>elsewhere/a</Key><Size>1</Size></Contents></ListBucketResult>",
		"bad url encoding":   "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>p/%zz</Key><Size>1</Size></Contents></ListBucketResult>",
		"trailing junk":      "<ListBucketResult></ListBucketResult><x/>",
		"truncated, no token": "<ListBucketResult><IsTruncated>true</IsTruncated>" +
			"<Contents><Key>p/a</Key><Size>1</Size></Contents></ListBucketResult>",
		"truncated, no keys": "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken></ListBucketResult>",
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
			var err error
			for _, e := range c.ListObjects(context.Background(), "bkt", "p/", 0) {
				if e != nil {
					err = e
				}
			}
			if err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestListingLoop: a store that answers every page with the same token
// (or an endless list of new ones, one key each) cannot make a listing
// spin in place: the repeated token fails it; new tokens make progress
// the caller bounds.
func TestListingLoop(t *testing.T) {
	c, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>same</NextContinuationToken>`+
			`<Contents><Key>p/a</Key><Size>1</Size></Contents></ListBucketResult>`)
	})
	var err error
	keys := 0
	for _, e := range c.ListObjects(context.Background(), "bkt", "p/", 0) {
		if e != nil {
			err = e
		} else {
			keys++
		}
	}
	if err == nil || n.Load() != 2 || keys != 2 {
		t.Fatalf("err %v after %d requests, %d keys", err, n.Load(), keys)
	}
}

// TestOversizedListPage: a listing page over its bound is refused, not
// read on.
func TestOversizedListPage(t *testing.T) {
	c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<ListBucketResult><Contents><Key>p/")
		io.Copy(w, io.LimitReader(endless{}, 1<<30))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, err := range c.ListObjects(ctx, "bkt", "p/", 0) {
		if err == nil || !strings.Contains(err.Error(), "over") {
			t.Fatalf("got %v", err)
		}
	}
}

// TestRedirectNotFollowed: a redirect, to another host or the same, is an
// error; the signed request goes nowhere else.
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	c, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	_, err := c.GetObject(context.Background(), "bkt", "k")
	if err == nil || elsewhere.Load() != 0 || n.Load() != 1 {
		t.Fatalf("err %v, %d requests elsewhere, %d here", err, elsewhere.Load(), n.Load())
	}
	if !strings.Contains(err.Error(), "307") {
		t.Fatalf("error %v does not say what happened", err)
	}
}

// TestRetry: a 503 is retried (within Attempts), a 403 is not.
func TestRetry(t *testing.T) {
	var calls atomic.Int64
	c, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "<Error><Code>SlowDown</Code></Error>")
			return
		}
		if r.Method == http.MethodPut {
			b, _ := io.ReadAll(r.Body)
			if string(b) != "data" {
				t.Errorf("retried body %q", b)
			}
		}
		w.Header().Set("ETag", `"abc"`)
	})
	info, err := c.PutObject(context.Background(), "bkt", "k", []byte("data"), PutOptions{})
	if err != nil || info.ETag != "abc" || n.Load() != 2 {
		t.Fatalf("put: %+v %v after %d requests", info, err, n.Load())
	}
	c, n = hostile(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) })
	if _, err := c.StatObject(context.Background(), "bkt", "k"); ErrorCode(err) != "AccessDenied" || n.Load() != 1 {
		t.Fatalf("403: %v after %d requests", err, n.Load())
	}
	c, n = hostile(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	if _, err := c.StatObject(context.Background(), "bkt", "k"); err == nil || n.Load() != 2 {
		t.Fatalf("500: %v after %d requests", err, n.Load())
	}
}

// TestHostileRanges: a ranged read takes exactly the bytes asked for, from
// where it asked, or fails.
func TestHostileRanges(t *testing.T) {
	answer := func(status int, contentRange, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if contentRange != "" {
				w.Header().Set("Content-Range", contentRange)
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	ctx := context.Background()
	// Range ignored: accepted from byte 0 (the first bytes are the ones
	// asked for), refused elsewhere.
	c, _ := hostile(t, answer(200, "", "0123456789"))
	if b, err := c.ReadRange(ctx, "bkt", "k", 0, 4); err != nil || string(b) != "0123" {
		t.Fatalf("200 from 0: %q %v", b, err)
	}
	if _, err := c.ReadRange(ctx, "bkt", "k", 2, 4); err == nil {
		t.Fatal("200 from byte 2 accepted")
	}
	// Wrong start.
	c, _ = hostile(t, answer(206, "bytes 0-1/10", "01"))
	if _, err := c.ReadRange(ctx, "bkt", "k", 2, 4); err == nil {
		t.Fatal("a range from the wrong offset accepted")
	}
	// Short.
	c, _ = hostile(t, answer(206, "bytes 2-3/10", "2"))
	if _, err := c.ReadRange(ctx, "bkt", "k", 2, 4); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short range: %v", err)
	}
	// Long: only what was asked for is taken.
	c, _ = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 2-3/10")
		w.WriteHeader(206)
		io.Copy(w, io.LimitReader(endless{}, 1<<30))
	})
	if b, err := c.ReadRange(ctx, "bkt", "k", 2, 4); err != nil || string(b) != "xx" {
		t.Fatalf("long range: %q %v", b, err)
	}
}

// TestRequestAsSigned: the request line the server receives is the
// canonical path and query that were signed.
func TestRequestAsSigned(t *testing.T) {
	var uris []string
	c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		uris = append(uris, r.RequestURI)
		io.WriteString(w, "<ListBucketResult></ListBucketResult>")
	})
	ctx := context.Background()
	c.StatObject(ctx, "bkt", "a b/+%?#/é")
	for range c.ListObjects(ctx, "bkt", "p/q r+", 7) {
	}
	want := []string{
		"/bkt/a%20b/%2B%25%3F%23/%C3%A9",
		"/bkt/?list-type=2&encoding-type=url&prefix=p%2Fq%20r%2B&max-keys=7",
	}
	if fmt.Sprint(uris) != fmt.Sprint(want) {
		t.Fatalf("request URIs %q\nwant %q", uris, want)
	}
}

func TestXMLWalk(t *testing.T) {
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment -->
<s3:Root xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/" a='>'>
  <Item id="1">&quot;a&amp;b&lt;c&gt;&apos;&#233;&#x263A;</Item>
  <Empty/>
  <C><![CDATA[<raw & text>]]></C>
</s3:Root>
`
	var got []string
	err := xmlWalk([]byte(doc), func([]string) error { return nil }, func(path []string, text string) error {
		if len(path) == 2 {
			got = append(got, strings.Join(path, "/")+"="+text)
		}
		return nil
	})
	want := []string{`Root/Item="a&b<c>'é☺`, "Root/Empty=", "Root/C=<raw & text>"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q %v\nwant %q", got, err, want)
	}
	for _, bad := range []string{"", "  ", "<a>", "<a></b>", "</a>", "<a", "<a>&#0;</a>", "<a>&#xD800;</a>", "<a>&#1114112;</a>",
		"x<a/>", "<a/>x", "<a/><b/>", "<!--", "<a><!-- </a>", "<a><![CDATA[x</a>", "<?xml"} {
		if err := xmlWalk([]byte(bad), func([]string) error { return nil }, func([]string, string) error { return nil }); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzListing: any answer is read without a panic, and what is accepted
// keeps the listing's promises (keys under the prefix, sizes not
// negative).
func FuzzListing(f *testing.F) {
	f.Add([]byte(`<?xml version="1.0"?><ListBucketResult xmlns="x"><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>` +
		`<NextContinuationToken>t</NextContinuationToken><Contents><Key>p/a%20b</Key><Size>3</Size><ETag>&#34;e&#34;</ETag>` +
		`<LastModified>2026-12-02T01:02:03.000Z</LastModified></Contents></ListBucketResult>`))
	f.Add([]byte(`<Error><Code>NoSuchKey</Code><Message>m</Message></Error>`))
	f.Add([]byte(`<ListBucketResult><Contents><Key><![CDATA[p/<x>]]></Key><Size>0</Size></Contents><!-- c --></ListBucketResult>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseListing(b, "p/")
		if err != nil {
			return
		}
		for _, o := range p.objects {
			if !strings.HasPrefix(o.Key, "p/") || o.Size < 0 {
				t.Fatalf("accepted %+v", o)
			}
		}
	})
}
