package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/merge"
	"github.com/artrt/art/workspace"
)

// twelve is twelve lines with line i replaced by repl[i].
func twelve(repl map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 12; i++ {
		if r, ok := repl[i]; ok {
			b.WriteString(r + "\n")
		} else {
			b.WriteString("line " + string(rune('a'+i-1)) + "\n")
		}
	}
	return b.String()
}

// TestPullMergeHost is the table of pull --merge: each case starts from a
// pushed workspace (a.txt, b.txt, c.txt, d/e.txt and the twelve-line m.txt;
// records not racy), changes the branch and the host, and merges. A refused
// merge leaves the host as it was; an applied one leaves the listed
// contents, and the paths left with the host's or a merged content out of
// the records the pull makes (ExportOptions.Written), every other path of
// the state in them.
func TestPullMergeHost(t *testing.T) {
	ctx := context.Background()
	branchRemove := func(p string) side {
		return func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				dir, err := tx.Resolve([]byte("ws"))
				if err != nil {
					return err
				}
				return tx.RemoveAll(dir.Ino, []byte(p))
			})
		}
	}
	branchChmod := func(p string, mode uint32) side {
		return func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				n, err := tx.Resolve([]byte("ws/" + p))
				if err != nil {
					return err
				}
				_, err = tx.SetAttr(n.Ino, journal.SetMode, journal.Attr{Mode: mode})
				return err
			})
		}
	}
	base := twelve(nil)
	agentM, hostM := twelve(map[int]string{2: "agent"}), twelve(map[int]string{11: "host"})
	clash := twelve(map[int]string{2: "host"})
	labels := merge.Labels{Ours: "host", Base: "base", Theirs: "main"}
	merged := string(merge.Text([]byte(base), []byte(hostM), []byte(agentM), merge.TextOptions{Labels: labels}).Merged)
	markers := merge.Text([]byte(base), []byte(clash), []byte(agentM), merge.TextOptions{Labels: labels})
	if markers.Conflicts != 1 || strings.Contains(merged, "<<<<<<<") {
		t.Fatalf("the test's texts do not merge as meant: %d conflicts,\n%s", markers.Conflicts, merged)
	}
	for _, tc := range []struct {
		name       string
		changes    []side
		markers    bool
		paths      string            // "action path" joined by "; "
		refused    bool              // ErrHostConflicts, host unchanged
		after      map[string]string // host contents after the pull ("<none>": absent)
		unrecorded []string          // state paths the pull must not record as in sync
		modes      map[string]os.FileMode
	}{
		{name: "no host changes: a plain pull", changes: []side{branchWrite("a.txt", "agent")},
			after: map[string]string{"a.txt": "agent"}},
		{name: "host edit, branch unchanged: kept", changes: []side{branchWrite("a.txt", "agent"), hostWrite("b.txt", "precious")},
			paths: "kept b.txt", after: map[string]string{"a.txt": "agent", "b.txt": "precious"}, unrecorded: []string{"b.txt"}},
		{name: "host new file and directory: kept", changes: []side{hostWrite("hostnew", "x"), hostWrite("nd/y", "y"), hostWrite("d/new", "n")},
			paths: "kept d/new; kept hostnew; kept nd", after: map[string]string{"hostnew": "x", "nd/y": "y", "d/new": "n"}},
		{name: "host deletion, branch unchanged: stays deleted", changes: []side{hostRemove("c.txt"), hostRemove("d")},
			paths: "kept c.txt; kept d", after: map[string]string{"c.txt": "<none>", "d/e.txt": "<none>"}, unrecorded: []string{"c.txt", "d", "d/e.txt"}},
		{name: "host deletion, branch edit: conflict", changes: []side{hostRemove("c.txt"), branchWrite("c.txt", "agent")},
			paths: "conflict c.txt", refused: true},
		{name: "host deletion, branch edit, markers: the deletion stays", changes: []side{hostRemove("c.txt"), branchWrite("c.txt", "agent"), branchWrite("a.txt", "agent")},
			markers: true, paths: "conflict c.txt", after: map[string]string{"c.txt": "<none>", "a.txt": "agent"}, unrecorded: []string{"c.txt"}},
		{name: "host edit, branch deletion: conflict", changes: []side{hostWrite("b.txt", "precious"), branchRemove("b.txt")},
			paths: "conflict b.txt", refused: true},
		{name: "host edit, branch deleted its directory: conflict", changes: []side{hostWrite("d/e.txt", "precious"), branchRemove("d")},
			paths: "conflict d/e.txt", refused: true},
		{name: "disjoint text edits: merged", changes: []side{branchWrite("m.txt", agentM), hostWrite("m.txt", hostM)},
			paths: "merged m.txt", after: map[string]string{"m.txt": merged}, unrecorded: []string{"m.txt"}},
		{name: "overlapping text edits: conflict", changes: []side{branchWrite("m.txt", agentM), hostWrite("m.txt", clash), hostWrite("b.txt", "precious")},
			paths: "kept b.txt; conflict m.txt", refused: true},
		{name: "overlapping text edits, markers: git's", changes: []side{branchWrite("m.txt", agentM), hostWrite("m.txt", clash)},
			markers: true, paths: "conflict m.txt", after: map[string]string{"m.txt": string(markers.Merged)}, unrecorded: []string{"m.txt"}},
		{name: "binary contents both changed: conflict", changes: []side{branchWrite("a.txt", "agent\x00"), hostWrite("a.txt", "host\x00")},
			paths: "conflict a.txt", refused: true},
		{name: "binary conflict, markers: the host's version stays", changes: []side{branchWrite("a.txt", "agent\x00"), hostWrite("a.txt", "host\x00")},
			markers: true, paths: "conflict a.txt", after: map[string]string{"a.txt": "host\x00"}, unrecorded: []string{"a.txt"}},
		{name: "host chmod, branch edit: both", changes: []side{branchWrite("a.txt", "agent"), hostChmod("a.txt", 0o600)},
			paths: "merged a.txt", after: map[string]string{"a.txt": "agent"}, unrecorded: []string{"a.txt"}, modes: map[string]os.FileMode{"a.txt": 0o600}},
		{name: "directory mode changed both ways, markers: the host's mode, the branch's files", changes: []side{hostChmod("d", 0o700), branchChmod("d", 0o750), branchWrite("d/e.txt", "agent")},
			markers: true, paths: "conflict d", after: map[string]string{"d/e.txt": "agent"}, unrecorded: []string{"d"}, modes: map[string]os.FileMode{"d": 0o700}},
		{name: "directory mode changed on the host: kept", changes: []side{hostChmod("d", 0o700), branchWrite("d/e.txt", "agent")},
			paths: "kept d", after: map[string]string{"d/e.txt": "agent"}, unrecorded: []string{"d"}, modes: map[string]os.FileMode{"d": 0o700}},
		{name: "host and branch made the same edit: nothing to merge", changes: []side{branchWrite("a.txt", "same"), hostWrite("a.txt", "same")},
			after: map[string]string{"a.txt": "same"}},
		{name: "added on both sides differently: conflict", changes: []side{hostWrite("n.txt", "host\n"), func(t *testing.T, db *journal.DB, ws string) {
			agent(t, db, "main", func(tx *journal.Tx) error {
				dir, err := tx.Resolve([]byte("ws"))
				if err != nil {
					return err
				}
				m, _, err := tx.Objects().PutFile(ctx, strings.NewReader("agent\n"))
				if err != nil {
					return err
				}
				_, err = tx.Create(dir.Ino, []byte("n.txt"), journal.Attr{Kind: cas.EntryFile, Mode: 0o644, Content: m, Size: 6})
				return err
			})
		}}, paths: "conflict n.txt", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, ws := pulledWorkspace(t)
			write(t, filepath.Join(ws, "m.txt"), []byte(base), 0o644)
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(ws, "m.txt"), old, old); err != nil {
				t.Fatal(err)
			}
			if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: ws, Capture: true}); err != nil {
				t.Fatal(err)
			}
			for _, ch := range tc.changes {
				ch(t, db, ws)
			}
			before := describe(t, ws)
			st, err := db.Resolve(ctx, "main", "main")
			if err != nil {
				t.Fatal(err)
			}
			written := map[string]journal.StatCache{}
			plan, err := workspace.PlanExport(ctx, db.Objects(), workspace.ExportOptions{Dir: ws, State: st,
				Written: func(p string, sc journal.StatCache) { written[strings.TrimPrefix(p, "/ws/")] = sc }})
			if err != nil {
				t.Fatal(err)
			}
			defer plan.Close()
			hm, err := plan.MergeHost(ctx, db, workspace.HostMergeOptions{Branch: "main", Markers: tc.markers, Labels: labels})
			if tc.refused != errors.Is(err, workspace.ErrHostConflicts) || (err != nil && !tc.refused) {
				t.Fatalf("MergeHost: %v, want refused %v", err, tc.refused)
			}
			var got []string
			for _, p := range hm.Paths {
				got = append(got, p.Action+" "+p.Path)
			}
			if g := strings.Join(got, "; "); g != tc.paths {
				t.Errorf("paths %q, want %q", g, tc.paths)
			}
			if tc.refused {
				if after := describe(t, ws); !reflect.DeepEqual(after, before) {
					t.Errorf("a refused merge changed the host:\n%v\nwas\n%v", after, before)
				}
				return
			}
			if _, err := plan.Apply(); err != nil {
				t.Fatal(err)
			}
			for p, want := range tc.after {
				b, err := os.ReadFile(filepath.Join(ws, p))
				got := string(b)
				if errors.Is(err, os.ErrNotExist) {
					got = "<none>"
				} else if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("host %s = %q, want %q", p, got, want)
				}
			}
			for p, m := range tc.modes {
				if fi, err := os.Stat(filepath.Join(ws, p)); err != nil || fi.Mode().Perm() != m {
					t.Errorf("%s mode %v (%v), want the host's %v", p, fi.Mode(), err, m)
				}
			}
			for _, p := range tc.unrecorded {
				// Recorded as the state's entry without a stat: nothing
				// proves the host's content there unchanged.
				if sc, ok := written[p]; ok && (sc.Ino != 0 || sc.Size != 0 || !sc.Racy && sc.Kind != cas.EntryDir) {
					t.Errorf("%s recorded as pulled (%+v), but the host holds its own or a merged content", p, sc)
				}
			}
			// Every path of the state is recorded.
			for _, p := range []string{"a.txt", "b.txt", "c.txt", "d", "d/e.txt", "m.txt"} {
				if _, ok := written[p]; !ok {
					t.Errorf("%s not recorded", p)
				}
			}
		})
	}
}

// TestPullMergeHostEditedWhileMerging: a host file edited between the
// merge and its writing is not written over; nothing is written.
func TestPullMergeHostEditedWhileMerging(t *testing.T) {
	ctx := context.Background()
	db, ws := pulledWorkspace(t)
	agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/a.txt", "a\nagent\n") })
	agent(t, db, "main", func(tx *journal.Tx) error { return setContent(ctx, tx, "ws/b.txt", "b by agent\n") })
	write(t, filepath.Join(ws, "a.txt"), []byte("host\na\n"), 0o644)
	st, err := db.Resolve(ctx, "main", "main")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := workspace.PlanExport(ctx, db.Objects(), workspace.ExportOptions{Dir: ws, State: st})
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	hm, err := plan.MergeHost(ctx, db, workspace.HostMergeOptions{Branch: "main", Markers: true})
	if err != nil || len(hm.Paths) != 1 || hm.Paths[0].Path != "a.txt" {
		t.Fatalf("MergeHost: %+v, %v; want a.txt merged", hm, err)
	}
	write(t, filepath.Join(ws, "a.txt"), []byte("host\na\nmore\n"), 0o644)
	before := describe(t, ws)
	if _, err := plan.Apply(); err == nil || !strings.Contains(err.Error(), "changed on the host while merging") {
		t.Fatalf("Apply after a host edit: %v, want refused", err)
	}
	if after := describe(t, ws); !reflect.DeepEqual(after, before) {
		t.Errorf("the refused merge changed the host:\n%v\nwas\n%v", after, before)
	}
}
