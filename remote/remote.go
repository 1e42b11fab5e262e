package remote

import (
	"context"
	"fmt"
	"strings"

	"github.com/artrt/art/cas"
)

// Ref is one branch on a remote.
type Ref struct {
	Branch string `json:"branch"`
	Root   cas.ID `json:"root"`
	// Version is the compare-and-swap token of the ref as read (an ETag, a
	// head hash); "" means the branch does not exist.
	Version string `json:"-"`
	// History holds earlier roots of the branch, newest first (bounded,
	// see maxHistory): a pull is a fast-forward when the local head is one
	// of them.
	History []cas.ID `json:"-"`
}

// Exists reports whether the ref names an existing branch.
func (r Ref) Exists() bool { return r.Version != "" }

// maxHistory bounds Ref.History.
const maxHistory = 1000

// Remote is where branches are pushed to and pulled from. Implementations
// are safe for use by one goroutine at a time; Push and Pull use them so.
// Every method is idempotent except SetRef, which is a compare-and-swap.
type Remote interface {
	// Ref reads branch. A missing branch is a Ref with Version "" and no
	// error.
	Ref(ctx context.Context, branch string) (Ref, error)
	// Refs lists every branch, sorted by name.
	Refs(ctx context.Context) ([]Ref, error)
	// Has reports, for each id, whether the remote holds the object. A true
	// answer promises the object's whole closure (see the package doc).
	Has(ctx context.Context, ids []cas.ID) ([]bool, error)
	// HasKinds is Has answering, for each id, the kind the remote holds
	// the object as (0: absent; a store file's kind column, an S3 pack
	// index's entry): the closure a present object promises is that
	// kind's.
	HasKinds(ctx context.Context, ids []cas.ID) ([]cas.Kind, error)
	// Send stores objs durably (one pack on S3) and returns the bytes put
	// on the wire. Callers send children before parents.
	Send(ctx context.Context, objs []Object) (int64, error)
	// Fetch calls fn with the stored form of each of ids, in any order,
	// unverified: the caller checks every object. An id the remote lacks
	// is an *ObjectError wrapping cas.ErrNotFound. It returns the bytes
	// read from the wire.
	Fetch(ctx context.Context, ids []cas.ID, fn func(cas.Raw) error) (int64, error)
	// SetRef moves old.Branch to root if it is still at old (old.Version
	// "": only if it does not exist). A lost race wraps ErrRefChanged and
	// changes nothing. Every object under root must already be sent.
	SetRef(ctx context.Context, old Ref, root cas.ID) error
	// Close releases the remote. It is safe to call twice.
	Close() error
}

// Object is an object to send: its stored form and, for a tree, optionally
// an earlier version of it that the remote holds (Base, with its verified
// canonical bytes BaseData), which a remote may store it as a delta against.
type Object struct {
	cas.Raw
	Base     cas.ID
	BaseData []byte
}

// OpenOptions configure Open.
type OpenOptions struct {
	// Create makes a missing store file (push); pull needs an existing one.
	Create bool
	// ReadOnly opens a store file read-only: a pull never writes to its
	// source, which may be anyone's file.
	ReadOnly bool
	// S3 configures s3:// remotes; zero values come from the environment
	// (see S3ConfigFromEnv).
	S3 *S3Config
}

// Open opens the remote at url: "s3://BUCKET/PREFIX" or the path of a
// store file.
func Open(ctx context.Context, url string, opts OpenOptions) (Remote, error) {
	if rest, ok := strings.CutPrefix(url, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("%w: %q: want s3://BUCKET/PREFIX", ErrBadURL, url)
		}
		cfg := opts.S3
		if cfg == nil {
			c, err := S3ConfigFromEnv()
			if err != nil {
				return nil, err
			}
			cfg = &c
		}
		return OpenS3(ctx, *cfg, bucket, strings.Trim(prefix, "/"))
	}
	if strings.Contains(url, "://") {
		return nil, fmt.Errorf("%w: %q: want s3://BUCKET/PREFIX or the path of a store file", ErrBadURL, url)
	}
	return OpenFile(ctx, url, opts)
}
