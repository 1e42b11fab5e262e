package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote/s3api"
)

// S3Config says how to reach an S3-compatible service.
type S3Config struct {
	Endpoint  string // host[:port], or a URL; http:// means no TLS
	Region    string
	AccessKey string
	SecretKey string
	Token     string            // session token, optional
	Transport http.RoundTripper // optional; tests count requests with it
}

// S3ConfigFromEnv reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION (default us-east-1) and ART_S3_ENDPOINT
// (default s3.amazonaws.com).
func S3ConfigFromEnv() (S3Config, error) {
	c := S3Config{
		Endpoint:  os.Getenv("ART_S3_ENDPOINT"),
		Region:    os.Getenv("AWS_REGION"),
		AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
		Token:     os.Getenv("AWS_SESSION_TOKEN"),
	}
	if c.Endpoint == "" {
		c.Endpoint = "s3.amazonaws.com"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.AccessKey == "" || c.SecretKey == "" {
		return c, fmt.Errorf("%w: s3 remote needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", ErrBadURL)
	}
	return c, nil
}

// maxListed bounds the keys one listing of refs or packs may return: a
// hostile or broken store could otherwise grow the maps they fill without
// end. A million is half a million packs, terabytes at packTarget.
const maxListed = 1 << 20

// listPageKeys is the page size of the packs listing: the store's
// default; tests lower it to exercise continuation.
var listPageKeys = 0

// packTarget is the size at which Push starts a new pack: large enough that
// a 16 KiB chunk is not one request, small enough that an interrupted push
// loses little.
const packTarget = 8 << 20

// S3Remote keeps a remote under a prefix of a bucket (layout in the package
// doc). Its pack index is read once, on the first Has or Fetch, and kept up
// to date with what it sends.
type S3Remote struct {
	c      *s3api.Client
	bucket string
	prefix string
	index  map[cas.ID]packLoc // nil until loaded; packs not condemned by a gc round
	// shadow holds the objects found only in packs a gc round condemned
	// (see gc.go): Has says false for them and no delta is built on them,
	// but Fetch still reads them while they exist.
	shadow map[cas.ID]packLoc
	local  *cas.Store // where delta bases are looked for first; may be nil

	// marker is the gc round marker (its ETag) seen when the index was
	// loaded, "" for none; markerAt is when it was last confirmed
	// unchanged. A push that finds a different marker before moving a ref
	// or writing a pack fails with journal.ErrGCRaced (see checkMarker).
	marker   string
	markerAt time.Time
	// round is the id of the unfinished round the loaded index honours
	// ("" if none): its own later steps change the marker harmlessly.
	round string
	// written are the packs this remote wrote since it loaded its index;
	// doubted those written under an index that a gc round overtook (a
	// checkMarker that failed). A doubted pack may have landed after the
	// round's phase 2 listed the packs (a write slower than the grace):
	// the objects it names may then be gone, so this remote's later Has
	// answers treat its objects as absent, as a condemned pack's, and the
	// push that starts over sends them again rather than point a ref at
	// them.
	written []string
	doubted map[string]bool
	// avoid are the pack names this remote must not write: those the
	// round the loaded index honours condemns (and its orphans), and, in
	// gc, those its own new round is about to condemn. A pack is named by
	// its index's hash, so sending again the objects of a condemned pack
	// (which Has treats as absent) in the same order would rewrite that
	// very pack, which the round then deletes with what a ref now needs;
	// putPack pads such a pack to give it another name.
	avoid map[string]bool
	// hook, set by tests only, is called at named points to inject
	// interleavings ("before-check", "before-index", "before-setref",
	// "after-check").
	hook func(point string)
	// clock records the Date header of the latest response: the server's
	// clock, which gc measures a round's age with.
	clock *dateRecorder
	// packs lists, after loadIndex, every pack with an index, and
	// orphans the .pack objects without one (gc reads both).
	packs   map[string]packInfo
	orphans map[string]packInfo
	// perPack, when set (gc), receives each index as it is parsed.
	perPack func(name string, idx []byte)

	idxCache IndexCache        // optional, see SetIndexCache
	fresh    map[string][]byte // indexes read or written, not yet in idxCache

	cache      map[string][]span // pack name -> bytes read, see cached
	cacheBytes int64
	packSize   map[string]int64 // from the index: end of the last object
}

// IndexCache keeps pack indexes between runs; *journal.DB implements it in
// the store's remote_packs table.
type IndexCache interface {
	PackIndexes(ctx context.Context, remote string) (map[string][]byte, error)
	CachePackIndexes(ctx context.Context, remote string, idx map[string][]byte) error
}

// SetIndexCache makes the remote read pack indexes from c when it has them
// (an index is immutable and named by its hash, which is checked) and
// record there, on Close, the ones it fetched or wrote. Recording waits for
// Close because a pull reads indexes while it holds the store's write
// transaction.
func (s *S3Remote) SetIndexCache(c IndexCache) { s.idxCache = c }

// URL is the remote's s3://BUCKET/PREFIX.
func (s *S3Remote) URL() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.prefix
}

// SetLocal makes Fetch look for delta bases in objs before fetching them:
// a store pulling a newer state of a branch usually has the older trees its
// deltas were made against. objs is used only from Fetch's goroutine.
func (s *S3Remote) SetLocal(objs *cas.Store) { s.local = objs }

type packLoc struct {
	pack string
	packEntry
}

// packInfo is what a listing says about a pack's objects.
type packInfo struct {
	packBytes, idxBytes int64
	modified            time.Time // of the .pack (server clock)
}

// dateRecorder is a RoundTripper that remembers the Date header of the
// last response, i.e. the server's clock.
type dateRecorder struct {
	next http.RoundTripper
	last atomic.Pointer[time.Time]
}

func (d *dateRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if err == nil {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			d.last.Store(&t)
		}
	}
	return resp, err
}

// OpenS3 opens the remote at bucket/prefix. It makes no request.
func OpenS3(ctx context.Context, cfg S3Config, bucket, prefix string) (*S3Remote, error) {
	next := cfg.Transport
	if next == nil {
		next = s3api.NewTransport()
	}
	clock := &dateRecorder{next: next}
	c, err := s3api.New(s3api.Config{
		Endpoint:  cfg.Endpoint,
		Region:    cfg.Region, // known: no bucket-location request
		AccessKey: cfg.AccessKey,
		SecretKey: cfg.SecretKey,
		Token:     cfg.Token,
		Transport: clock,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: s3 endpoint: %v", ErrBadURL, err)
	}
	return &S3Remote{c: c, bucket: bucket, prefix: prefix, clock: clock}, nil
}

func (s *S3Remote) key(parts ...string) string {
	k := strings.Join(parts, "")
	if s.prefix == "" {
		return k
	}
	return s.prefix + "/" + k
}

// where names an object for a message; a key listed from a bucket is
// anyone's text.
func (s *S3Remote) where(key string) string { return termtext.Quote("s3://" + s.bucket + "/" + key) }

func isNotFound(err error) bool { return s3api.IsNotFound(err) }

// get reads a whole object and its ETag; a missing key is (nil, "", nil).
func (s *S3Remote) get(ctx context.Context, key string, limit int64) ([]byte, string, error) {
	obj, err := s.c.GetObject(ctx, s.bucket, key)
	if err != nil {
		if isNotFound(err) {
			return nil, "", nil
		}
		return nil, "", err
	}
	defer obj.Body.Close()
	if obj.Size > limit {
		return nil, "", fmt.Errorf("%w: %s is over %d bytes", ErrMalformed, s.where(key), limit)
	}
	b, err := io.ReadAll(io.LimitReader(obj.Body, limit+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(b)) > limit {
		return nil, "", fmt.Errorf("%w: %s is over %d bytes", ErrMalformed, s.where(key), limit)
	}
	return b, obj.ETag, nil
}

// refDoc is the JSON of PREFIX/refs/BRANCH.
type refDoc struct {
	Version int      `json:"version"`
	Root    cas.ID   `json:"root"`
	History []cas.ID `json:"history,omitempty"`
}

const maxRefDoc = 1 << 20

// Ref implements Remote with one GET.
func (s *S3Remote) Ref(ctx context.Context, branch string) (Ref, error) {
	key := s.key("refs/", branch)
	b, etag, err := s.get(ctx, key, maxRefDoc)
	if err != nil {
		return Ref{}, fmt.Errorf("read %s: %w", s.where(key), err)
	}
	if b == nil {
		return Ref{Branch: branch}, nil
	}
	var d refDoc
	if err := json.Unmarshal(b, &d); err != nil || d.Version != 1 || d.Root.IsZero() {
		return Ref{}, fmt.Errorf("%w: %s: not a version 1 ref", ErrMalformed, s.where(key))
	}
	if etag == "" {
		etag = "-" // exists; a service without ETags cannot CAS, SetRef will fail
	}
	return Ref{Branch: branch, Root: d.Root, Version: etag, History: d.History}, nil
}

// Refs implements Remote: one listing, then one GET per branch.
func (s *S3Remote) Refs(ctx context.Context) ([]Ref, error) {
	pre := s.key("refs/")
	var out []Ref
	n := 0
	for o, err := range s.c.ListObjects(ctx, s.bucket, pre, 0) {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.where(pre), err)
		}
		if n++; n > maxListed {
			return nil, fmt.Errorf("%w: %s: over %d objects", ErrMalformed, s.where(pre), maxListed)
		}
		r, err := s.Ref(ctx, strings.TrimPrefix(o.Key, pre))
		if err != nil {
			return nil, err
		}
		if r.Exists() {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Branch < out[j].Branch })
	return out, nil
}

// maxIndexTotal bounds the pack index bytes a remote may hold: they are
// all read, and kept in memory as a map, by every push or pull that needs
// objects. 1 GiB is over 20 million objects.
const maxIndexTotal = 1 << 30

// loadIndex reads every pack index: one listing and one GET per pack
// whose index is not cached. The same listing finds the gc round marker
// (PREFIX/packs/gc.json, see gc.go): objects found only in the packs it
// condemns go to s.shadow, not s.index.
func (s *S3Remote) loadIndex(ctx context.Context) error {
	if s.index != nil {
		return nil
	}
	idx := map[cas.ID]packLoc{}
	shadow := map[cas.ID]packLoc{}
	sizes := map[string]int64{}
	packs := map[string]packInfo{}
	var cached map[string][]byte
	if s.idxCache != nil {
		var err error
		if cached, err = s.idxCache.PackIndexes(ctx, s.URL()); err != nil {
			return err
		}
	}
	if s.fresh == nil {
		s.fresh = map[string][]byte{}
	}
	pre := s.key("packs/")
	l, err := s.listPacks(ctx, pre)
	if err != nil {
		return err
	}
	bare, marker := l.bare, l.marker
	var condemned map[string]bool
	avoid := map[string]bool{}
	round := ""
	if marker != "" {
		m, etag, err := s.readMarker(ctx)
		if err != nil {
			return err
		}
		marker = etag // "" if it vanished since the listing: then none
		if m != nil {
			condemned, avoid = m.condemnedSet(), m.unwritable()
			if m.State != "done" {
				round = m.Round
			}
		}
	}
	var total int64
	for _, o := range l.idxKeys {
		name := strings.TrimSuffix(strings.TrimPrefix(o.Key, pre), ".idx")
		b, err := s.readIndex(ctx, o.Key, name, cached)
		if err != nil {
			return err
		}
		if b == nil {
			continue // deleted between listing and reading
		}
		if total += int64(len(b)); total > maxIndexTotal {
			return fmt.Errorf("%w: %s: pack indexes over %d bytes (about %d million objects); not read", ErrMalformed, s.where(pre), maxIndexTotal, maxIndexTotal/minIndexEnt/1_000_000)
		}
		into := idx
		if condemned[name] || s.doubted[name] {
			into = shadow
		}
		err = parseIndex(b, func(id cas.ID, e packEntry) {
			if _, dup := into[id]; !dup {
				into[id] = packLoc{pack: name, packEntry: e}
			}
			if end := e.offset + e.length; end > sizes[name] {
				sizes[name] = end
			}
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", s.where(o.Key), err)
		}
		if s.perPack != nil {
			s.perPack(name, b)
		}
		info := bare[name]
		info.idxBytes = o.Size
		packs[name] = info
		delete(bare, name)
	}
	for id := range shadow {
		if _, ok := idx[id]; ok {
			delete(shadow, id)
		}
	}
	s.index, s.shadow, s.packSize = idx, shadow, sizes
	s.packs, s.orphans = packs, bare
	s.marker, s.markerAt, s.round = marker, time.Now(), round
	s.written, s.avoid = nil, avoid
	return nil
}

// packListing is what one listing of PREFIX/packs/ found.
type packListing struct {
	idxKeys []s3api.ObjectInfo  // the .idx objects
	bare    map[string]packInfo // the .pack objects, by name
	marker  string              // the gc round marker's ETag, "" if none
}

// listPacks lists the pack files, their indexes and the gc round marker
// under pre (PREFIX/packs/).
func (s *S3Remote) listPacks(ctx context.Context, pre string) (packListing, error) {
	l := packListing{bare: map[string]packInfo{}}
	markerKey := s.key(gcMarkerName)
	n := 0
	for o, err := range s.c.ListObjects(ctx, s.bucket, pre, listPageKeys) {
		if err != nil {
			return l, fmt.Errorf("list %s: %w", s.where(pre), err)
		}
		if n++; n > maxListed {
			return l, fmt.Errorf("%w: %s: over %d objects", ErrMalformed, s.where(pre), maxListed)
		}
		if o.Key == markerKey {
			l.marker = o.ETag
			continue
		}
		rest := strings.TrimPrefix(o.Key, pre)
		if name, ok := strings.CutSuffix(rest, ".pack"); ok {
			l.bare[name] = packInfo{packBytes: o.Size, modified: o.LastModified}
			continue
		}
		if _, ok := strings.CutSuffix(rest, ".idx"); ok {
			l.idxKeys = append(l.idxKeys, o)
		}
	}
	return l, nil
}

// readIndex returns the bytes of the index of pack name (object key):
// from cached when they hash to the name, else read from the remote, checked
// and kept in s.fresh. nil, nil when it was deleted since the listing.
func (s *S3Remote) readIndex(ctx context.Context, key, name string, cached map[string][]byte) ([]byte, error) {
	if b, ok := cached[name]; ok && cas.Sum(b).String() == name {
		return b, nil
	}
	b, _, err := s.get(ctx, key, 64<<20)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.where(key), err)
	}
	if b == nil {
		return nil, nil
	}
	if cas.Sum(b).String() != name {
		return nil, fmt.Errorf("%w: %s does not hash to its name", ErrMalformed, s.where(key))
	}
	s.fresh[name] = b
	return b, nil
}

// loc finds where object id is stored, in a pack a gc round condemned if
// nowhere else.
func (s *S3Remote) loc(id cas.ID) (packLoc, bool) {
	if l, ok := s.index[id]; ok {
		return l, true
	}
	l, ok := s.shadow[id]
	return l, ok
}

// restart implements restarter.
func (s *S3Remote) restart(context.Context) error {
	s.reset()
	return nil
}

// reset forgets the loaded index: the next Has or Fetch reads the packs
// and the gc round marker again.
func (s *S3Remote) reset() {
	s.index, s.shadow, s.packSize, s.packs, s.orphans = nil, nil, nil, nil, nil
	s.cache, s.cacheBytes = nil, 0
	s.marker, s.round, s.avoid = "", "", nil
}

// markerWindow bounds how long a writer trusts its last look at the gc
// round marker: a pack or a ref is written at most this long after the
// writer confirmed no new round began. gc's grace period must be longer
// (see docs/remotes.md, "Garbage collection").
var markerWindow = time.Minute

// checkMarker fails with journal.ErrGCRaced when the gc round marker is
// not the one seen when the index was loaded: a round began (or moved on)
// since, so Has answers may have come from packs it condemns. With force
// false it only looks when markerWindow passed since the last look.
func (s *S3Remote) checkMarker(ctx context.Context, force bool) error {
	if s.index == nil || (!force && time.Since(s.markerAt) < markerWindow) {
		return nil
	}
	if s.hook != nil {
		s.hook("before-check")
	}
	key := s.key(gcMarkerName)
	info, err := s.c.StatObject(ctx, s.bucket, key)
	etag := info.ETag
	if err != nil {
		if !isNotFound(err) {
			return fmt.Errorf("read %s: %w", s.where(key), err)
		}
		etag = ""
	}
	// Every step of a round rewrites the marker (and a finished round
	// leaves it, "done"), so any round that moved since the index was
	// loaded changes the ETag.
	if etag != s.marker && s.round != "" && etag != "" {
		// The round the index honours may only have moved on (its
		// deletions are a subset of what this push treated as absent).
		m, e, err := s.readMarker(ctx)
		if err != nil {
			return err
		}
		if m != nil && m.Round == s.round {
			s.marker = e
			etag = e
		}
	}
	if etag != s.marker {
		if s.doubted == nil {
			s.doubted = map[string]bool{}
		}
		for _, name := range s.written {
			s.doubted[name] = true
		}
		return fmt.Errorf("%w: a gc round ran on %s during the push", journal.ErrGCRaced, s.URL())
	}
	s.markerAt = time.Now()
	return nil
}

// Has implements Remote from the pack indexes.
func (s *S3Remote) Has(ctx context.Context, ids []cas.ID) ([]bool, error) {
	if err := s.loadIndex(ctx); err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		_, out[i] = s.index[id]
	}
	return out, nil
}

// HasKinds implements Remote from the kind of each object's index entry.
func (s *S3Remote) HasKinds(ctx context.Context, ids []cas.ID) ([]cas.Kind, error) {
	if err := s.loadIndex(ctx); err != nil {
		return nil, err
	}
	out := make([]cas.Kind, len(ids))
	for i, id := range ids {
		out[i] = s.index[id].kind // the zero entry for an absent one
	}
	return out, nil
}

// Send implements Remote: objs become one pack, written before its index so
// that an index always names a complete pack. A tree whose Base the remote
// holds is packed as a delta when that is smaller, as long as the chain
// stays shorter than maxDeltaDepth (readers accept up to maxDeltaDepth).
func (s *S3Remote) Send(ctx context.Context, objs []Object) (int64, error) {
	if len(objs) == 0 {
		return 0, nil
	}
	if err := s.loadIndex(ctx); err != nil {
		return 0, err
	}
	raws := make([]cas.Raw, len(objs))
	bases := make([]cas.ID, len(objs))
	for i, o := range objs {
		raws[i] = o.Raw
		if o.Kind != cas.KindTree || o.Base.IsZero() || o.BaseData == nil || s.depth(o.Base) >= maxDeltaDepth-1 {
			continue
		}
		full, err := cas.CheckRaw(o.Raw)
		if err != nil {
			return 0, &ObjectError{ID: o.ID, Kind: o.Kind, Err: err}
		}
		delta, err := encodeDelta(full, o.BaseData)
		if err != nil {
			return 0, &ObjectError{ID: o.ID, Kind: o.Kind, Err: err}
		}
		if len(delta) < len(o.Data) {
			raws[i] = cas.Raw{ID: o.ID, Kind: o.Kind, Codec: codecDelta, Size: o.Size, Data: delta}
			bases[i] = o.Base
		}
	}
	_, n, err := s.putPack(ctx, raws, bases)
	return n, err
}

// putPack writes one pack and its index and adds it to the loaded index.
// It returns the pack's name and the bytes written.
func (s *S3Remote) putPack(ctx context.Context, raws []cas.Raw, bases []cas.ID) (string, int64, error) {
	pack, index := buildPack(raws, bases, 0)
	name := cas.Sum(index).String()
	for pad := 1; s.avoid[name]; pad++ {
		// The name of a pack the round condemns (see avoid): padded, the
		// same objects make another pack, which the round leaves alone.
		pack, index = buildPack(raws, bases, pad)
		name = cas.Sum(index).String()
	}
	defer func() { s.fresh[name] = index }()
	// Written as soon as a write may land, even one that reports failure.
	s.written = append(s.written, name)
	for i, p := range []struct {
		key  string
		data []byte
	}{{s.key("packs/", name, ".pack"), pack}, {s.key("packs/", name, ".idx"), index}} {
		// A slow pack upload must not publish its index after a gc
		// round that began meanwhile could have deleted what it names.
		if err := s.checkMarker(ctx, false); err != nil {
			return "", 0, err
		}
		if i == 1 && s.hook != nil {
			s.hook("before-index")
		}
		_, err := s.c.PutObject(ctx, s.bucket, p.key, p.data, s3api.PutOptions{ContentType: "application/octet-stream"})
		if err != nil {
			return "", 0, fmt.Errorf("write %s: %w", s.where(p.key), err)
		}
	}
	return name, int64(len(pack) + len(index)), parseIndex(index, func(id cas.ID, e packEntry) {
		if _, dup := s.index[id]; !dup {
			s.index[id] = packLoc{pack: name, packEntry: e}
		}
		if end := e.offset + e.length; end > s.packSize[name] {
			s.packSize[name] = end
		}
	})
}

// depth is how many deltas deep object id is stored: 0 for a whole object,
// maxDeltaDepth or more for a chain too long to build on (or a cycle), and
// maxDeltaDepth for an object the remote lacks.
func (s *S3Remote) depth(id cas.ID) int {
	for d := 0; d < maxDeltaDepth; d++ {
		loc, ok := s.index[id]
		if !ok {
			return maxDeltaDepth
		}
		if loc.codec != codecDelta {
			return d
		}
		id = loc.base
	}
	return maxDeltaDepth
}

// maxGap is the largest run of unwanted bytes a ranged read spans rather
// than starting a new request; maxRange bounds one read's buffer.
const (
	maxGap   = 256 << 10
	maxRange = 16 << 20
)

// Fetch implements Remote with ranged GETs, coalescing nearby objects of a
// pack into one request. Deltas are resolved here (their bases fetched and
// verified first) and handed to fn as whole objects, one at a time: each
// is inflated (to at most its declared size), passed to fn, which checks
// and stores it, and dropped before the next, so a batch costs one
// object's bytes plus the bounded base cache, however many deltas share
// one small frame that inflates to 64 MiB.
func (s *S3Remote) Fetch(ctx context.Context, ids []cas.ID, fn func(cas.Raw) error) (int64, error) {
	bases := &baseCache{}
	var extra int64
	n, err := s.fetchStored(ctx, ids, func(r cas.Raw) error {
		if r.Codec != codecDelta {
			return fn(r)
		}
		full, m, err := s.undelta(ctx, r, 1, bases)
		extra += m
		if err != nil {
			return err
		}
		return fn(cas.Raw{ID: r.ID, Kind: r.Kind, Size: r.Size, Data: full})
	})
	return n + extra, err
}

// baseCache keeps verified delta bases, at most maxBaseCache bytes: the
// deltas of one directory level usually share a few bases.
type baseCache struct {
	m     map[cas.ID][]byte
	bytes int64
}

const maxBaseCache = 64 << 20

func (c *baseCache) put(id cas.ID, b []byte) {
	if c.bytes+int64(len(b)) > maxBaseCache {
		c.m, c.bytes = nil, 0
	}
	if c.m == nil {
		c.m = map[cas.ID][]byte{}
	}
	c.m[id] = b
	c.bytes += int64(len(b))
}

// undelta inflates delta d (at chain depth depth) against its base, which
// it finds in bases, the local store, or the remote (verified, resolving
// the base's own delta first). The result is not verified here: the
// caller checks every object.
func (s *S3Remote) undelta(ctx context.Context, d cas.Raw, depth int, bases *baseCache) ([]byte, int64, error) {
	if depth > maxDeltaDepth {
		return nil, 0, &ObjectError{ID: d.ID, Kind: d.Kind, Err: &cas.CorruptError{ID: d.ID, Reason: fmt.Sprintf("delta chain longer than %d", maxDeltaDepth)}}
	}
	if d.Kind != cas.KindTree {
		return nil, 0, &ObjectError{ID: d.ID, Kind: d.Kind, Err: &cas.CorruptError{ID: d.ID, Reason: "only trees are stored as deltas"}}
	}
	dl, _ := s.loc(d.ID)
	baseID := dl.base
	base, ok := bases.m[baseID]
	if !ok && s.local != nil {
		if k, data, err := s.local.Get(ctx, baseID); err == nil && k == cas.KindTree {
			base, ok = data, true // verified by Get
		}
	}
	var n int64
	if !ok {
		m, err := s.fetchStored(ctx, []cas.ID{baseID}, func(r cas.Raw) error {
			if r.Kind != cas.KindTree {
				return &ObjectError{ID: r.ID, Kind: r.Kind, Err: fmt.Errorf("%w: a delta base must be a tree", cas.ErrCorrupt)}
			}
			if r.Codec == codecDelta {
				b, m, err := s.undelta(ctx, r, depth+1, bases)
				n += m
				if err != nil {
					return err
				}
				r = cas.Raw{ID: r.ID, Kind: r.Kind, Size: r.Size, Data: b}
			}
			b, err := cas.CheckRaw(r)
			if err != nil {
				return &ObjectError{ID: r.ID, Kind: r.Kind, Err: err}
			}
			base, ok = b, true
			return nil
		})
		n += m
		var oe *ObjectError
		if errors.As(err, &oe) && oe.Kind == 0 {
			oe.Kind = cas.KindTree
		}
		if err != nil {
			if depth > 1 {
				return nil, n, err
			}
			return nil, n, fmt.Errorf("delta base: %w", err)
		}
		if !ok {
			return nil, n, &ObjectError{ID: baseID, Kind: cas.KindTree, Err: fmt.Errorf("delta base: %w on the remote", cas.ErrNotFound)}
		}
	}
	bases.put(baseID, base)
	b, err := decodeDelta(d.ID, d.Data, base, d.Size)
	if err != nil {
		return nil, n, &ObjectError{ID: d.ID, Kind: d.Kind, Err: err}
	}
	return b, n, nil
}

// errPackGone reports a pack that vanished after its index was read: a gc
// round deleted it.
var errPackGone = errors.New("pack deleted since its index was read")

// fetchStored calls fn with the stored bytes of each of ids as the pack
// holds them (deltas included); fn must not retain r.Data. When a pack
// the loaded index names is gone (a gc round deleted it; its live objects
// are in other packs by then), the index is read again and the objects
// not yet handed to fn are looked up once more.
func (s *S3Remote) fetchStored(ctx context.Context, ids []cas.ID, fn func(cas.Raw) error) (int64, error) {
	done := map[cas.ID]bool{}
	n, err := s.fetchStoredOnce(ctx, ids, func(r cas.Raw) error {
		done[r.ID] = true
		return fn(r)
	})
	if !errors.Is(err, errPackGone) {
		return n, err
	}
	var rest []cas.ID
	for _, id := range ids {
		if !done[id] {
			rest = append(rest, id)
		}
	}
	s.reset()
	m, err := s.fetchStoredOnce(ctx, rest, fn)
	return n + m, err
}

func (s *S3Remote) fetchStoredOnce(ctx context.Context, ids []cas.ID, fn func(cas.Raw) error) (int64, error) {
	if err := s.loadIndex(ctx); err != nil {
		return 0, err
	}
	type want struct {
		id cas.ID
		packLoc
	}
	byPack := map[string][]want{}
	for _, id := range ids {
		loc, ok := s.loc(id)
		if !ok {
			return 0, &ObjectError{ID: id, Err: fmt.Errorf("%w on the remote", cas.ErrNotFound)}
		}
		byPack[loc.pack] = append(byPack[loc.pack], want{id, loc})
	}
	packs := make([]string, 0, len(byPack))
	for p := range byPack {
		packs = append(packs, p)
	}
	sort.Strings(packs)
	var total int64
	for _, p := range packs {
		ws := byPack[p]
		sort.Slice(ws, func(i, j int) bool { return ws[i].offset < ws[j].offset })
		for i := 0; i < len(ws); {
			start, end := ws[i].offset, ws[i].offset+ws[i].length
			j := i + 1
			for j < len(ws) && ws[j].offset-end <= maxGap && ws[j].offset+ws[j].length-start <= maxRange {
				end = max(end, ws[j].offset+ws[j].length)
				j++
			}
			key := s.key("packs/", p, ".pack")
			buf, ok := s.cached(p, start, end)
			if size := s.packSize[p]; !ok && size <= smallPack && end-start < size {
				// A small pack is read whole: a pull's later levels
				// find the rest of it in the cache.
				all, err := s.readRange(ctx, key, 0, size)
				if isNotFound(err) {
					return total, fmt.Errorf("%s: %w", s.where(key), errPackGone)
				}
				if err != nil {
					return total, &ObjectError{ID: ws[i].id, Kind: ws[i].kind, Err: fmt.Errorf("read %s: %w", s.where(key), err)}
				}
				total += int64(len(all))
				s.remember(p, 0, all)
				buf, ok = all[start:end], true
			}
			if !ok {
				var err error
				buf, err = s.readRange(ctx, key, start, end)
				if isNotFound(err) {
					return total, fmt.Errorf("%s: %w", s.where(key), errPackGone)
				}
				if err != nil {
					return total, &ObjectError{ID: ws[i].id, Kind: ws[i].kind, Err: fmt.Errorf("read %s: %w", s.where(key), err)}
				}
				total += int64(len(buf))
				s.remember(p, start, buf)
			}
			for _, w := range ws[i:j] {
				data := buf[w.offset-start : w.offset-start+w.length]
				if err := fn(cas.Raw{ID: w.id, Kind: w.kind, Codec: w.codec, Size: w.size, Data: data}); err != nil {
					return total, err
				}
			}
			i = j
		}
	}
	return total, nil
}

// span is bytes of a pack read earlier, from offset start.
type span struct {
	start int64
	data  []byte
}

// maxCache bounds the pack bytes an S3Remote keeps: a pull walks a state one
// level at a time, and the levels of a small incremental push all live in
// the same few packs.
const maxCache = 64 << 20

// smallPack is the size up to which a pack is read whole on first use.
const smallPack = 1 << 20

// cached returns pack bytes [start, end) if an earlier read covered them.
func (s *S3Remote) cached(pack string, start, end int64) ([]byte, bool) {
	for _, sp := range s.cache[pack] {
		if sp.start <= start && end <= sp.start+int64(len(sp.data)) {
			return sp.data[start-sp.start : end-sp.start], true
		}
	}
	return nil, false
}

// remember keeps a read for cached, dropping everything when over maxCache.
func (s *S3Remote) remember(pack string, start int64, data []byte) {
	if s.cacheBytes+int64(len(data)) > maxCache {
		s.cache, s.cacheBytes = nil, 0
	}
	if int64(len(data)) > maxCache {
		return
	}
	if s.cache == nil {
		s.cache = map[string][]span{}
	}
	s.cache[pack] = append(s.cache[pack], span{start, data})
	s.cacheBytes += int64(len(data))
}

// readRange reads bytes [start, end) of key, all of them or an error.
func (s *S3Remote) readRange(ctx context.Context, key string, start, end int64) ([]byte, error) {
	if end <= start {
		return nil, nil
	}
	buf, err := s.c.ReadRange(ctx, s.bucket, key, start, end)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("pack shorter than its index says (want bytes %d-%d)", start, end)
	}
	return buf, err
}

// SetRef implements Remote with a conditional PUT: If-Match on the ETag that
// Ref read, or If-None-Match: * to create.
func (s *S3Remote) SetRef(ctx context.Context, old Ref, root cas.ID) error {
	key := s.key("refs/", old.Branch)
	d := refDoc{Version: 1, Root: root}
	if old.Exists() && old.Root != root {
		d.History = append([]cas.ID{old.Root}, old.History...)
	} else {
		d.History = old.History
	}
	if len(d.History) > maxHistory {
		d.History = d.History[:maxHistory]
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if s.hook != nil {
		s.hook("before-setref")
	}
	// The last look at the gc marker, right before the write: see
	// checkMarker and docs/remotes.md.
	if err := s.checkMarker(ctx, true); err != nil {
		return err
	}
	if s.hook != nil {
		s.hook("after-check")
	}
	opts := s3api.PutOptions{ContentType: "application/json"}
	if old.Exists() {
		opts.IfMatch = old.Version
	} else {
		opts.IfNoneMatch = true
	}
	_, err = s.c.PutObject(ctx, s.bucket, key, b, opts)
	if err != nil {
		if s3api.IsPreconditionFailed(err) {
			return fmt.Errorf("write %s: %w", s.where(key), ErrRefChanged)
		}
		return fmt.Errorf("write %s: %w", s.where(key), err)
	}
	return nil
}

// Close implements Remote: it records new pack indexes in the index cache.
func (s *S3Remote) Close() error {
	if s.idxCache == nil || len(s.fresh) == 0 {
		return nil
	}
	err := s.idxCache.CachePackIndexes(context.Background(), s.URL(), s.fresh)
	s.fresh = nil
	return err
}
