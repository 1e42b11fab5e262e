package s3api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/artrt/art/internal/termtext"
)

// ObjectInfo describes an object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string // without the quotes S3 puts around it
	LastModified time.Time
}

// PutOptions are a PutObject's headers.
type PutOptions struct {
	ContentType string
	// IfMatch, when set, makes the write conditional on the object having
	// this ETag (as ObjectInfo.ETag gives it); IfNoneMatch on there being
	// no object. A lost condition is an error IsPreconditionFailed knows.
	IfMatch     string
	IfNoneMatch bool
}

// PutObject writes data as key in one request; its SHA-256 is signed, so
// the server refuses a body changed on the way. It returns the new
// object's ETag and size (the key as given).
func (c *Client) PutObject(ctx context.Context, bucket, key string, data []byte, opts PutOptions) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	h := map[string]string{}
	if opts.ContentType != "" {
		h["Content-Type"] = opts.ContentType
	}
	if opts.IfMatch != "" {
		h["If-Match"] = `"` + opts.IfMatch + `"`
	}
	if opts.IfNoneMatch {
		h["If-None-Match"] = "*"
	}
	resp, err := c.do(ctx, request{op: "PUT", method: http.MethodPut, bucket: bucket, key: key, header: h, body: data, virtual: true})
	if err != nil {
		return ObjectInfo{}, err
	}
	drain(resp)
	return ObjectInfo{Key: key, Size: int64(len(data)), ETag: trimETag(resp.Header.Get("ETag"))}, nil
}

// Object is an object being read: the caller reads Body (bounding what it
// reads) and closes it.
type Object struct {
	ObjectInfo
	Body io.ReadCloser
}

// GetObject starts reading key. A missing key is an error IsNotFound
// knows.
func (c *Client) GetObject(ctx context.Context, bucket, key string) (*Object, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{op: "GET", method: http.MethodGet, bucket: bucket, key: key, virtual: true})
	if err != nil {
		return nil, err
	}
	return &Object{ObjectInfo: infoFromHeader(key, resp.Header), Body: resp.Body}, nil
}

// errShort reports an object with fewer bytes than a ranged read asked for
// (callers test for io.ErrUnexpectedEOF). A type, not fmt.Errorf: nothing
// here runs at package initialisation.
var errShort error = shortRead{}

type shortRead struct{}

func (shortRead) Error() string { return "object shorter than the range read" }
func (shortRead) Unwrap() error { return io.ErrUnexpectedEOF }

// ReadRange reads bytes [start, end) of key: all of them, or an error
// (wrapping io.ErrUnexpectedEOF when the object is shorter). A server that
// ignores Range is accepted only when start is 0 (the first end bytes of
// the whole object are taken); bytes beyond end are never read.
func (c *Client) ReadRange(ctx context.Context, bucket, key string, start, end int64) ([]byte, error) {
	if start < 0 || end <= start {
		return nil, fmt.Errorf("s3 GET: bad range %d-%d", start, end)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	h := map[string]string{"Range": "bytes=" + strconv.FormatInt(start, 10) + "-" + strconv.FormatInt(end-1, 10)}
	resp, err := c.do(ctx, request{op: "GET", method: http.MethodGet, bucket: bucket, key: key, header: h, virtual: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		// Content-Range: bytes FIRST-LAST/TOTAL must start where asked.
		cr := resp.Header.Get("Content-Range")
		rest, ok := strings.CutPrefix(cr, "bytes ")
		first, _, ok2 := strings.Cut(rest, "-")
		if n, err := strconv.ParseInt(first, 10, 64); !ok || !ok2 || err != nil || n != start {
			return nil, fmt.Errorf("s3 GET: answer to a read from byte %d has Content-Range %s", start, termtext.Quote(cr))
		}
	case http.StatusOK:
		if start != 0 {
			return nil, fmt.Errorf("s3 GET: the server ignored the range (from byte %d)", start)
		}
	default:
		return nil, fmt.Errorf("s3 GET: status %d to a ranged read", resp.StatusCode)
	}
	buf := make([]byte, end-start)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, errShort
		}
		return nil, fmt.Errorf("s3 GET: %w", err)
	}
	return buf, nil
}

// StatObject reads key's size, ETag and modification time (HEAD).
func (c *Client) StatObject(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	resp, err := c.do(ctx, request{op: "HEAD", method: http.MethodHead, bucket: bucket, key: key, virtual: true})
	if err != nil {
		return ObjectInfo{}, err
	}
	resp.Body.Close()
	return infoFromHeader(key, resp.Header), nil
}

// RemoveObject deletes key. S3 answers success for a missing key.
func (c *Client) RemoveObject(ctx context.Context, bucket, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	resp, err := c.do(ctx, request{op: "DELETE", method: http.MethodDelete, bucket: bucket, key: key, virtual: true})
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// MakeBucket creates bucket in the client's region. It always uses path
// style: a new bucket's host name may not resolve yet.
func (c *Client) MakeBucket(ctx context.Context, bucket string) error {
	var body []byte
	if c.sign.region != "us-east-1" {
		// The region is checked by the store; it is put in XML text, so
		// it must not need escaping.
		for _, r := range c.sign.region {
			if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-') {
				return fmt.Errorf("s3 CREATE BUCKET: region %s: want letters, digits and hyphens", termtext.Quote(c.sign.region))
			}
		}
		body = []byte(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>` +
			c.sign.region + `</LocationConstraint></CreateBucketConfiguration>`)
	}
	resp, err := c.do(ctx, request{op: "CREATE BUCKET", method: http.MethodPut, bucket: bucket, body: body})
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// ListObjects lists every key under prefix (recursively: no delimiter),
// in the store's order, a page (ListObjectsV2, at most pageKeys keys, 0
// for the store's 1000) per request. It stops at the first error. Keys
// are asked URL-encoded (encoding-type=url), so any key survives XML. A
// page naming a key outside prefix, or a truncated page that makes no
// progress (no keys, or the continuation token it was asked with) fails
// the listing: a hostile store cannot make it loop in place; the caller
// bounds how many keys it takes.
func (c *Client) ListObjects(ctx context.Context, bucket, prefix string, pageKeys int) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		token := ""
		for {
			q := []string{"list-type", "2", "encoding-type", "url", "prefix", prefix}
			if token != "" {
				q = append(q, "continuation-token", token)
			}
			if pageKeys > 0 {
				q = append(q, "max-keys", strconv.Itoa(pageKeys))
			}
			page, err := c.listPage(ctx, request{op: "LIST", method: http.MethodGet, bucket: bucket, query: q, virtual: true}, prefix)
			if err != nil {
				yield(ObjectInfo{}, err)
				return
			}
			for _, o := range page.objects {
				if !yield(o, nil) {
					return
				}
			}
			if !page.truncated {
				return
			}
			if page.next == "" || page.next == token || len(page.objects) == 0 {
				yield(ObjectInfo{}, fmt.Errorf("s3 LIST: a truncated page without a new continuation token or keys"))
				return
			}
			token = page.next
		}
	}
}

type listPage struct {
	objects   []ObjectInfo
	truncated bool
	next      string
}

// listPage sends one ListObjectsV2 request and reads its answer, at most
// maxListBody bytes.
func (c *Client) listPage(ctx context.Context, r request, prefix string) (listPage, error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return listPage{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody+1))
	if err != nil {
		return listPage{}, fmt.Errorf("s3 LIST: %w", err)
	}
	if len(b) > maxListBody {
		return listPage{}, fmt.Errorf("s3 LIST: a listing page over %d bytes", maxListBody)
	}
	return parseListing(b, prefix)
}

// parseListing reads a ListObjectsV2 answer; every key it returns is
// under prefix and every size is not negative.
func parseListing(b []byte, prefix string) (listPage, error) {
	var p listPage
	var cur ObjectInfo
	var raw struct{ key, size, modified string }
	encoded := false
	err := xmlWalk(b, func(path []string) error {
		if len(path) == 1 && path[0] != "ListBucketResult" {
			return fmt.Errorf("%w: root element %s is not ListBucketResult", errXML, termtext.Quote(path[0]))
		}
		if len(path) == 2 && path[1] == "Contents" {
			cur, raw.key, raw.size, raw.modified = ObjectInfo{}, "", "", ""
		}
		return nil
	}, func(path []string, text string) error {
		switch {
		case len(path) == 2:
			switch path[1] {
			case "IsTruncated":
				p.truncated = text == "true"
			case "NextContinuationToken":
				p.next = text
			case "EncodingType":
				encoded = text == "url"
			case "Contents":
				cur.Key = raw.key
				n, err := strconv.ParseInt(raw.size, 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("%w: object size %s", errXML, termtext.Quote(raw.size))
				}
				cur.Size = n
				if raw.modified != "" {
					t, err := time.Parse(time.RFC3339Nano, raw.modified)
					if err != nil {
						return fmt.Errorf("%w: modification time %s", errXML, termtext.Quote(raw.modified))
					}
					cur.LastModified = t
				}
				p.objects = append(p.objects, cur)
			}
		case len(path) == 3 && path[1] == "Contents":
			switch path[2] {
			case "Key":
				raw.key = text
			case "Size":
				raw.size = text
			case "LastModified":
				raw.modified = text
			case "ETag":
				cur.ETag = trimETag(text)
			}
		}
		return nil
	})
	if err != nil {
		return listPage{}, fmt.Errorf("s3 LIST: %w", err)
	}
	for i := range p.objects {
		k := p.objects[i].Key
		if encoded {
			// encoding-type=url encodes keys as a query value would be.
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				return listPage{}, fmt.Errorf("s3 LIST: key %s: %w", termtext.Quote(p.objects[i].Key), err)
			}
		}
		if k == "" || !strings.HasPrefix(k, prefix) {
			return listPage{}, fmt.Errorf("s3 LIST: key %s is not under the prefix %s asked for", termtext.Quote(k), termtext.Quote(prefix))
		}
		p.objects[i].Key = k
	}
	return p, nil
}

// infoFromHeader reads an object's description from a GET or HEAD answer.
func infoFromHeader(key string, h http.Header) ObjectInfo {
	info := ObjectInfo{Key: key, Size: -1, ETag: trimETag(h.Get("ETag"))}
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		info.Size = n
	}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		info.LastModified = t
	}
	return info
}

func trimETag(s string) string {
	s = strings.TrimPrefix(s, `"`)
	return strings.TrimSuffix(s, `"`)
}

// drain reads what is left of a small answer (at most maxErrorBody bytes,
// so the connection can be reused) and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
}

// checkKey refuses an empty key: it would name the bucket.
func checkKey(key string) error {
	if key == "" {
		return errors.New("s3: empty object key")
	}
	return nil
}
