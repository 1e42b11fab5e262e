package remote

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote/s3api"
	"github.com/artrt/art/workspace"
)

// randomFile writes n incompressible bytes.
func randomFile(t *testing.T, path string, n int) {
	t.Helper()
	b := make([]byte, n)
	crand.Read(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// importAs imports dir into branch of db (made from main's head when
// missing) and returns the state's root.
func importAs(t *testing.T, db *journal.DB, dir, branch string) cas.ID {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Branch(ctx, branch); errors.Is(err, journal.ErrBranchNotFound) {
		st, err := db.Head(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateBranch(ctx, branch, st); err != nil {
			t.Fatal(err)
		}
	}
	st, err := workspace.Import(ctx, db, workspace.ImportOptions{Dir: dir, Branch: branch})
	if err != nil {
		t.Fatal(err)
	}
	return st.Snapshot.Root
}

// bucketBytes is what the remote's prefix holds: keys and bytes.
func bucketBytes(t *testing.T, s *S3Remote) (keys int, n int64) {
	t.Helper()
	for o, err := range s.c.ListObjects(context.Background(), s.bucket, s.prefix+"/", 0) {
		if err != nil {
			t.Fatal(err)
		}
		keys++
		n += o.Size
	}
	return keys, n
}

// checkPulled pulls branch from r into a new store and checks it is at
// root and exports byte-identical to dir.
func checkPulled(t *testing.T, r Remote, branch string, root cas.ID, dir string) {
	t.Helper()
	ctx := context.Background()
	b := newStore(t)
	if _, err := Pull(ctx, b, r, []string{branch}, Options{Name: "origin", Force: true}); err != nil {
		t.Fatalf("pull %s: %v", branch, err)
	}
	if got := head(t, b, branch); got != root {
		t.Fatalf("pulled %s at %s, want %s", branch, got.Short(), root.Short())
	}
	verifyClean(t, b)
	if dir == "" {
		return
	}
	st, err := b.Resolve(ctx, branch, branch)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	if _, err := workspace.Export(ctx, b.Objects(), workspace.ExportOptions{Dir: out, State: st}); err != nil {
		t.Fatal(err)
	}
	want := testutil.DescribeTree(t, dir, testutil.TreeOptions{})
	got := testutil.DescribeTree(t, out, testutil.TreeOptions{})
	if d := testutil.DiffTrees(want, got); d != "" {
		t.Fatalf("pulled %s differs from %s:\n%s", branch, dir, d)
	}
}

func runGC(t *testing.T, r Remote, opts GCOptions) *GCReport {
	t.Helper()
	rep, err := GC(context.Background(), r, opts)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	if s, ok := r.(*S3Remote); ok {
		checkClosure(t, s)
	}
	return rep
}

// checkClosure checks the invariant Has relies on, on a fresh read of the
// remote: everything it offers (objects outside condemned packs) has its
// children and its delta base offered too.
func checkClosure(t *testing.T, s *S3Remote) {
	t.Helper()
	ctx := context.Background()
	r := &S3Remote{c: s.c, bucket: s.bucket, prefix: s.prefix, clock: s.clock}
	if err := r.loadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []cas.ID
	for id, l := range r.index {
		if l.codec == codecDelta {
			if _, ok := r.index[l.base]; !ok {
				t.Fatalf("%s %s is a delta against %s, which the remote does not offer", l.kind, id.Short(), l.base.Short())
			}
		}
		if l.kind != cas.KindChunk {
			ids = append(ids, id)
		}
	}
	for lo := 0; lo < len(ids); lo += fetchBatch {
		if _, err := r.Fetch(ctx, ids[lo:min(lo+fetchBatch, len(ids))], func(raw cas.Raw) error {
			c, err := cas.Check(raw)
			if err != nil {
				return err
			}
			return c.Refs(func(id cas.ID, k cas.Kind, _ int64) error {
				if _, ok := r.index[id]; !ok {
					return fmt.Errorf("%s %s is offered, its %s %s is not", raw.Kind, raw.ID.Short(), k, id.Short())
				}
				return nil
			})
		}); err != nil {
			t.Fatalf("closure: %v", err)
		}
	}
}

// gcFixture is a remote where branch tmp held a large state (big.bin,
// 2 MiB random) and was force-pushed to a small one, and main moved on
// from a state with a file it then deleted (its first pack is mixed: live
// and dead objects; its second holds tree deltas against dead trees).
type gcFixture struct {
	reopen          func() Remote
	mainDir, tmpDir string
	mainRoot        cas.ID
	tmpRoot, oldTmp cas.ID
	dropped         cas.ID // the manifest of main's deleted file
}

func newGCFixture(t *testing.T, k *kind) *gcFixture {
	t.Helper()
	ctx := context.Background()
	f := &gcFixture{}
	_, f.reopen = k.newRemote(t)
	a := newStore(t)
	f.mainDir = filepath.Join(t.TempDir(), "main")
	writeFile(t, filepath.Join(f.mainDir, "keep", "a.txt"), "kept\n")
	writeFile(t, filepath.Join(f.mainDir, "keep", "sub", "b.txt"), "kept too\n")
	randomFile(t, filepath.Join(f.mainDir, "keep", "drop.bin"), 512<<10)
	importDir(t, a, f.mainDir)
	if _, err := Push(ctx, a, f.reopen(), []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.mainDir, "keep", "drop.bin")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.mainDir, "keep", "c.txt"), "new\n")
	f.mainRoot = importDir(t, a, f.mainDir)

	f.tmpDir = filepath.Join(t.TempDir(), "tmp")
	randomFile(t, filepath.Join(f.tmpDir, "big.bin"), 2<<20)
	f.oldTmp = importAs(t, a, f.tmpDir, "tmp")
	if _, err := Push(ctx, a, f.reopen(), []string{"main", "tmp"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.tmpDir, "big.bin")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.tmpDir, "small.txt"), "small\n")
	c := newStore(t) // a store that never had the big state: a forced push
	f.tmpRoot = importAs(t, c, f.tmpDir, "tmp")
	if _, err := Push(ctx, c, f.reopen(), []string{"tmp"}, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGCS3: gc keeps what the refs need (pulls after it are
// byte-identical), removes the dead packs of a forced push and of a
// moved branch (bytes after < before, dead objects gone), finishes in one
// run with --grace 0, and a second gc has nothing to do. --history keeps
// earlier roots.
func TestGCS3(t *testing.T) {
	k := s3Kind(t)
	f := newGCFixture(t, k)
	s := f.reopen().(*S3Remote)
	_, before := bucketBytes(t, s)

	dry := runGC(t, f.reopen(), GCOptions{DryRun: true})
	if dry.Condemned == 0 || dry.Deleted != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if _, n := bucketBytes(t, s); n != before {
		t.Fatalf("dry run changed the bucket: %d -> %d bytes", before, n)
	}
	has := func(id cas.ID) bool {
		got, err := f.reopen().Has(context.Background(), []cas.ID{id})
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	// History 1 keeps tmp's big state (and main's first): nothing to do.
	rep := runGC(t, f.reopen(), GCOptions{History: 1})
	if rep.Condemned != 0 || !has(f.oldTmp) {
		t.Fatalf("gc --history 1: %+v, want nothing condemned", rep)
	}
	// The default grace leaves the round pending; a later run finishes it.
	rep = runGC(t, f.reopen(), GCOptions{Grace: time.Hour})
	if !rep.Pending || rep.Deleted != 0 || rep.Condemned == 0 || rep.Rewritten == 0 {
		t.Fatalf("gc with a grace: %+v, want a pending round that rewrote a mixed pack", rep)
	}
	if has(f.oldTmp) {
		t.Fatal("an object only a condemned pack holds is still offered by Has")
	}
	checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
	rep = runGC(t, f.reopen(), GCOptions{Grace: 0})
	t.Logf("gc: %+v", rep)
	if rep.Deleted == 0 || rep.BytesAfter >= rep.BytesBefore {
		t.Fatalf("gc: %+v, want packs deleted, fewer bytes", rep)
	}
	keys, after := bucketBytes(t, s)
	if after > before-2<<20 {
		t.Fatalf("bucket %d -> %d bytes: the 2 MiB of the forced-away state are still there", before, after)
	}
	checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
	checkPulled(t, f.reopen(), "tmp", f.tmpRoot, f.tmpDir)
	rep = runGC(t, f.reopen(), GCOptions{Grace: 0})
	if rep.Condemned != 0 || rep.Deleted != 0 {
		t.Fatalf("gc of a collected remote: %+v, want nothing to do", rep)
	}
	if k2, n2 := bucketBytes(t, s); k2 != keys || n2 != after {
		t.Fatalf("gc of a collected remote changed it: %d keys %d bytes -> %d, %d", keys, after, k2, n2)
	}
	// A .pack without an index (an interrupted push) goes once it is old.
	orphan := s.key("packs/", cas.Sum([]byte("orphan")).String(), ".pack")
	if _, err := s.c.PutObject(context.Background(), s.bucket, orphan, []byte("lost"), s3api.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	exists := func() bool {
		_, err := s.c.StatObject(context.Background(), s.bucket, orphan)
		return err == nil
	}
	runGC(t, f.reopen(), GCOptions{Grace: 0})
	if !exists() {
		t.Fatal("gc deleted a new .pack without an index (a push may be about to write it)")
	}
	old := minOrphanAge
	minOrphanAge = 0
	t.Cleanup(func() { minOrphanAge = old })
	// The server's Date has whole seconds: past the next one, the orphan's
	// age by that clock is no longer negative.
	time.Sleep(1100 * time.Millisecond)
	if rep := runGC(t, f.reopen(), GCOptions{Grace: 0}); rep.Deleted != 1 || exists() {
		t.Fatalf("gc of an old orphan pack: %+v, exists %v", rep, exists())
	}
}

// TestGCKeepsMostlyLivePacks: after a small edit, the packs of the old
// state hold a few dead objects; they stay (rewriting them would cost
// more than it frees) and so does the closure of what they hold.
func TestGCKeepsMostlyLivePacks(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	ws := sampleDir(t)
	a := newStore(t)
	importDir(t, a, ws)
	r, reopen := k.newRemote(t)
	if _, err := Push(ctx, a, r, []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "d1", "f5.txt"), "changed\n")
	root := importDir(t, a, ws)
	if _, err := Push(ctx, a, reopen(), []string{"main"}, Options{}); err != nil {
		t.Fatal(err)
	}
	rep := runGC(t, reopen(), GCOptions{Grace: 0})
	if rep.Condemned != 0 || rep.PacksAfter != rep.PacksBefore {
		t.Fatalf("gc after a small edit: %+v, want every pack kept", rep)
	}
	checkPulled(t, reopen(), "main", root, ws)
}

// TestGCInterrupted stops gc after each step, as a kill would: a pull
// then reads every branch right, and a second gc completes the job.
func TestGCInterrupted(t *testing.T) {
	k := s3Kind(t)
	for _, step := range []string{"mark", "copy", "marker", "claim", "delete-idx", "delete-pack", "done"} {
		t.Run(step, func(t *testing.T) {
			f := newGCFixture(t, k)
			stopped := errors.New("stopped")
			_, err := GC(context.Background(), f.reopen(), GCOptions{stop: func(s string) error {
				if s == step {
					return stopped
				}
				return nil
			}})
			if !errors.Is(err, stopped) {
				t.Fatalf("gc stopped after %s: %v", step, err)
			}
			checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
			checkPulled(t, f.reopen(), "tmp", f.tmpRoot, f.tmpDir)
			rep := runGC(t, f.reopen(), GCOptions{Grace: 0})
			s := f.reopen().(*S3Remote)
			if m, _, err := s.readMarker(context.Background()); err != nil || m == nil || m.State != "done" {
				t.Fatalf("after the second gc: marker %+v, %v", m, err)
			}
			if rep.BytesAfter >= rep.BytesBefore && step != "done" {
				t.Fatalf("second gc: %+v, want fewer bytes", rep)
			}
			if _, n := bucketBytes(t, s); n > 1<<20 {
				t.Fatalf("after gc the remote holds %d bytes: dead packs left", n)
			}
			checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
			checkPulled(t, f.reopen(), "tmp", f.tmpRoot, f.tmpDir)
		})
	}
}

// TestGCRacingPusher injects each interleaving of a push with a gc round
// that condemns the packs holding objects the push relies on; the pushed
// branch must always pull complete.
func TestGCRacingPusher(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	cases := []struct {
		name string
		// during runs at the pusher's "before-setref" hook (the push has
		// loaded the index and sent its packs); after, once the push ended.
		during func(t *testing.T, f *gcFixture)
		// crash makes the push die right there (ctx cancelled).
		crash bool
		// at is the hook point (default "before-setref"); retry: the push
		// must start over; rescue: the next gc must rescue a pack.
		at            string
		retry, rescue bool
	}{
		{name: "round-ran-before-setref", retry: true, during: func(t *testing.T, f *gcFixture) {
			if rep := runGC(t, f.reopen(), GCOptions{Grace: 0}); rep.Deleted == 0 {
				t.Errorf("gc: %+v, want packs deleted", rep)
			}
		}},
		{name: "marker-before-setref", retry: true, during: func(t *testing.T, f *gcFixture) {
			if rep := runGC(t, f.reopen(), GCOptions{Grace: time.Hour}); !rep.Pending {
				t.Errorf("gc: %+v, want a pending round", rep)
			}
		}},
		// The push looked at the marker, then the round began, then the
		// ref moved: phase 2 sees the ref and rescues what it needs.
		{name: "marker-between-check-and-setref", at: "after-check", rescue: true, during: func(t *testing.T, f *gcFixture) {
			if rep := runGC(t, f.reopen(), GCOptions{Grace: time.Hour}); !rep.Pending || rep.Condemned < 2 {
				t.Errorf("gc: %+v, want a pending round", rep)
			}
		}},
		// The push looked at the marker, then a whole round ran before
		// its pack's index landed (a write slower than the grace): the
		// round never saw the pack and deleted the forced-away big file
		// it names. The push starts over and must send that pack's
		// objects again, not find them present in it.
		{name: "index-landed-after-round", at: "before-index", retry: true, during: func(t *testing.T, f *gcFixture) {
			if rep := runGC(t, f.reopen(), GCOptions{Grace: 0}); rep.Deleted == 0 {
				t.Errorf("gc: %+v, want packs deleted", rep)
			}
		}},
		{name: "pusher-died-after-sending", crash: true, during: func(t *testing.T, f *gcFixture) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newGCFixture(t, k)
			// The pusher's state: tmp's forced-away big file, and more.
			db := newStore(t)
			dir := filepath.Join(t.TempDir(), "new")
			if err := os.CopyFS(dir, os.DirFS(f.tmpDir)); err != nil {
				t.Fatal(err)
			}
			// The forced-away state's big file, read from the remote
			// before any gc.
			old := pullRoot(t, f, f.oldTmp)
			if err := os.WriteFile(filepath.Join(dir, "big.bin"), old, 0o644); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "extra.txt"), "the racer's own file\n")
			root := importAs(t, db, dir, "new")
			pctx, cancel := context.WithCancel(ctx)
			defer cancel()
			r := f.reopen().(*S3Remote)
			calls := 0
			at := c.at
			if at == "" {
				at = "before-setref"
			}
			r.hook = func(point string) {
				if point != at {
					return
				}
				calls++
				if calls == 1 {
					c.during(t, f)
					if c.crash {
						cancel()
					}
				}
			}
			st, err := Push(pctx, db, r, []string{"new"}, Options{})
			if c.crash {
				if err == nil {
					t.Fatal("push survived its own crash")
				}
				// The dead push's packs name the condemned big file; gc
				// must not leave them without it. A second pusher of the
				// same state then finds everything "present".
				runGC(t, f.reopen(), GCOptions{Grace: 0})
				st, err = Push(ctx, db, f.reopen(), []string{"new"}, Options{})
			}
			if err != nil {
				t.Fatalf("push: %v", err)
			}
			t.Logf("push: %d objects, %s; setref attempts %d", st.Objects, fmt.Sprint(st.Bytes), calls)
			if c.retry && calls < 2 {
				t.Fatalf("push moved the ref past a gc round without retrying (%d attempts)", calls)
			}
			if rep := runGC(t, f.reopen(), GCOptions{Grace: 0}); c.rescue && rep.Rescued == 0 {
				t.Fatalf("gc finishing the round: %+v, want a rescued pack", rep)
			}
			checkPulled(t, f.reopen(), "new", root, dir)
			checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
			// And once more: a later round moves the rescued objects.
			runGC(t, f.reopen(), GCOptions{Grace: 0})
			checkPulled(t, f.reopen(), "new", root, dir)
		})
	}
}

// pullRoot reads big.bin of the state root from the fixture's remote.
func pullRoot(t *testing.T, f *gcFixture, root cas.ID) []byte {
	t.Helper()
	ctx := context.Background()
	db := newStore(t)
	r := f.reopen()
	var data []byte
	err := db.ReceiveObjects(ctx, func(objs *cas.Store) error {
		if err := receiveState(ctx, objs, r, root, Options{}, &Stats{}, newSizer(objs)); err != nil {
			return err
		}
		tr, err := objs.GetTree(ctx, root)
		if err != nil {
			return err
		}
		de, ok := tr.Lookup([]byte("tmp"))
		if !ok {
			return errors.New("no /tmp")
		}
		sub, err := objs.GetTree(ctx, de.Target)
		if err != nil {
			return err
		}
		fe, ok := sub.Lookup([]byte("big.bin"))
		if !ok {
			return errors.New("no big.bin")
		}
		m, err := objs.GetManifest(ctx, fe.Target)
		if err != nil {
			return err
		}
		for _, x := range m.Extents {
			_, b, err := objs.Get(ctx, x.ID)
			if err != nil {
				return err
			}
			data = append(data, b...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestGCConcurrentPushers: two pushers on different branches keep pushing
// while gc rounds run (a short grace, each pack and ref write preceded by
// a look at the marker); afterwards every ref's whole state pulls.
//
// The protocol needs the grace to exceed the longest write (from a push's
// look at the marker to its pack's index landing): a 2 s grace broke the
// closure once on a loaded CI machine (a tree offered, its manifest
// deleted), where a PUT can wait seconds on fsyncs. The grace here is
// several times the slowest PUT seen on such a machine, and the slowest
// is reported with any failure. (A closure broken the same way at this
// grace, with a 63 ms slowest PUT, was the final gc's copy of a condemned
// pack named as that pack and deleted with it: see
// TestGCCopyNamedAsCondemned; the 2 s failure may well have been that
// too.)
func TestGCConcurrentPushers(t *testing.T) {
	const grace = 6 * time.Second
	k := s3Kind(t)
	ctx := context.Background()
	old := markerWindow
	markerWindow = 0
	t.Cleanup(func() { markerWindow = old })
	f := newGCFixture(t, k)
	type pusher struct {
		db   *journal.DB
		dir  string
		root cas.ID
	}
	ps := []*pusher{{db: newStore(t)}, {db: newStore(t)}}
	for i, p := range ps {
		p.dir = filepath.Join(t.TempDir(), fmt.Sprintf("p%d", i))
		writeFile(t, filepath.Join(p.dir, "common.txt"), "shared by both pushers\n")
	}
	var wg sync.WaitGroup
	var gcRunning atomic.Bool
	var pushes, restarts atomic.Int64
	gcRunning.Store(true)
	errs := make(chan error, 16)
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			branch := fmt.Sprintf("b%d", i)
			// At least six pushes, and on while gc rounds run.
			for round := 0; round < 6 || (gcRunning.Load() && round < 40); round++ {
				randomFile(t, filepath.Join(p.dir, fmt.Sprintf("r%d.bin", round)), 64<<10)
				if round > 1 { // drop an older file: its chunks become garbage
					os.Remove(filepath.Join(p.dir, fmt.Sprintf("r%d.bin", round-2)))
				}
				if _, err := p.db.Branch(ctx, branch); errors.Is(err, journal.ErrBranchNotFound) {
					h, _ := p.db.Head(ctx, "main")
					if _, err := p.db.CreateBranch(ctx, branch, h); err != nil {
						errs <- err
						return
					}
				}
				st, err := workspace.Import(ctx, p.db, workspace.ImportOptions{Dir: p.dir, Branch: branch})
				if err != nil {
					errs <- err
					return
				}
				p.root = st.Snapshot.Root
				for try := 0; ; try++ {
					r := f.reopen().(*S3Remote)
					n := 0
					r.hook = func(point string) {
						if point == "before-setref" {
							n++
						}
					}
					_, err = Push(ctx, p.db, r, []string{branch}, Options{Force: true})
					pushes.Add(1)
					if n > 1 {
						restarts.Add(int64(n - 1))
					}
					if err == nil || try == 5 {
						break
					}
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", branch, err)
					return
				}
			}
		}()
	}
	var reps []*GCReport
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer gcRunning.Store(false)
		for i := 0; i < 3; i++ {
			rep, err := GC(ctx, f.reopen(), GCOptions{Grace: grace, Wait: true})
			if err != nil && !errors.Is(err, ErrRefChanged) {
				errs <- fmt.Errorf("gc: %w", err)
				return
			}
			reps = append(reps, rep)
		}
	}()
	wg.Wait()
	if d := time.Duration(k.requests.slowestPut.Load()); d >= grace/2 {
		t.Logf("the slowest PUT took %v, against a %v grace: the closure may break (see above)", d, grace)
	} else {
		t.Logf("the slowest PUT took %v", d)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	final := runGC(t, f.reopen(), GCOptions{Grace: 0})
	for i, rep := range reps {
		t.Logf("gc %d: %+v", i, *rep)
	}
	t.Logf("final gc: %+v", *final)
	t.Logf("%d pushes, %d started over because a gc round moved under them", pushes.Load(), restarts.Load())
	for i, p := range ps {
		checkPulled(t, f.reopen(), fmt.Sprintf("b%d", i), p.root, p.dir)
	}
	checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
	checkPulled(t, f.reopen(), "tmp", f.tmpRoot, f.tmpDir)
}

// TestGCFile: a store-file remote is collected by the store's own gc;
// pulls after it are complete, and a push whose remote was collected
// under it retries and lands complete.
func TestGCFile(t *testing.T) {
	k := fileKind()
	ctx := context.Background()
	f := newGCFixture(t, k)
	rep := runGC(t, f.reopen(), GCOptions{Grace: 0})
	if rep.File == nil || rep.Live == 0 {
		t.Fatalf("file gc: %+v", rep)
	}
	checkPulled(t, f.reopen(), "main", f.mainRoot, f.mainDir)
	checkPulled(t, f.reopen(), "tmp", f.tmpRoot, f.tmpDir)
	// A push whose remote handle predates a gc: SetRef refuses
	// (ErrGCRaced), Push retries and succeeds.
	r := f.reopen()
	runGC(t, f.reopen(), GCOptions{Grace: 0})
	db := newStore(t)
	dir := filepath.Join(t.TempDir(), "x")
	writeFile(t, filepath.Join(dir, "x.txt"), "x\n")
	root := importAs(t, db, dir, "x")
	if _, err := Push(ctx, db, r, []string{"x"}, Options{}); err != nil {
		t.Fatalf("push after a gc under it: %v", err)
	}
	checkPulled(t, f.reopen(), "x", root, dir)
}

// TestGCFetchAfterPackDeleted: a reader that loaded the indexes before a
// round deleted a pack (whose live objects were copied) gets a 404, reads
// the indexes again and finds the copies.
func TestGCFetchAfterPackDeleted(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	f := newGCFixture(t, k)
	r := f.reopen().(*S3Remote)
	if _, err := r.Has(ctx, []cas.ID{f.mainRoot}); err != nil { // loads the indexes
		t.Fatal(err)
	}
	stale := len(r.packs)
	rep := runGC(t, f.reopen(), GCOptions{Grace: 0})
	if rep.Deleted == 0 || rep.Rewritten == 0 {
		t.Fatalf("gc: %+v, want a mixed pack copied and deleted", rep)
	}
	checkPulled(t, r, "main", f.mainRoot, f.mainDir)
	if len(r.packs) == stale && rep.PacksAfter != stale {
		t.Fatalf("the reader kept its stale indexes (%d packs)", stale)
	}
}

// TestGCDeadPushDuringMark: a push that trusted a pack the round
// condemns, wrote its packs after the mark listed the packs and died
// before moving its ref: phase 2 walks its packs and rescues what they
// need, so a later push that finds the whole state "present" is right.
func TestGCDeadPushDuringMark(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	f := newGCFixture(t, k)
	db := newStore(t)
	dir := filepath.Join(t.TempDir(), "new")
	if err := os.CopyFS(dir, os.DirFS(f.tmpDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), pullRoot(t, f, f.oldTmp), 0o644); err != nil {
		t.Fatal(err)
	}
	root := importAs(t, db, dir, "new")
	// The push loads the indexes now, before the round.
	r := f.reopen().(*S3Remote)
	if _, err := r.Has(ctx, []cas.ID{root}); err != nil {
		t.Fatal(err)
	}
	pushed := false
	rep, err := GC(ctx, f.reopen(), GCOptions{Grace: 0, stop: func(step string) error {
		if step != "mark" || pushed {
			return nil
		}
		pushed = true
		pctx, cancel := context.WithCancel(ctx)
		r.hook = func(point string) {
			if point == "before-setref" {
				cancel() // dies before moving the ref
			}
		}
		st, err := Push(pctx, db, r, []string{"new"}, Options{})
		if err == nil {
			t.Error("the push survived its death")
		}
		if st.Bytes > 1<<20 {
			t.Errorf("the push sent %d bytes: it did not rely on the condemned big file", st.Bytes)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !pushed || rep.Rescued == 0 {
		t.Fatalf("gc: %+v, want a pack rescued for the dead push's packs", rep)
	}
	checkClosure(t, f.reopen().(*S3Remote))
	st, err := Push(ctx, db, f.reopen(), []string{"new"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Objects != 0 {
		t.Logf("the second push sent %d objects", st.Objects)
	}
	checkPulled(t, f.reopen(), "new", root, dir)
	runGC(t, f.reopen(), GCOptions{Grace: 0})
	checkPulled(t, f.reopen(), "new", root, dir)
}

// stateRaws lists, children first, the stored objects under root in db.
func stateRaws(t *testing.T, db *journal.DB, root cas.ID) []cas.Raw {
	t.Helper()
	ctx := context.Background()
	var out []cas.Raw
	seen := map[cas.ID]bool{}
	var visit func(id cas.ID, k cas.Kind)
	visit = func(id cas.ID, k cas.Kind) {
		if seen[id] {
			return
		}
		seen[id] = true
		raw, err := db.Objects().GetRaw(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		raw.Kind = k
		if k != cas.KindChunk {
			c, err := cas.Check(raw)
			if err != nil {
				t.Fatal(err)
			}
			c.Refs(func(id cas.ID, k cas.Kind, _ int64) error {
				visit(id, k)
				return nil
			})
		}
		out = append(out, raw)
	}
	visit(root, cas.KindTree)
	return out
}

// TestGCCopyNamedAsCondemned: a pack the round condemns (few of its bytes
// live) whose objects are all retained (a kept pack's dead tree needs the
// rest) is copied in its own order: byte for byte the same pack, under the
// same name. The round must not then delete the copy with the condemned
// pack (it did: the live manifest only that pack held was gone, and a
// kept dead tree's manifest too).
func TestGCCopyNamedAsCondemned(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	_, reopen := k.newRemote(t)
	db := newStore(t)
	// dead: a tree over a big file, no ref's; live: a small file and
	// common.txt, branch b's.
	deadDir := filepath.Join(t.TempDir(), "dead")
	randomFile(t, filepath.Join(deadDir, "big.bin"), 256<<10)
	dead := importAs(t, db, deadDir, "gone")
	liveDir := filepath.Join(t.TempDir(), "live")
	writeFile(t, filepath.Join(liveDir, "common.txt"), "shared\n")
	randomFile(t, filepath.Join(liveDir, "small.bin"), 32<<10)
	live := importAs(t, db, liveDir, "b")
	var common cas.ID
	var condemned, kept []cas.Raw
	for _, raw := range stateRaws(t, db, live) {
		if raw.Kind == cas.KindManifest && raw.Size < 64 {
			common = raw.ID
		}
	}
	if common.IsZero() {
		t.Fatal("no manifest for common.txt")
	}
	cst, err := db.Objects().GetRaw(ctx, common)
	if err != nil {
		t.Fatal(err)
	}
	cst.Kind = cas.KindManifest
	// The condemned pack: the dead file's chunks and manifest, then
	// common.txt's chunk and manifest (live, but a small part).
	for _, raw := range stateRaws(t, db, dead) {
		if raw.Kind != cas.KindTree {
			condemned = append(condemned, raw)
		}
	}
	cc, err := cas.Check(cst)
	if err != nil {
		t.Fatal(err)
	}
	cc.Refs(func(id cas.ID, k cas.Kind, _ int64) error {
		raw, err := db.Objects().GetRaw(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		raw.Kind = k
		condemned = append(condemned, raw)
		return nil
	})
	condemned = append(condemned, cst)
	// The kept pack: the rest of the live state, and the dead trees.
	in := map[cas.ID]bool{}
	for _, raw := range condemned {
		in[raw.ID] = true
	}
	for _, raw := range stateRaws(t, db, live) {
		if !in[raw.ID] {
			kept = append(kept, raw)
		}
	}
	for _, raw := range stateRaws(t, db, dead) {
		if raw.Kind == cas.KindTree && !in[raw.ID] {
			kept = append(kept, raw)
		}
	}
	r := reopen().(*S3Remote)
	if err := r.loadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	for _, objs := range [][]cas.Raw{condemned, kept} {
		if _, _, err := r.putPack(ctx, objs, make([]cas.ID, len(objs))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.SetRef(ctx, Ref{Branch: "b"}, live); err != nil {
		t.Fatal(err)
	}
	rep := runGC(t, reopen(), GCOptions{Grace: 0})
	if rep.Condemned != 1 || rep.Rewritten != 1 {
		t.Errorf("gc: %+v, want the one pack condemned and copied", rep)
	}
	checkPulled(t, reopen(), "b", live, liveDir)
	runGC(t, reopen(), GCOptions{Grace: 0})
	checkPulled(t, reopen(), "b", live, liveDir)
}

// TestGCPushResendsCondemnedPack: a push that finds the objects it sends
// only in a pack the round condemns sends them again, in the same order
// as the push that wrote that pack: byte for byte the same pack, under the
// same name. Written after the round's rescue read the refs, with its ref
// moved before the deletion, it must not be deleted as the condemned pack
// (it was: the pushed branch pointed at deleted objects).
func TestGCPushResendsCondemnedPack(t *testing.T) {
	k := s3Kind(t)
	ctx := context.Background()
	_, reopen := k.newRemote(t)
	db := newStore(t)
	dir := filepath.Join(t.TempDir(), "s")
	writeFile(t, filepath.Join(dir, "a.txt"), "state s\n")
	randomFile(t, filepath.Join(dir, "s.bin"), 64<<10)
	root := importAs(t, db, dir, "a")
	if got := importAs(t, db, dir, "c"); got != root {
		t.Fatalf("c at %s, a at %s", got.Short(), root.Short())
	}
	if _, err := Push(ctx, db, reopen(), []string{"a"}, Options{}); err != nil {
		t.Fatal(err)
	}
	// Branch a moves to an unrelated state: its first pack is all dead.
	other := newStore(t)
	odir := filepath.Join(t.TempDir(), "o")
	randomFile(t, filepath.Join(odir, "o.bin"), 64<<10)
	importAs(t, other, odir, "a")
	if _, err := Push(ctx, other, reopen(), []string{"a"}, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	pushed := false
	rep, err := GC(ctx, reopen(), GCOptions{Grace: 0, stop: func(step string) error {
		if step != "claim" || pushed {
			return nil
		}
		pushed = true
		if _, err := Push(ctx, db, reopen(), []string{"c"}, Options{}); err != nil {
			t.Errorf("push c: %v", err)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !pushed || rep.Deleted == 0 {
		t.Fatalf("gc: %+v, want the dead pack deleted after a push", rep)
	}
	checkClosure(t, reopen().(*S3Remote))
	checkPulled(t, reopen(), "c", root, dir)
}
