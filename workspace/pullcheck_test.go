package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/workspace"
)

// side is one change a pull test makes before the pull: to the branch
// (as an agent would) or to the host directory ws.
type side func(t *testing.T, db *journal.DB, ws string)

func branchWrite(p, data string) side {
	return func(t *testing.T, db *journal.DB, ws string) {
		agent(t, db, "main", func(tx *journal.Tx) error { return setContent(context.Background(), tx, "ws/"+p, data) })
	}
}

func hostWrite(p, data string) side {
	return func(t *testing.T, db *journal.DB, ws string) { write(t, filepath.Join(ws, p), []byte(data), 0o644) }
}

func hostRemove(p string) side {
	return func(t *testing.T, db *journal.DB, ws string) {
		if err := os.RemoveAll(filepath.Join(ws, p)); err != nil {
			t.Fatal(err)
		}
	}
}

func hostChmod(p string, m os.FileMode) side {
	return func(t *testing.T, db *journal.DB, ws string) {
		if err := os.Chmod(filepath.Join(ws, p), m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPullPlanHostChanges is the table of what a pull of the branch head
// plans (the host paths it changes) and which of them the host changed
// since the last capture or pull (what pull -m refuses to write over):
// each case starts from a pushed workspace (a.txt, b.txt, c.txt, d/e.txt;
// records not racy), changes the branch and the host, and plans the pull.
func TestPullPlanHostChanges(t *testing.T) {
	ctx := context.Background()
	branchCreate := func(p, data string) side {
		return func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				dir, err := tx.Resolve([]byte("ws"))
				if err != nil {
					return err
				}
				m, _, err := tx.Objects().PutFile(ctx, strings.NewReader(data))
				if err != nil {
					return err
				}
				_, err = tx.Create(dir.Ino, []byte(p), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: m, Size: int64(len(data))})
				return err
			})
		}
	}
	branchDirToFile := func(p string) side {
		return func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				dir, err := tx.Resolve([]byte("ws"))
				if err != nil {
					return err
				}
				if err := tx.RemoveAll(dir.Ino, []byte(p)); err != nil {
					return err
				}
				m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("now a file"))
				if err != nil {
					return err
				}
				_, err = tx.Create(dir.Ino, []byte(p), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: m, Size: 10})
				return err
			})
		}
	}
	for _, tc := range []struct {
		name    string
		changes []side
		touches string // "op path" joined by "; "
		host    string // "path what" joined by "; "
	}{
		{name: "nothing changed"},
		{name: "agent edit only", changes: []side{branchWrite("a.txt", "agent")},
			touches: "replace a.txt"},
		{name: "host edit the pull would revert", changes: []side{hostWrite("b.txt", "precious")},
			touches: "replace b.txt", host: "b.txt changed"},
		{name: "host file the state lacks", changes: []side{hostWrite("hostnew", "x")},
			touches: "delete hostnew", host: "hostnew new"},
		{name: "host directory the state lacks: named once", changes: []side{hostWrite("nd/x", "1"), hostWrite("nd/y/z", "2")},
			touches: "delete nd", host: "nd new"},
		{name: "host file inside a recorded directory", changes: []side{hostWrite("d/new", "n")},
			touches: "delete d/new", host: "d/new new"},
		{name: "host deletion the pull would undo", changes: []side{hostRemove("c.txt")},
			touches: "create c.txt", host: "c.txt deleted"},
		{name: "host and branch made the same edit", changes: []side{branchWrite("a.txt", "same"), hostWrite("a.txt", "same")}},
		{name: "host chmod the pull would revert", changes: []side{hostChmod("a.txt", 0o600)},
			touches: "mode a.txt", host: "a.txt changed"},
		{name: "agent file, host file at the same name", changes: []side{branchCreate("n.txt", "agent"), hostWrite("n.txt", "host")},
			touches: "replace n.txt", host: "n.txt new"},
		{name: "host file in a directory the state replaces with a file", changes: []side{branchDirToFile("d"), hostWrite("d/new", "n")},
			touches: "replace d", host: "d/new new"},
		{name: "the case-1 script", changes: []side{branchWrite("a.txt", "a\nagent\n"), hostWrite("b.txt", "b\nprecious\n"), hostWrite("hostnew", "x\n")},
			touches: "delete hostnew; replace a.txt; replace b.txt", host: "b.txt changed; hostnew new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, ws := pulledWorkspace(t)
			for _, ch := range tc.changes {
				ch(t, db, ws)
			}
			before := describe(t, ws)
			plan := planPull(t, db, ws)
			defer plan.Close()
			var touches []string
			for _, x := range plan.Touches() {
				touches = append(touches, x.Op.String()+" "+x.Path)
			}
			if got := strings.Join(touches, "; "); got != tc.touches {
				t.Errorf("touches %q, want %q", got, tc.touches)
			}
			hc, err := plan.HostChanges(ctx, db, "main")
			if err != nil {
				t.Fatal(err)
			}
			var host []string
			for _, h := range hc {
				host = append(host, h.Path+" "+h.What)
			}
			if got := strings.Join(host, "; "); got != tc.host {
				t.Errorf("host changes %q, want %q", got, tc.host)
			}
			if after := describe(t, ws); !reflect.DeepEqual(after, before) {
				t.Errorf("planning changed the host:\n%v\nwas\n%v", after, before)
			}
		})
	}
}

// pulledWorkspace pushes a workspace whose files are an hour old (their
// records prove them, not racy).
func pulledWorkspace(t *testing.T) (*journal.DB, string) {
	t.Helper()
	db, _ := openDB(t)
	ws := filepath.Join(t.TempDir(), "ws")
	for p, data := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "d/e.txt": "e\n"} {
		write(t, filepath.Join(ws, p), []byte(data), 0o644)
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(ws, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := workspace.Import(context.Background(), db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
		t.Fatal(err)
	}
	return db, ws
}

func planPull(t *testing.T, db *journal.DB, ws string) *workspace.ExportPlan {
	t.Helper()
	ctx := context.Background()
	st, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := workspace.PlanExport(ctx, db.Objects(), workspace.ExportOptions{Dir: ws, State: st})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestPullHostChangesRacyAndOtherBranches: a racy record is compared by
// content (an equal stat within the timestamp granularity proves
// nothing: an edit that kept size and mtime is still seen), and a host
// holding what another branch's pull wrote is not a host change.
func TestPullHostChangesRacyAndOtherBranches(t *testing.T) {
	ctx := context.Background()
	t.Run("racy record, same size and mtime, other content", func(t *testing.T) {
		db, _ := openDB(t)
		ws := filepath.Join(t.TempDir(), "ws")
		write(t, filepath.Join(ws, "a.txt"), []byte("aaaa"), 0o644)
		write(t, filepath.Join(ws, "b.txt"), []byte("bbbb"), 0o644)
		if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
			t.Fatal(err)
		}
		// The host's edit keeps size and mtime (as one inside the
		// timestamp granularity could); the ctime moves, but the record
		// is racy anyway: only the content can tell.
		fi, err := os.Stat(filepath.Join(ws, "b.txt"))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(ws, "b.txt"), []byte("BBBB"), 0o644)
		if err := os.Chtimes(filepath.Join(ws, "b.txt"), fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/a.txt", "agent") })
		agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/b.txt", "agnt") })
		plan := planPull(t, db, ws)
		defer plan.Close()
		hc, err := plan.HostChanges(ctx, db, "main")
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(hc); got != "[{b.txt changed}]" {
			t.Errorf("host changes %s, want b.txt changed (a.txt is racy but equal)", got)
		}
	})
	t.Run("host holds another branch's pull", func(t *testing.T) {
		db, ws := pulledWorkspace(t)
		head, err := db.Resolve(ctx, "main", "main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateBranch(ctx, "try", head); err != nil {
			t.Fatal(err)
		}
		if err := db.InheritImportCache(ctx, "try", "main"); err != nil {
			t.Fatal(err)
		}
		agent(t, db, "try", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/a.txt", "try's") })
		agent(t, db, "try", func(tx *journal.Tx) error { return tx.Unlink(mustResolve(t, tx, "ws").Ino, []byte("c.txt")) })
		pullInto(t, db, "try", ws)
		// Back to main: a.txt is try's (main's records say "a"), c.txt is
		// gone (main's records have it): both are in the store.
		plan := planPull(t, db, ws)
		defer plan.Close()
		hc, err := plan.HostChanges(ctx, db, "main")
		if err != nil {
			t.Fatal(err)
		}
		if len(hc) != 0 {
			t.Errorf("host changes %v, want none: the host holds branch try's pull", hc)
		}
		if got := len(plan.Touches()); got != 2 {
			t.Errorf("%d touches, want 2 (a.txt back, c.txt back): %v", got, plan.Touches())
		}
	})
}

func mustResolve(t *testing.T, tx *journal.Tx, p string) journal.Node {
	t.Helper()
	n, err := tx.Resolve([]byte(p))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCaptureNothingChangedRecordsNothing: a capture (or push -m) whose
// host is unchanged since the last import changes nothing in the branch,
// whatever the branch did since: the read-only check says so without the
// push mark, and the full import with SkipUnchanged records no op and no
// snapshot - also when a racy record makes it read a file again. A host
// edit is still taken.
func TestCaptureNothingChangedRecordsNothing(t *testing.T) {
	ctx := context.Background()
	db, ws := pulledWorkspace(t)
	agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/a.txt", "agent") })
	if _, err := db.TakeSnapshot(ctx, "main", "after the agent"); err != nil {
		t.Fatal(err)
	}
	head, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	ops := func() int {
		o, err := db.Ops(ctx, journal.LogQuery{Branch: "main"})
		if err != nil {
			t.Fatal(err)
		}
		return len(o)
	}
	n := ops()
	st, ok, err := workspace.Unchanged(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true})
	if err != nil || !ok || !st.NothingChanged || st.Snapshot.ID != head.Snapshot {
		t.Fatalf("Unchanged(capture) = %+v, %v, %v; want nothing changed at %s", st, ok, err, head.Snapshot.Short())
	}
	// A racy record: the file is read again, found equal, and nothing is
	// recorded but the record itself.
	workspace.SetRacyWindow(t, 2*time.Hour)
	agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/b.txt", "agent b") })
	if _, err := db.TakeSnapshot(ctx, "main", "after the agent"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a.txt", "b.txt", "c.txt", "d/e.txt"} {
		if err := os.Chmod(filepath.Join(ws, p), 0o644); err != nil { // a new ctime: read again
			t.Fatal(err)
		}
	}
	capture(t, db, ws) // without SkipUnchanged: an op, a snapshot; the records now racy
	n = ops()
	head, _ = db.Resolve(ctx, "main", "main")
	if _, ok, _ := workspace.Unchanged(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); ok {
		t.Fatal("Unchanged trusted racy records")
	}
	st, err = workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, SkipUnchanged: true})
	if err != nil || !st.NothingChanged || st.Snapshot.ID != head.Snapshot || st.BytesRead == 0 {
		t.Fatalf("capture of an unchanged host: %+v, %v; want nothing changed at %s, the racy files read", st, err, head.Snapshot.Short())
	}
	if got := ops(); got != n {
		t.Fatalf("%d ops after an unchanged capture, want %d", got, n)
	}
	if after, _ := db.Resolve(ctx, "main", "main"); after.Seq != head.Seq {
		t.Fatalf("the head moved: @%d, was @%d", after.Seq, head.Seq)
	}
	if got := readStore(t, db, "main", "ws/b.txt"); got != "agent b" {
		t.Fatalf("ws/b.txt = %q, want the agent's", got)
	}
	n = ops() // (readStore reads through an op of its own)
	write(t, filepath.Join(ws, "c.txt"), []byte("host edit"), 0o644)
	st, err = workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true, SkipUnchanged: true})
	if err != nil || st.NothingChanged || ops() != n+1 {
		t.Fatalf("capture of a host edit: %+v, %v, %d ops (want %d)", st, err, ops(), n+1)
	}
	if got := readStore(t, db, "main", "ws/c.txt"); got != "host edit" {
		t.Fatalf("ws/c.txt = %q, want the host's edit", got)
	}
}
