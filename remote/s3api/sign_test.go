package s3api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
)

// TestMain runs the tests with a private TMPDIR that must be empty after
// them, and stops MinIO.
func TestMain(m *testing.M) { testutil.Main(m) }

// The examples of AWS's public documentation of header-based SigV4 for S3
// ("Signature Calculations for the Authorization Header: Transferring
// Payload in a Single Chunk", Amazon S3 API Reference): the published
// credentials, date, requests and resulting signatures.
const (
	exampleAccess = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func TestSignAWSExamples(t *testing.T) {
	when := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, method, path, query string
		header                    map[string]string
		body                      string
		signed, sig               string
	}{
		{"GET object", "GET", "/test.txt", "", map[string]string{"Range": "bytes=0-9"}, "",
			"host;range;x-amz-content-sha256;x-amz-date",
			"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
		{"PUT object", "PUT", "/test$file.text", "",
			map[string]string{"Date": "Fri, 24 May 2013 00:00:00 GMT", "X-Amz-Storage-Class": "REDUCED_REDUNDANCY"},
			"Welcome to Amazon S3.",
			"date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			"98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
		{"GET bucket lifecycle", "GET", "/", "lifecycle", nil, "",
			"host;x-amz-content-sha256;x-amz-date",
			"fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
		{"GET bucket (list objects)", "GET", "/", "max-keys=2&prefix=J", nil, "",
			"host;x-amz-content-sha256;x-amz-date",
			"34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := "https://examplebucket.s3.amazonaws.com" + encodePath(tc.path)
			if tc.query != "" {
				u += "?" + tc.query
			}
			r, err := http.NewRequest(tc.method, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			s := signer{access: exampleAccess, secret: exampleSecret, region: "us-east-1"}
			s.sign(r, payloadSHA256([]byte(tc.body)), when)
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=" +
				tc.signed + ", Signature=" + tc.sig
			if got := r.Header.Get("Authorization"); got != want {
				t.Fatalf("Authorization:\n got %s\nwant %s", got, want)
			}
			if got := r.Header.Get("X-Amz-Date"); got != "20130524T000000Z" {
				t.Fatalf("X-Amz-Date %q", got)
			}
		})
	}
	// The example PUT's body hash, as published.
	if got := payloadSHA256([]byte("Welcome to Amazon S3.")); got != "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072" {
		t.Fatalf("payload hash %s", got)
	}
}

// TestSignSessionToken: a session token is sent and signed.
func TestSignSessionToken(t *testing.T) {
	r, _ := http.NewRequest("GET", "https://h/b/k", nil)
	s := signer{access: "A", secret: "S", token: "TOKEN", region: "r"}
	s.sign(r, emptySHA256, time.Now())
	if r.Header.Get("X-Amz-Security-Token") != "TOKEN" || !strings.Contains(r.Header.Get("Authorization"), "x-amz-security-token") {
		t.Fatalf("token not sent or not signed: %v", r.Header)
	}
}

func TestURIEncode(t *testing.T) {
	for in, want := range map[string]string{
		"a/b c":       "a/b%20c",
		"~-._AZaz09":  "~-._AZaz09",
		"+%?#&=":      "%2B%25%3F%23%26%3D",
		"é":           "%C3%A9",
		"\x00\xff\n":  "%00%FF%0A",
		"a//b/../c/.": "a//b/../c/.",
	} {
		if got := encodePath(in); got != want {
			t.Errorf("encodePath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := encodeQuery("a/b c"); got != "a%2Fb%20c" {
		t.Errorf("encodeQuery: %q", got)
	}
	if got := canonicalQuery("b=2&a=&a=1&location"); got != "a=&a=1&b=2&location=" {
		t.Errorf("canonicalQuery: %q", got)
	}
	if got := foldSpaces("  a   b  c "); got != "a b c" {
		t.Errorf("foldSpaces: %q", got)
	}
}

// captured records the requests a client sends, answering 200.
type captured struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (c *captured) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// TestAddressing: the URLs art reached through minio-go for each kind of
// endpoint (see the package doc).
func TestAddressing(t *testing.T) {
	for _, tc := range []struct {
		endpoint, region, bucket, key string
		make                          bool
		want                          string
	}{
		{"http://127.0.0.1:9000", "us-east-1", "bkt", "a/b c", false, "http://127.0.0.1:9000/bkt/a/b%20c"},
		{"minio.example:9000", "us-east-1", "bkt", "k", false, "https://minio.example:9000/bkt/k"},
		{"https://minio.example:443/", "us-east-1", "bkt", "k", false, "https://minio.example/bkt/k"},
		{"http://minio.example:80", "us-east-1", "bkt", "k", false, "http://minio.example/bkt/k"},
		{"s3.amazonaws.com", "us-east-1", "bkt", "k", false, "https://bkt.s3.us-east-1.amazonaws.com/k"},
		{"s3.amazonaws.com", "eu-west-3", "bkt", "k", false, "https://bkt.s3.eu-west-3.amazonaws.com/k"},
		{"s3.amazonaws.com", "cn-north-1", "bkt", "k", false, "https://bkt.s3.cn-north-1.amazonaws.com.cn/k"},
		{"s3.amazonaws.com", "eu-west-3", "my.bkt", "k", false, "https://s3.eu-west-3.amazonaws.com/my.bkt/k"},
		{"http://s3.amazonaws.com", "eu-west-3", "my.bkt", "k", false, "http://my.bkt.s3.eu-west-3.amazonaws.com/k"},
		{"s3.eu-west-3.amazonaws.com", "eu-west-3", "bkt", "k", false, "https://bkt.s3.eu-west-3.amazonaws.com/k"},
		{"s3-fips.us-east-2.amazonaws.com", "us-east-2", "bkt", "k", false, "https://bkt.s3-fips.us-east-2.amazonaws.com/k"},
		{"storage.googleapis.com", "auto", "bkt", "k", false, "https://bkt.storage.googleapis.com/k"},
		{"oss-cn-hangzhou.aliyuncs.com", "oss-cn-hangzhou", "bkt", "k", false, "https://bkt.oss-cn-hangzhou.aliyuncs.com/k"},
		{"s3.amazonaws.com", "us-east-1", "bkt", "", true, "https://s3.us-east-1.amazonaws.com/bkt/"},
		{"s3.amazonaws.com", "us-east-1", "Old_Bkt", "k", false, "https://s3.us-east-1.amazonaws.com/Old_Bkt/k"},
	} {
		tr := &captured{}
		c, err := New(Config{Endpoint: tc.endpoint, Region: tc.region, AccessKey: "a", SecretKey: "s", Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if tc.make {
			err = c.MakeBucket(ctx, tc.bucket)
		} else {
			_, err = c.StatObject(ctx, tc.bucket, tc.key)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := tr.reqs[0]
		if got := r.URL.String(); got != tc.want || r.Host != r.URL.Host {
			t.Errorf("%s %s/%s: %s (Host %s), want %s", tc.endpoint, tc.bucket, tc.key, got, r.Host, tc.want)
		}
		if !strings.Contains(r.Header.Get("Authorization"), "/"+tc.region+"/s3/aws4_request") {
			t.Errorf("%s: not signed for %s: %s", tc.endpoint, tc.region, r.Header.Get("Authorization"))
		}
	}
	for _, bad := range []string{"http://h/path", "http://", "http://u:p@h", "h?x=1"} {
		if _, err := New(Config{Endpoint: bad, Region: "r"}); err == nil {
			t.Errorf("endpoint %q accepted", bad)
		}
	}
	c, _ := New(Config{Endpoint: "h", Region: "r", Transport: &captured{}})
	for _, bad := range []string{"", "ab", "a/b", "a..b", "-ab", "ab-", "a b", strings.Repeat("a", 64), "a?b", "a#b"} {
		if _, err := c.StatObject(context.Background(), bad, "k"); err == nil {
			t.Errorf("bucket %q accepted", bad)
		}
	}
	if _, err := c.StatObject(context.Background(), "bkt", ""); err == nil {
		t.Error("empty key accepted")
	}
}
