package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLoopKeepsBothSides is issue 13's loop through real sessions:
// every round the user edits keep.txt on the host right before art run
// (inside the capture's racy window), and the agent deletes a file and
// renames a file and a directory. Over 20 rounds none of the agent's
// deletes or renames is undone and no host edit is dropped. The last
// round's agent also edits keep.txt, so the next capture finds both sides
// changed it: the summary line must say which version it took.
func TestRunLoopKeepsBothSides(t *testing.T) {
	ws, db := overlayWorkspace(t)
	for i := 0; i < 20; i++ {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), "f\n")
		writeFile(t, filepath.Join(ws, fmt.Sprintf("d%d", i), "a.go"), "a\n")
	}
	if os.Geteuid() == 0 { // the sandbox's uid must be able to rename them
		filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 1000, 1000) })
	}
	const rounds = 20
	for round := 0; round < rounds; round++ {
		host := fmt.Sprintf("host %d\n", round)
		writeFile(t, filepath.Join(ws, "keep.txt"), host)
		if os.Geteuid() == 0 {
			os.Chown(filepath.Join(ws, "keep.txt"), 1000, 1000)
		}
		script := fmt.Sprintf(`cd ~/ws && test "$(cat keep.txt)" = %q && rm main.py 2>/dev/null; mv f%d.txt g%d.txt && mv d%d e%d && ls`,
			strings.TrimSuffix(host, "\n"), round, round, round, round)
		if round == rounds-1 {
			script += " && echo agent > keep.txt"
		}
		r := mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "sh", "-c", script)
		for j := 0; j <= round; j++ {
			for _, gone := range []string{fmt.Sprintf("f%d.txt", j), fmt.Sprintf("d%d", j), "main.py"} {
				if strings.Contains("\n"+r.stdout, "\n"+gone+"\n") {
					t.Fatalf("round %d: %s, deleted or renamed by the agent, is back:\n%s\nstderr: %s", round, gone, r.stdout, r.stderr)
				}
			}
			for _, kept := range []string{fmt.Sprintf("g%d.txt", j), fmt.Sprintf("e%d", j)} {
				if !strings.Contains("\n"+r.stdout, "\n"+kept+"\n") {
					t.Fatalf("round %d: %s, the agent's rename, is missing:\n%s\nstderr: %s", round, kept, r.stdout, r.stderr)
				}
			}
		}
	}
	// Both sides changed keep.txt: the host's edit is taken, and said so.
	writeFile(t, filepath.Join(ws, "keep.txt"), "host last\n")
	r := mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--", "cat", "/home/agent/ws/keep.txt")
	if r.stdout != "host last\n" {
		t.Errorf("keep.txt after both sides changed it = %q, want the host's", r.stdout)
	}
	if !strings.Contains(r.stderr, "1 paths changed on both the host and the branch (took the host's: /ws/keep.txt)") {
		t.Errorf("the summary line does not report the conflict: %s", r.stderr)
	}
}

// TestExecReportsCaptureConflict: art exec's JSON output names a path both
// the host and the branch changed, on the first response only.
func TestExecReportsCaptureConflict(t *testing.T) {
	ws, db := overlayWorkspace(t)
	execIn(t, ws, db, "--jsonl", `{"command":["sh","-c","echo agent > main.py"]}`)
	writeFile(t, filepath.Join(ws, "main.py"), "host\n")
	resps, _ := execIn(t, ws, db, "--jsonl", `{"command":["cat","main.py"]}`, `{"command":["true"]}`)
	if len(resps) != 2 {
		t.Fatalf("%d responses, want 2", len(resps))
	}
	if resps[0].Stdout != "host\n" {
		t.Errorf("main.py = %q, want the host's edit", resps[0].Stdout)
	}
	c := resps[0].Capture
	if c == nil || c.Conflicts != 1 || len(c.Paths) != 1 || c.Paths[0].Path != "/ws/main.py" || c.Paths[0].Kept != "host" {
		t.Fatalf("first response's capture = %+v, want main.py, the host's kept", c)
	}
	if resps[1].Capture != nil {
		t.Errorf("second response repeats the capture: %+v", resps[1].Capture)
	}
}
