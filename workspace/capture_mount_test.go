package workspace_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/workspace"
)

// mountScript is a random batch of agent operations, as shell commands
// run in a child process inside the mounted workspace (the test process
// never touches the mount itself). A command that does not apply fails
// and is ignored.
func (m *modelRun) mountScript(n int) string {
	var cmds []string
	for i := 0; i < n; i++ {
		p := m.randPath()
		q := m.randPath()
		switch m.rng.Intn(8) {
		case 0, 1:
			cmds = append(cmds, fmt.Sprintf("printf %%s %s > %s", m.content("b"), p))
		case 2:
			cmds = append(cmds, "rm -rf "+p)
		case 3:
			cmds = append(cmds, fmt.Sprintf("mv -T %s %s", p, q))
		case 4:
			cmds = append(cmds, "mkdir "+p)
		case 5:
			mode := []string{"644", "600", "755", "700"}[m.rng.Intn(4)]
			cmds = append(cmds, fmt.Sprintf("[ -L %s ] || chmod %s %s", p, mode, p))
		case 6:
			cmds = append(cmds, fmt.Sprintf("ln -s %s %s", m.content("l"), p))
		case 7:
			cmds = append(cmds, fmt.Sprintf("[ -d %s ] && rm -rf %s && printf %%s %s > %s", p, p, m.content("b"), p))
		}
		m.step++
	}
	return strings.Join(cmds, " 2>/dev/null; ") + " 2>/dev/null; true"
}

// TestCaptureModelMounted is TestCaptureModel with the agent's side done
// through a real overlay mount of the branch (over the host workspace as
// its lower layer, as a session has it), a capture before every mount:
// host edits, capture, mount, agent edits, unmount, and again.
func TestCaptureModelMounted(t *testing.T) {
	testutil.RequireFUSE(t)
	rounds := 250
	if testing.Short() {
		rounds = 20
	}
	for _, seed := range []int64{7, 8, 9} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := context.Background()
			db, _ := openDB(t)
			base := t.TempDir()
			m := &modelRun{t: t, rng: rand.New(rand.NewSource(seed)), db: db, ws: filepath.Join(base, "ws")}
			workspace.SetClock(t, func() time.Time { return time.Now().Add(m.clockAt) })
			mnt := filepath.Join(base, "mnt")
			for _, d := range []string{m.ws, mnt} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 6; i++ {
				m.hostOp()
			}
			if _, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: m.ws}); err != nil {
				t.Fatal(err)
			}
			last := hostTree(t, m.ws)
			steps, conflicts, agentRounds := 0, 0, 0
			for round := 0; round < rounds; round++ {
				for i := m.rng.Intn(8); i > 0; i-- {
					m.hostOp()
					m.step++
				}
				host, branch := hostTree(t, m.ws), branchTree(t, db)
				want, blocked := expectCapture(last, host, branch)
				m.clockAt = 0
				if m.rng.Intn(3) == 0 {
					m.clockAt = time.Hour
				}
				m.capSec = time.Now().Truncate(time.Second)
				st, err := workspace.Import(ctx, db, workspace.ImportOptions{Branch: "main", Dir: m.ws, Capture: true})
				if err != nil {
					t.Fatal(err)
				}
				conflicts += st.Conflicts
				m.log = append(m.log, fmt.Sprintf("%d capture (clock +%s): %v", m.step, m.clockAt, st.ConflictList))
				if d := diffTrees(want, branchTree(t, db)); len(d) > 0 {
					t.Fatalf("seed %d round %d: the branch after the capture differs from the model:\n%s\n\nlast steps:\n%s",
						seed, round, strings.Join(d, "\n"), strings.Join(m.log[max(0, len(m.log)-30):], "\n"))
				}
				next := hostTree(t, m.ws)
				for p := range blocked {
					if e, ok := last[p]; ok {
						next[p] = e
					} else {
						delete(next, p)
					}
				}
				last = next

				// The session: the branch mounted over the host workspace.
				before := branchTree(t, db)
				fsys, err := overlay.Mount(ctx, mnt, overlay.Options{Branch: "main", DB: db, Lower: m.ws, UpperDir: filepath.Join(base, "upper")})
				if err != nil {
					t.Fatal(err)
				}
				script := m.mountScript(1 + m.rng.Intn(12))
				m.log = append(m.log, fmt.Sprintf("%d agent: %s", m.step, script))
				cmd := exec.Command("sh", "-c", script)
				cmd.Dir = path.Join(mnt, "ws")
				out, err := cmd.CombinedOutput()
				if uerr := fsys.Unmount(ctx); uerr != nil {
					t.Fatalf("unmount: %v", uerr)
				}
				if err != nil {
					t.Fatalf("agent script: %v: %s", err, out)
				}
				if len(diffTrees(before, branchTree(t, db))) > 0 {
					agentRounds++
				}
				steps = m.step
			}
			if conflicts == 0 || agentRounds < rounds/3 {
				t.Fatalf("%d rounds, %d conflicts, %d in which the agent changed the branch: the sequence does not test the rule",
					rounds, conflicts, agentRounds)
			}
			t.Logf("%d rounds (%d changing the branch through the mount), %d steps, %d conflicts", rounds, agentRounds, steps, conflicts)
		})
	}
}
