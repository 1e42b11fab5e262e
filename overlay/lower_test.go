package overlay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/workspace"
)

// mountLower captures host dir ws into a store and mounts it with ws as
// the lower layer; remount reuses the store.
type lowerSetup struct {
	t      *testing.T
	dbPath string
	ws     string
	mnt    string
	db     *journal.DB
	fsys   *overlay.FS
	prime  bool // mount with Options.Prime
}

func newLower(t *testing.T, files map[string]string) *lowerSetup {
	testutil.RequireFUSE(t)
	base := t.TempDir()
	s := &lowerSetup{t: t, dbPath: filepath.Join(base, "s.db"), ws: filepath.Join(base, "ws"), mnt: filepath.Join(base, "mnt")}
	for p, c := range files {
		full := filepath.Join(s.ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Old mtimes: outside import's racy-clean window, so the stat cache
	// (and with it lower reads) applies.
	filepath.Walk(s.ws, func(p string, _ os.FileInfo, _ error) error {
		return os.Chtimes(p, testTime, testTime)
	})
	os.Mkdir(s.mnt, 0o755)
	s.mount(true)
	t.Cleanup(func() { s.unmount() })
	return s
}

func (s *lowerSetup) mount(capture bool) {
	ctx := context.Background()
	db, err := journal.Open(ctx, s.dbPath, journal.Options{Create: true})
	if err != nil {
		s.t.Fatal(err)
	}
	if capture {
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: s.ws}); err != nil {
			s.t.Fatal(err)
		}
	}
	fsys, err := overlay.Mount(ctx, s.mnt, overlay.Options{Branch: "main", DB: db, Lower: s.ws, Prime: s.prime})
	if err != nil {
		s.t.Fatal(err)
	}
	s.db, s.fsys = db, fsys
}

func (s *lowerSetup) unmount() {
	if s.fsys == nil {
		return
	}
	if err := s.fsys.Unmount(context.Background()); err != nil {
		s.t.Errorf("unmount: %v", err)
	}
	s.db.Close()
	s.fsys = nil
}

func (s *lowerSetup) remount() { s.unmount(); s.mount(false) }

func (s *lowerSetup) read(p string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.mnt, "ws", p))
	if err != nil {
		s.t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func TestLowerLayer(t *testing.T) {
	s := newLower(t, map[string]string{
		"a.txt": "lower a\n", "b.txt": "lower b\n", "dir/x": "x\n", "dir/sub/y": "y\n", "gone/z": "z\n", "empty/.keep": "",
	})
	if got := s.read("a.txt"); got != "lower a\n" {
		t.Fatalf("a.txt = %q", got)
	}
	if st := s.fsys.Stats(); st.LowerOpens != 1 || st.Copies != 0 {
		t.Fatalf("reading an unmodified lower file: %+v, want 1 lower open and no copy", st)
	}
	// The host changes a file after the capture: the mount keeps serving
	// the captured bytes (every snapshot is self-contained).
	if err := os.WriteFile(filepath.Join(s.ws, "b.txt"), []byte("host changed b after capture\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := s.read("b.txt"); got != "lower b\n" {
		t.Fatalf("b.txt after a host change = %q, want the captured content", got)
	}
	if st := s.fsys.Stats(); st.LowerOpens != 1 || st.StoreReads == 0 {
		t.Fatalf("reading a lower file changed on the host: %+v, want it read from the store", st)
	}
	m := func(p string) string { return filepath.Join(s.mnt, "ws", p) }
	// Edit a lower file, rename and remove lower files and directories.
	if err := os.WriteFile(m("a.txt"), []byte("edited in the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m("dir"), m("moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(m("gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m("empty/.keep")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m("empty")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m("gone"), 0o755); err != nil { // re-created name: no old content
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if got := s.read("a.txt"); got != "edited in the mount\n" {
			t.Fatalf("%s: a.txt = %q", when, got)
		}
		if got := s.read("moved/sub/y"); got != "y\n" {
			t.Fatalf("%s: moved/sub/y = %q", when, got)
		}
		for _, p := range []string{"dir", "empty", "gone/z"} {
			if _, err := os.Lstat(m(p)); !os.IsNotExist(err) {
				t.Fatalf("%s: %s exists (%v)", when, p, err)
			}
		}
		if ents, err := os.ReadDir(m("gone")); err != nil || len(ents) != 0 {
			t.Fatalf("%s: re-created gone/ = %v %v, want empty", when, ents, err)
		}
	}
	check("mounted")
	fi, err := os.Stat(m("."))
	if err != nil {
		t.Fatal(err)
	}
	dirMTime := fi.ModTime()
	// The host workspace is untouched.
	if b, _ := os.ReadFile(filepath.Join(s.ws, "a.txt")); string(b) != "lower a\n" {
		t.Fatalf("host a.txt changed: %q", b)
	}
	s.remount()
	check("after remount")
	if fi, err := os.Stat(m(".")); err != nil || !fi.ModTime().Equal(dirMTime) {
		t.Fatalf("directory mtime after remount: %v, want %v (%v)", fi.ModTime(), dirMTime, err)
	}
	if rep, err := s.db.Verify(context.Background(), journal.VerifyOptions{Rebuild: true}); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// testTime is well outside import's racy-clean window.
var testTime = time.Now().Add(-time.Hour)

func TestJournalWrites(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	dir := t.TempDir()
	db, err := journal.Open(ctx, filepath.Join(dir, "s.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	fsys, err := overlay.Mount(ctx, mnt, overlay.Options{Branch: "main", DB: db, JournalWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(mnt, "log"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("hello "), 0)
	f.WriteAt([]byte("world"), 6)
	f.Close()
	if err := fsys.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(ctx, journal.EventQuery{Branch: "main", Path: []byte("log")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.Kind != journal.EvWriteData {
			continue
		}
		var b bytes.Buffer
		if _, err := db.Objects().ReadFile(ctx, e.Attr.Content, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d+%d:%s", e.Ranges[0].Off, e.Ranges[0].Len, b.String()))
	}
	if want := "0+6:hello ,6+5:world"; strings.Join(got, ",") != want {
		t.Fatalf("write records %q, want %q", got, want)
	}
}

// TestLowerRecordOnce checks that a read-only open asks for no import
// record of its own for a file from the branch (its parent's records,
// read when the file's node was made, hold it): a file written in an
// earlier session (no record: served from the store) and a captured one
// (served from the host file), each opened three times, cost no record
// query, nor does the captured one renamed in its directory (no record
// at its new path: from the store). Moved to another directory, it asks
// once for its new path's record.
func TestLowerRecordOnce(t *testing.T) {
	s := newLower(t, map[string]string{"a.txt": "lower a\n", "sub/keep.txt": "keep\n"})
	if err := os.WriteFile(filepath.Join(s.mnt, "ws", "w.txt"), []byte("written in the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.remount() // w.txt is now only in the store
	// An open beside a handle of the file whose RELEASE (sent by the
	// kernel after close returned) is still on its way is not served from
	// the host file and asks nothing: counted releases let the test wait.
	var released atomic.Int64
	defer overlay.OnReleaseDone(func(int64) { released.Add(1) })()
	opened := int64(0)
	settled := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); released.Load() < opened; {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d releases arrived", released.Load(), opened)
			}
			time.Sleep(time.Millisecond)
		}
	}
	before := s.fsys.Stats()
	for range 3 {
		if got := s.read("a.txt"); got != "lower a\n" {
			t.Fatalf("a.txt = %q", got)
		}
		if got := s.read("w.txt"); got != "written in the mount\n" {
			t.Fatalf("w.txt = %q", got)
		}
		opened += 2
		settled()
	}
	st := s.fsys.Stats()
	if d := st.LowerChecks - before.LowerChecks; d != 0 {
		t.Errorf("%d import record queries for two files of the branch opened three times each, want 0", d)
	}
	if d := st.LowerOpens - before.LowerOpens; d != 3 {
		t.Errorf("%d lower opens of a.txt, want 3", d)
	}
	mv := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(s.mnt, "ws", from), filepath.Join(s.mnt, "ws", to)); err != nil {
			t.Fatal(err)
		}
	}
	mv("a.txt", "b.txt")
	for range 2 {
		if got := s.read("b.txt"); got != "lower a\n" {
			t.Fatalf("b.txt = %q", got)
		}
		opened++
		settled()
	}
	st2 := s.fsys.Stats()
	if d := st2.LowerChecks - st.LowerChecks; d != 0 {
		t.Errorf("%d import record queries for a file renamed in its directory, want 0", d)
	}
	if d := st2.LowerOpens - st.LowerOpens; d != 0 {
		t.Errorf("%d lower opens of b.txt, which the import did not record there, want 0", d)
	}
	mv("b.txt", "sub/moved.txt")
	for range 2 {
		if got := s.read("sub/moved.txt"); got != "lower a\n" {
			t.Fatalf("sub/moved.txt = %q", got)
		}
		opened++
		settled()
	}
	st3 := s.fsys.Stats()
	if d := st3.LowerChecks - st2.LowerChecks; d != 1 {
		t.Errorf("%d import record queries for a file moved to another directory and opened twice, want 1", d)
	}
	if d := st3.LowerOpens - st2.LowerOpens; d != 0 {
		t.Errorf("%d lower opens of sub/moved.txt, want 0", d)
	}
	if st.StoreReads == before.StoreReads {
		t.Error("w.txt was not read from the store")
	}
}

// TestLowerMadeHereNoRecord: a file made in the session is never the
// host's file, so its read-only opens ask for no import record (a
// same-session no-op go install opened ~2,860 build-cache entries the
// session wrote, each once a query) - even when its name and bytes are
// a captured file's, after that one was removed - and read back what was
// written.
func TestLowerMadeHereNoRecord(t *testing.T) {
	s := newLower(t, map[string]string{"a.txt": "lower a\n"})
	m := func(p string) string { return filepath.Join(s.mnt, "ws", p) }
	if err := os.WriteFile(m("new.txt"), []byte("made in the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m("a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m("a.txt"), []byte("lower a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := s.fsys.Stats()
	for range 3 {
		if got := s.read("new.txt"); got != "made in the mount\n" {
			t.Fatalf("new.txt = %q", got)
		}
		if got := s.read("a.txt"); got != "lower a\n" {
			t.Fatalf("a.txt = %q", got)
		}
	}
	st := s.fsys.Stats()
	if d := st.LowerChecks - before.LowerChecks; d != 0 {
		t.Errorf("%d import record queries for two files made in the session, opened three times each, want 0", d)
	}
	if d := st.LowerOpens - before.LowerOpens; d != 0 {
		t.Errorf("%d lower opens of files made in the session, want 0", d)
	}
	s.remount() // from the store now, made in an earlier session
	for range 2 {
		if got := s.read("new.txt"); got != "made in the mount\n" {
			t.Fatalf("new.txt after remount = %q", got)
		}
		if got := s.read("a.txt"); got != "lower a\n" {
			t.Fatalf("a.txt after remount = %q", got)
		}
	}
}
