package remote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// sampleDir makes a workspace with nested dirs, a symlink, an empty file
// and a file of several chunks.
func sampleDir(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	for i := 0; i < 20; i++ {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d.txt", i)), strings.Repeat(fmt.Sprintf("line %d\n", i), 100*i))
	}
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i*7 + i/1000)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d0/f0.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestRoundTrip(t *testing.T) {
	forEachKind(t, func(t *testing.T, k *kind) {
		ctx := context.Background()
		ws := sampleDir(t)
		a, b := newStore(t), newStore(t)
		root := importDir(t, a, ws)
		r, reopen := k.newRemote(t)

		st, err := Push(ctx, a, r, []string{"main"}, Options{Name: "origin"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Objects == 0 || st.Bytes == 0 || len(st.Branches) != 1 || st.Branches[0].New != root {
			t.Fatalf("first push: %+v", st)
		}
		pst, err := Pull(ctx, b, reopen(), []string{"main"}, Options{Name: "origin"})
		if err != nil {
			t.Fatal(err)
		}
		if got := head(t, b, "main"); got != root {
			t.Fatalf("pulled root %s, pushed %s", got.Short(), root.Short())
		}
		if pst.Objects != st.Objects {
			t.Fatalf("pulled %d objects, pushed %d", pst.Objects, st.Objects)
		}
		verifyClean(t, a)
		verifyClean(t, b)
		out := filepath.Join(t.TempDir(), "ws")
		hs, err := b.Resolve(ctx, "main", "main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := workspace.Export(ctx, b.Objects(), workspace.ExportOptions{Dir: out, State: hs}); err != nil {
			t.Fatal(err)
		}
		if d := testutil.DiffTrees(testutil.DescribeTree(t, ws, testutil.TreeOptions{}), testutil.DescribeTree(t, out, testutil.TreeOptions{})); d != "" {
			t.Fatalf("pulled workspace differs:\n%s", d)
		}
		// art log on the receiving side shows the pull.
		ops, err := b.Ops(ctx, journal.LogQuery{Branch: "main"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) == 0 || !strings.HasPrefix(ops[0].Description, "pull origin main") {
			t.Fatalf("newest op on B = %+v, want the pull", ops)
		}

		// A no-op push sends nothing and, on S3, costs one request.
		var before int64
		if k.requests != nil {
			before = k.requests.n.Load()
		}
		st, err = Push(ctx, a, reopen(), []string{"main"}, Options{Name: "origin"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Objects != 0 || st.Bytes != 0 || st.Branches[0].Status != "up to date" {
			t.Fatalf("no-op push: %+v", st)
		}
		if k.requests != nil {
			if n := k.requests.n.Load() - before; n != 1 {
				t.Fatalf("no-op push made %d requests, want 1", n)
			}
		}

		// An edit sends only the changed file's objects and the trees above it.
		writeFile(t, filepath.Join(ws, "d1", "f5.txt"), "changed\n")
		root2 := importDir(t, a, ws)
		st, err = Push(ctx, a, reopen(), nil, Options{Name: "origin"})
		if err != nil {
			t.Fatal(err)
		}
		// chunk + manifest + d1 tree + ws tree + root tree.
		if st.Objects != 5 || st.Branches[0].Status != "fast-forward" {
			t.Fatalf("push after one edit: %+v, want 5 objects, fast-forward", st)
		}
		if st.DedupBytes < 300<<10 {
			t.Fatalf("push after one edit deduplicated %d bytes, want at least big.bin's", st.DedupBytes)
		}
		pst, err = Pull(ctx, b, reopen(), nil, Options{Name: "origin"})
		if err != nil {
			t.Fatal(err)
		}
		if got := head(t, b, "main"); got != root2 || pst.Objects != 5 {
			t.Fatalf("second pull: root %s objects %d, want %s and 5", got.Short(), pst.Objects, root2.Short())
		}
		verifyClean(t, b)
	})
}

func TestFastForwardOnly(t *testing.T) {
	forEachKind(t, func(t *testing.T, k *kind) {
		ctx := context.Background()
		ws := sampleDir(t)
		a, b := newStore(t), newStore(t)
		importDir(t, a, ws)
		r, _ := k.newRemote(t)
		if _, err := Push(ctx, a, r, []string{"main"}, Options{Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := Pull(ctx, b, r, []string{"main"}, Options{}); err != nil {
			t.Fatal(err)
		}
		// B builds on what it pulled and pushes: a fast-forward.
		wsB := filepath.Join(t.TempDir(), "ws")
		st, _ := b.Resolve(ctx, "main", "main")
		if _, err := workspace.Export(ctx, b.Objects(), workspace.ExportOptions{Dir: wsB, State: st}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(wsB, "from-b"), "b\n")
		rootB := importDir(t, b, wsB)
		if _, err := Push(ctx, b, r, []string{"main"}, Options{}); err != nil {
			t.Fatalf("push of a descendant: %v", err)
		}
		// A diverges: its push is refused and changes nothing.
		writeFile(t, filepath.Join(ws, "from-a"), "a\n")
		rootA := importDir(t, a, ws)
		_, err := Push(ctx, a, r, []string{"main"}, Options{})
		if !errors.Is(err, ErrNonFastForward) {
			t.Fatalf("diverged push: %v, want ErrNonFastForward", err)
		}
		if ref, _ := r.Ref(ctx, "main"); ref.Root != rootB {
			t.Fatalf("refused push moved the ref to %s", ref.Root.Short())
		}
		// Pulling into diverged A is refused too.
		if _, err := Pull(ctx, a, r, []string{"main"}, Options{}); !errors.Is(err, ErrNonFastForward) {
			t.Fatalf("diverged pull: %v, want ErrNonFastForward", err)
		}
		if got := head(t, a, "main"); got != rootA {
			t.Fatalf("refused pull moved A to %s", got.Short())
		}
		// --force replaces.
		st2, err := Push(ctx, a, r, []string{"main"}, Options{Force: true})
		if err != nil || st2.Branches[0].Status != "forced" {
			t.Fatalf("forced push: %+v, %v", st2, err)
		}
		if ref, _ := r.Ref(ctx, "main"); ref.Root != rootA {
			t.Fatalf("forced push left the ref at %s", ref.Root.Short())
		}
	})
}

// failingRemote injects a fault: Send fails after ok successful calls.
type failingRemote struct {
	Remote
	ok int
}

var errInjected = errors.New("injected send failure")

func (f *failingRemote) Send(ctx context.Context, objs []Object) (int64, error) {
	if f.ok == 0 {
		return 0, errInjected
	}
	f.ok--
	return f.Remote.Send(ctx, objs)
}

func TestResume(t *testing.T) {
	forEachKind(t, func(t *testing.T, k *kind) {
		ctx := context.Background()
		ws := filepath.Join(t.TempDir(), "ws")
		// Incompressible content for three packs or so.
		for i := 0; i < 24; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte((j*2654435761 + i*97) >> 13)
			}
			seed := uint64(i + 1)
			for j := range b {
				seed ^= seed << 13
				seed ^= seed >> 7
				seed ^= seed << 17
				b[j] = byte(seed)
			}
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%02d", i)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a := newStore(t)
		root := importDir(t, a, ws)
		r, reopen := k.newRemote(t)
		full, err := Push(ctx, a, &failingRemote{Remote: r, ok: 1}, []string{"main"}, Options{})
		if !errors.Is(err, errInjected) {
			t.Fatalf("interrupted push: %v", err)
		}
		if ref, _ := reopen().Ref(ctx, "main"); ref.Exists() && ref.Root == root {
			t.Fatal("an interrupted push moved the ref")
		}
		rest, err := Push(ctx, a, reopen(), []string{"main"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// All objects, counted once across the two runs.
		b := newStore(t)
		pst, err := Pull(ctx, b, reopen(), []string{"main"}, Options{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if full.Objects == 0 || full.Objects+rest.Objects != pst.Objects {
			t.Fatalf("first run sent %d objects, rerun %d, the state has %d: the rerun resent or skipped some",
				full.Objects, rest.Objects, pst.Objects)
		}
	})
}

func TestConcurrentPushersKeepObjects(t *testing.T) {
	forEachKind(t, func(t *testing.T, k *kind) {
		ctx := context.Background()
		_, reopen := k.newRemote(t)
		const n = 3
		stores := make([]*journal.DB, n)
		roots := make([]cas.ID, n)
		for i := range stores {
			stores[i] = newStore(t)
			ws := filepath.Join(t.TempDir(), "ws")
			writeFile(t, filepath.Join(ws, "who"), fmt.Sprintf("pusher %d\n", i))
			writeFile(t, filepath.Join(ws, "shared"), "same in all\n")
			roots[i] = importDir(t, stores[i], ws)
		}
		remotes := make([]Remote, n)
		for i := range remotes {
			remotes[i] = reopen()
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = Push(ctx, stores[i], remotes[i], []string{"main"}, Options{Force: true})
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, ErrRefChanged), errors.Is(err, ErrNonFastForward):
			default:
				t.Fatalf("pusher %d: %v", i, err)
			}
		}
		if won == 0 {
			t.Fatal("no pusher won")
		}
		// Every pusher's state is complete on the remote, winner or not.
		for i := range stores {
			b := newStore(t)
			fresh := reopen()
			err := b.ReceiveObjects(ctx, func(s *cas.Store) error {
				return receiveState(ctx, s, fresh, roots[i], Options{}, &Stats{}, newSizer(s))
			})
			if err != nil {
				t.Fatalf("state of pusher %d incomplete on the remote: %v", i, err)
			}
		}
	})
}

func TestEmptyTreeID(t *testing.T) {
	b, err := (&cas.Tree{}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if cas.Sum(b) != emptyTree {
		t.Fatalf("emptyTree = %s, the empty tree is %s", emptyTree.Short(), cas.Sum(b).Short())
	}
}

// TestIndexCache: with the store as index cache, a push reads no index it
// has seen before: its requests do not grow with the remote's pack count.
func TestIndexCache(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	ws := sampleDir(t)
	a := newStore(t)
	_, reopen := k.newRemote(t)
	push := func() int64 {
		r := reopen().(*S3Remote)
		r.SetIndexCache(a)
		before := k.requests.n.Load()
		if _, err := Push(ctx, a, r, []string{"main"}, Options{}); err != nil {
			t.Fatal(err)
		}
		n := k.requests.n.Load() - before
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var counts []int64
	for round := 0; round < 4; round++ {
		writeFile(t, filepath.Join(ws, "round"), fmt.Sprint(round))
		importDir(t, a, ws)
		counts = append(counts, push())
	}
	// Ref GET, LIST, pack PUT, index PUT, gc marker HEAD, ref PUT.
	for i, n := range counts[1:] {
		if n != 6 {
			t.Fatalf("push %d made %d requests, want 6 (all: %v)", i+2, n, counts)
		}
	}
	idx, err := a.PackIndexes(ctx, reopen().(*S3Remote).URL())
	if err != nil || len(idx) != 4 {
		t.Fatalf("cached indexes: %d, %v; want 4", len(idx), err)
	}
	// A cached index that does not hash to its name is not trusted: it is
	// fetched again (one more request each) and the push is right.
	if _, err := openSQL(t, a.Path()).Exec(`UPDATE remote_packs SET idx = x'00'`); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "round"), "last")
	root := importDir(t, a, ws)
	if n := push(); n != 6+4 {
		t.Fatalf("push with a damaged cache made %d requests, want 10", n)
	}
	writeFile(t, filepath.Join(ws, "round"), "repaired")
	root = importDir(t, a, ws)
	if n := push(); n != 6 {
		t.Fatalf("push after the cache was repaired made %d requests, want 6", n)
	}
	// The 6 packs (12 objects) listed 5 to a page: a pull without the
	// cache follows the continuation tokens (3 pages) and finds them all.
	listPageKeys = 5
	t.Cleanup(func() { listPageKeys = 0 })
	r := reopen().(*S3Remote)
	before := k.requests.n.Load()
	if err := r.loadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if n := k.requests.n.Load() - before; len(r.packs) != 6 || n != 3+6 {
		t.Fatalf("index load in pages of 5: %d packs, %d requests; want 6 packs, 9 requests", len(r.packs), n)
	}
	b := newStore(t)
	if _, err := Pull(ctx, b, r, []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := head(t, b, "main"); got != root {
		t.Fatalf("pulled %s, pushed %s", got.Short(), root.Short())
	}
}

// A branch whose pushed state was later forgotten locally still pushes as a
// fast-forward: the state was the branch's own, nothing is lost by moving
// the remote past it.
func TestPushAfterForgetIsFastForward(t *testing.T) {
	ctx := context.Background()
	ws := sampleDir(t)
	a := newStore(t)
	r, _ := fileKind().newRemote(t)
	root1 := importDir(t, a, ws)
	if _, err := a.TakeSnapshot(ctx, "main", "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, a, r, []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"two", "three"} {
		writeFile(t, filepath.Join(ws, s), s+"\n")
		importDir(t, a, ws)
		if _, err := a.TakeSnapshot(ctx, "main", s); err != nil {
			t.Fatal(i, err)
		}
	}
	rep, err := a.Forget(ctx, journal.ForgetOptions{Branches: []string{"main"}, Policy: journal.Retention{Last: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if bf := rep.Branches[0]; len(bf.Forget) < 2 || bf.Events == 0 {
		t.Fatalf("forget --keep-last 1 dropped %d snapshots and %d events; want at least 2 and some", len(bf.Forget), bf.Events)
	}
	if ok, err := a.HasRoot(ctx, "main", root1); err != nil || !ok {
		t.Fatalf("HasRoot(pushed, forgotten root) = %v, %v; want true", ok, err)
	}
	st, err := Push(ctx, a, r, []string{"main"}, Options{})
	if err != nil {
		t.Fatalf("push after forget: %v", err)
	}
	if got := st.Branches[0].Status; got != "fast-forward" {
		t.Fatalf("push after forget: status %q, want fast-forward", got)
	}
	if ref, _ := r.Ref(ctx, "main"); ref.Root != head(t, a, "main") {
		t.Fatalf("remote at %s, local head %s", ref.Root.Short(), head(t, a, "main").Short())
	}
}
