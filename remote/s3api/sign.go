package s3api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strings"
	"time"
)

// emptySHA256 is the hex SHA-256 of no bytes: the payload hash of a
// request without a body.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// amzDate is the layout of X-Amz-Date (ISO 8601 basic, UTC).
const amzDate = "20060102T150405Z"

// signer signs requests with AWS Signature Version 4 (header-based; see
// AWS's "Authenticating Requests: Using the Authorization Header"). The
// signing key is derived per request (four HMACs, microseconds): no state,
// so a Client is safe for concurrent use.
type signer struct {
	access, secret, token, region string
}

// sign adds X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token (with
// a session token) and Authorization to r. Every header already in
// r.Header is signed, with Host: the caller sets only headers it means
// the server to hold it to (Range, If-Match, Content-Type). Headers the
// transport adds later (User-Agent, Content-Length, Accept-Encoding) are
// not signed, which SigV4 allows. payloadHash is the hex SHA-256 of the
// body: art always holds the whole body, so no request is sent with
// UNSIGNED-PAYLOAD and a body altered in flight is refused by the server.
// r.URL.RawPath (or Path) and RawQuery must already be in the canonical
// encoding (see encodePath and encodeQuery), so that what is signed is
// exactly what is sent.
func (s *signer) sign(r *http.Request, payloadHash string, now time.Time) {
	now = now.UTC()
	date := now.Format(amzDate)
	day := date[:8]
	r.Header.Set("X-Amz-Date", date)
	r.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if s.token != "" {
		r.Header.Set("X-Amz-Security-Token", s.token)
	}

	// Canonical headers: lower-case names, sorted, values trimmed with
	// inner runs of spaces folded to one.
	type hdr struct{ name, value string }
	hs := []hdr{{"host", r.Host}}
	if r.Host == "" {
		hs[0].value = r.URL.Host
	}
	for name, vs := range r.Header {
		vals := make([]string, len(vs))
		for i, v := range vs {
			vals[i] = foldSpaces(v)
		}
		hs = append(hs, hdr{strings.ToLower(name), strings.Join(vals, ",")})
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].name < hs[j].name })
	var canon, signed strings.Builder
	for i, h := range hs {
		canon.WriteString(h.name)
		canon.WriteByte(':')
		canon.WriteString(h.value)
		canon.WriteByte('\n')
		if i > 0 {
			signed.WriteByte(';')
		}
		signed.WriteString(h.name)
	}

	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	creq := strings.Join([]string{r.Method, path, canonicalQuery(r.URL.RawQuery), canon.String(), signed.String(), payloadHash}, "\n")
	scope := day + "/" + s.region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(creq))
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(sum[:])

	k := hmacSHA256([]byte("AWS4"+s.secret), day)
	k = hmacSHA256(k, s.region)
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s.access+"/"+scope+
		", SignedHeaders="+signed.String()+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// payloadSHA256 is the hex SHA-256 of body, for sign.
func payloadSHA256(body []byte) string {
	if len(body) == 0 {
		return emptySHA256
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// foldSpaces trims v and folds each inner run of spaces to one, as the
// canonical header value wants.
func foldSpaces(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// canonicalQuery sorts a query already encoded by encodeQuery by name,
// then value. A name without "=" (like "?location") is a name with an
// empty value.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	type kv struct{ k, v string }
	kvs := make([]kv, 0, len(parts))
	for _, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].k != kvs[j].k {
			return kvs[i].k < kvs[j].k
		}
		return kvs[i].v < kvs[j].v
	})
	var b strings.Builder
	for i, p := range kvs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// encodePath percent-encodes every byte of s but the unreserved ones
// (A-Z a-z 0-9 - . _ ~) and '/': SigV4's URI encoding for S3, where the
// path is encoded once. Any byte string becomes a path Go sends as it is.
func encodePath(s string) string { return uriEncode(s, true) }

// encodeQuery is encodePath that encodes '/' too, for query names and
// values.
func encodeQuery(s string) string { return uriEncode(s, false) }

func uriEncode(s string, keepSlash bool) string {
	const hexUpper = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && keepSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexUpper[c>>4])
		b.WriteByte(hexUpper[c&15])
	}
	return b.String()
}
