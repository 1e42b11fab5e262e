// Package s3api is the small S3 client art's remotes use: the few
// operations of the S3 REST API that package remote needs (put, get,
// ranged get, head, ListObjectsV2, delete, create bucket), signed with AWS
// Signature Version 4 from static credentials.
//
// It replaces a general-purpose SDK whose package initialisation (regular
// expressions, YAML, INI, XML entity tables...) every art process paid for
// at start-up, including `art run`, which never talks to S3.
//
// The remote is treated as hostile: every response body read is bounded
// (error documents, listing pages; objects by the caller's limit), XML is
// read by a bounded scanner, redirects are never followed (to any host),
// keys a listing returns must lie under the prefix asked for, and text from
// the server reaches an error message only through internal/termtext.
//
// Addressing (which host and path name a bucket) follows what art did with
// minio-go, so existing configurations reach the same URLs:
//   - Path style (http://HOST/BUCKET/KEY) for every endpoint but the ones
//     below: MinIO and most S3-compatible stores.
//   - Virtual-hosted style (http://BUCKET.HOST/KEY) for AWS endpoints (host
//     ending in .amazonaws.com or .amazonaws.com.cn), Google Cloud Storage
//     (storage.googleapis.com) and Aliyun OSS (*.aliyuncs.com), except over
//     https for a bucket with a dot in its name (the wildcard certificate
//     would not match), for a name that is not a DNS name (upper case,
//     '_', ':', which some stores still allow), and for creating a bucket.
//   - The global AWS endpoints s3.amazonaws.com and s3-external-1.amazonaws.com
//     are replaced by the region's endpoint s3.REGION.amazonaws.com
//     (s3.REGION.amazonaws.com.cn for cn- regions): requests are signed for
//     the configured region, which the global endpoint would redirect.
//     A regional, FIPS, dual-stack or PrivateLink host is used as given.
package s3api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/artrt/art/internal/termtext"
)

// Config says how to reach an S3-compatible service.
type Config struct {
	Endpoint  string // host[:port], or a URL; http:// means no TLS
	Region    string // signs every request; required
	AccessKey string
	SecretKey string
	Token     string            // session token, optional
	Transport http.RoundTripper // optional; nil is NewTransport's
	// Attempts bounds how many times a request is sent when it fails in a
	// way worth retrying (a network error, 5xx, throttling); 0 means
	// DefaultAttempts.
	Attempts int
}

// DefaultAttempts is how many times a request is tried, the first
// included: as many as minio-go tried, with a back-off like its (200 ms
// doubling to at most 1 s, jittered), so a store restarting for a few
// seconds does not fail a push.
const DefaultAttempts = 10

// Bounds on what is read from a response besides object data: an error
// document is a few hundred bytes; a listing page of 1000 keys, each at
// most 1024 bytes and URL-encoded (up to 3 bytes a byte), is under 4 MiB.
const (
	maxErrorBody = 64 << 10
	maxListBody  = 8 << 20
)

// Client talks to one S3 endpoint. It is safe for concurrent use.
type Client struct {
	scheme  string // "http" or "https"
	host    string // host[:port] requests go to (port 80/443 dropped)
	virtual bool   // virtual-hosted style for buckets whose name allows it
	sign    signer
	http    *http.Client
	tries   int
}

// NewTransport is the transport a Client uses when Config.Transport is
// nil: the time bounds art had with minio-go (30 s to connect, 10 s for
// the TLS handshake, a minute for the response headers), TLS 1.2 at
// least, proxies from the environment, and no transparent decompression
// (an object's bytes are its bytes).
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   16,
		ResponseHeaderTimeout: time.Minute,
		IdleConnTimeout:       time.Minute,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 10 * time.Second,
		DisableCompression:    true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
}

// New makes a client for cfg. It makes no request.
func New(cfg Config) (*Client, error) {
	endpoint, scheme := cfg.Endpoint, "https"
	if rest, ok := strings.CutPrefix(endpoint, "http://"); ok {
		endpoint, scheme = rest, "http"
	} else if rest, ok := strings.CutPrefix(endpoint, "https://"); ok {
		endpoint = rest
	}
	endpoint = strings.TrimSuffix(endpoint, "/")
	u, err := url.Parse(scheme + "://" + endpoint)
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("endpoint %s: want host[:port] or http(s)://host[:port]", termtext.Quote(cfg.Endpoint))
	}
	if cfg.Region == "" {
		return nil, errors.New("no region")
	}
	host := u.Host
	if p := u.Port(); (scheme == "http" && p == "80") || (scheme == "https" && p == "443") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	hostname := strings.ToLower(u.Hostname())
	virtual := strings.HasSuffix(hostname, ".amazonaws.com") || strings.HasSuffix(hostname, ".amazonaws.com.cn") ||
		hostname == "storage.googleapis.com" || strings.HasSuffix(hostname, ".aliyuncs.com")
	if hostname == "s3.amazonaws.com" || hostname == "s3-external-1.amazonaws.com" {
		host = "s3." + cfg.Region + ".amazonaws.com"
		if strings.HasPrefix(cfg.Region, "cn-") {
			host += ".cn"
		}
		if p := u.Port(); p != "" && p != "80" && p != "443" {
			host += ":" + p
		}
	}
	tr := cfg.Transport
	if tr == nil {
		tr = NewTransport()
	}
	tries := cfg.Attempts
	if tries <= 0 {
		tries = DefaultAttempts
	}
	return &Client{
		scheme:  scheme,
		host:    host,
		virtual: virtual,
		sign:    signer{access: cfg.AccessKey, secret: cfg.SecretKey, token: cfg.Token, region: cfg.Region},
		http: &http.Client{
			Transport: tr,
			// A redirect is an answer, never followed: a hostile or
			// misconfigured store must not send signed requests (or
			// art's reads) to another host.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		tries: tries,
	}, nil
}

// Error is an S3 error answer (or a non-success status without one).
type Error struct {
	Op         string // "GET", "PUT", "HEAD", "DELETE", "LIST", "CREATE BUCKET"
	Bucket     string
	Key        string
	StatusCode int
	Code       string // S3's error code: NoSuchKey, PreconditionFailed...
	Message    string // the server's message, as sent (not terminal-safe)
	RequestID  string
}

func (e *Error) Error() string {
	msg := e.Message
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	s := fmt.Sprintf("s3 %s: %d %s", e.Op, e.StatusCode, termtext.Quote(e.Code))
	if msg != "" {
		s += ": " + termtext.Text(msg)
	}
	return s
}

// ErrorCode is the S3 error code of err ("" if err is not an S3 answer).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound says whether err is S3's answer for a missing object.
func IsNotFound(err error) bool {
	c := ErrorCode(err)
	return c == "NoSuchKey" || c == "NotFound"
}

// IsPreconditionFailed says whether err is the failure of a conditional
// write: the object changed (If-Match), or exists (If-None-Match: *), or a
// concurrent conditional write won (409 ConditionalRequestConflict).
func IsPreconditionFailed(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.StatusCode == http.StatusPreconditionFailed || e.StatusCode == http.StatusConflict ||
		e.Code == "PreconditionFailed" || e.Code == "ConditionalRequestConflict"
}

// request is one S3 request before signing.
type request struct {
	op      string
	method  string
	bucket  string
	key     string   // "" for a bucket request
	query   []string // name, value, name, value... (not yet encoded)
	header  map[string]string
	body    []byte
	virtual bool // whether virtual-hosted style may be used
}

// do sends r, retrying what is worth it, and returns a response with a 2xx
// status (or 304/206) whose body the caller must close; any other answer
// is read (bounded) into an *Error.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	if err := checkBucket(r.bucket); err != nil {
		return nil, err
	}
	payload := payloadSHA256(r.body)
	var lastErr error
	for attempt := 0; attempt < c.tries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return nil, fmt.Errorf("s3 %s: %w (after: %v)", r.op, err, lastErr)
			}
		}
		req, err := c.newRequest(ctx, r, payload)
		if err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("s3 %s: %w", r.op, ctx.Err())
			}
			lastErr = fmt.Errorf("s3 %s: %w", r.op, err)
			if !retryableNetError(err) {
				return nil, lastErr
			}
			continue
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		e := readError(resp, r)
		lastErr = e
		if !retryable(e) {
			return nil, e
		}
	}
	return nil, lastErr
}

// newRequest builds and signs one attempt of r.
func (c *Client) newRequest(ctx context.Context, r request, payload string) (*http.Request, error) {
	host, path := c.host, "/"
	if r.bucket != "" {
		if r.virtual && c.virtual && dnsName(r.bucket) && !(c.scheme == "https" && strings.Contains(r.bucket, ".")) {
			host = r.bucket + "." + host
		} else {
			path += r.bucket + "/"
		}
	}
	path += r.key
	var q strings.Builder
	for i := 0; i+1 < len(r.query); i += 2 {
		if i > 0 {
			q.WriteByte('&')
		}
		q.WriteString(encodeQuery(r.query[i]))
		q.WriteByte('=')
		q.WriteString(encodeQuery(r.query[i+1]))
	}
	u := &url.URL{Scheme: c.scheme, Host: host, Path: path, RawPath: encodePath(path), RawQuery: q.String()}
	var body io.Reader
	if len(r.body) > 0 {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: %w", r.op, err)
	}
	// NewRequest parses the URL again; keep the exact encoding signed.
	req.URL = u
	req.Host = host
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	c.sign.sign(req, payload, time.Now())
	return req, nil
}

// readError reads a failed answer's body (at most maxErrorBody bytes) into
// an *Error. A body that is not an S3 error document leaves the code to
// the status, as S3 itself does for HEAD, which has no body.
func readError(resp *http.Response, r request) *Error {
	defer resp.Body.Close()
	e := &Error{Op: r.op, Bucket: r.bucket, Key: r.key, StatusCode: resp.StatusCode,
		RequestID: resp.Header.Get("X-Amz-Request-Id")}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if len(bytes.TrimSpace(b)) > 0 {
		_ = xmlWalk(b, func([]string) error { return nil }, func(path []string, text string) error {
			if len(path) != 2 || path[0] != "Error" {
				return nil
			}
			switch path[1] {
			case "Code":
				e.Code = text
			case "Message":
				e.Message = text
			case "RequestId":
				if e.RequestID == "" {
					e.RequestID = text
				}
			}
			return nil
		})
	}
	if e.Code == "" {
		switch resp.StatusCode {
		case http.StatusNotFound:
			e.Code = "NoSuchKey"
			if r.key == "" {
				e.Code = "NoSuchBucket"
			}
		case http.StatusForbidden:
			e.Code = "AccessDenied"
		case http.StatusPreconditionFailed:
			e.Code = "PreconditionFailed"
		case http.StatusConflict:
			e.Code = "Conflict"
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusFound:
			e.Code = "Redirect"
			if loc := resp.Header.Get("Location"); loc != "" && e.Message == "" {
				e.Message = "redirected to " + loc + " (not followed)"
			}
		default:
			e.Code = strconv.Itoa(resp.StatusCode)
			if t := http.StatusText(resp.StatusCode); t != "" {
				e.Code = strings.ReplaceAll(t, " ", "")
			}
		}
	}
	return e
}

// retryable says whether an error answer may go away if the request is
// sent again: the statuses and codes minio-go retried.
func retryable(e *Error) bool {
	switch e.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, 499, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, 520:
		return true
	}
	switch e.Code {
	case "RequestError", "RequestTimeout", "Throttling", "ThrottlingException", "RequestLimitExceeded",
		"RequestThrottled", "InternalError", "SlowDown", "SlowDownWrite", "SlowDownRead":
		return true
	}
	return false
}

// retryableNetError says whether a transport error may go away: not a
// certificate the system does not trust, nor an http:// answer to https.
func retryableNetError(err error) bool {
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return false
	}
	return !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// backoff is the wait before attempt n (1, 2...): 200 ms doubling, at most
// 1 s, jittered down by up to half so that clients do not retry in step.
func backoff(n int) time.Duration {
	d := 200 * time.Millisecond << min(n-1, 3)
	d = min(d, time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// dnsName says whether bucket can be the first labels of a host name
// (virtual-hosted style): lower case letters, digits, dots and hyphens.
// Other names checkBucket lets through (upper case, '_', ':') go in the
// path.
func dnsName(bucket string) bool {
	for i := 0; i < len(bucket); i++ {
		c := bucket[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// checkBucket accepts the bucket names S3-compatible stores accept (the
// rules minio-go checked, which allow the legacy upper case and
// underscores some stores still have): 3 to 63 of [A-Za-z0-9._:-],
// beginning and ending with a letter or digit, no "..", ".-" or "-.". A
// name is put in a host name or a path unencoded, so nothing else may
// pass.
func checkBucket(b string) error {
	bad := len(b) < 3 || len(b) > 63 || strings.Contains(b, "..") || strings.Contains(b, ".-") || strings.Contains(b, "-.")
	for i := 0; i < len(b) && !bad; i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if (i == 0 || i == len(b)-1) && !alnum {
			bad = true
		}
		if !alnum && c != '.' && c != '-' && c != '_' && c != ':' {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("bucket name %s: want 3 to 63 letters, digits, dots and hyphens", termtext.Quote(b))
	}
	return nil
}
