package main

import (
	"database/sql"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
)

// hostileNames are file names an agent may choose that a terminal would act
// on (issue 29): an OSC that retitles the window, an SGR, a newline that
// splits an entry in two, invalid UTF-8, a C1 CSI as a character and as a
// byte, a right-to-left override, DEL.
var hostileNames = []string{
	"evil\x1b]0;pwned\a", "red\x1b[31mX", "new\nline", "bad\xff\xfe",
	"c1\u009b2J", "raw\x9b2J", "bidi\u202etxt.exe", "del\x7f",
}

// hostileArgv0 is the argv[0] the agent's process gives itself (exec -a).
const hostileArgv0 = "\x1b]0;pwned-by-argv\a"

// hostileMessage is a snapshot message and, inside art run's command, an
// op description: an OSC, a clear screen and a second line.
const hostileMessage = "msg\x1b]0;pwned-by-message\a\x1b[2J\nsecond line"

// hostileBranch is a branch name no art command makes, written into the
// store by hand as a hostile store would hold it.
const hostileBranch = "br\x1b]0;pwned-by-branch\a"

// terminalSafe fails unless out can reach a terminal: no C0 byte but
// newline and tab, no DEL, no C1 (as a character, or as a byte outside a
// UTF-8 sequence: invalid UTF-8 is refused as a whole), no bidi control.
// (0x9b inside a valid sequence, as in "Л", is a continuation byte.)
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Errorf("%s: byte %#x at %d reaches the terminal:\n%q", what, c, i, out)
			return
		}
	}
	for i, r := range out {
		if r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD") {
			t.Errorf("%s: invalid UTF-8 at %d reaches the terminal:\n%q", what, i, out)
			return
		}
		if r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			t.Errorf("%s: %U at %d reaches the terminal:\n%q", what, r, i, out)
			return
		}
	}
}

// lines splits output into its lines (no trailing empty one).
func lines(out string) []string {
	if out == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// everyLine fails unless each line of out matches re and there are want
// of them (want < 0: any number).
func everyLine(t *testing.T, what, out string, re string, want int) {
	t.Helper()
	terminalSafe(t, what, out)
	ls := lines(out)
	rx := regexp.MustCompile(re)
	for _, l := range ls {
		if !rx.MatchString(l) {
			t.Errorf("%s: line %q does not match %s (an entry split over lines?)\n%s", what, l, re, out)
		}
	}
	if want >= 0 && len(ls) != want {
		t.Errorf("%s: %d lines, want %d (one per entry):\n%s", what, len(ls), want, out)
	}
}

// asJSON is what --json gives a name: the exact bytes, except that JSON
// cannot carry invalid UTF-8 (each such byte becomes U+FFFD).
func asJSON(s string) string { return string([]rune(s)) }

// TestHostileNamesNeverReachTheTerminal: a workspace holding names a
// terminal acts on, an agent run (real bwrap and FUSE, traced) whose
// process renames itself with an escape sequence and whose command is two
// lines, a snapshot message and a branch name with escapes; then every
// verb's human output is checked to carry none of those bytes raw and one
// line per entry, and --json to keep the exact text (issue 29).
func TestHostileNamesNeverReachTheTerminal(t *testing.T) {
	ws, db := overlayWorkspace(t)
	testutil.Require(t, "ptrace")
	base := filepath.Dir(ws)
	for _, n := range hostileNames {
		writeFile(t, filepath.Join(ws, n), "host "+n+"\n")
	}
	if err := os.Symlink("target\x1b]0;pwned-by-link\a", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	// The agent's script: files named like the host's (agent-NAME), one
	// with a tab and CR in its content, a rename.
	var script strings.Builder
	for _, n := range hostileNames {
		script.WriteString("echo agent > 'agent-" + n + "'\n")
	}
	script.WriteString("printf 'a\\tb\\033]0;pwned-by-content\\007\\r\\n' > content.txt\n")
	script.WriteString("mv 'agent-red\x1b[31mX' 'moved-\x1b[2Jclear'\n")
	writeFile(t, filepath.Join(ws, "agent.sh"), script.String())
	if os.Geteuid() == 0 { // the sandbox runs as nobody (populate)
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				os.Lchown(p, 65534, 65534)
			}
			return nil
		})
	}

	hostEntries := 0
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != ws {
			hostEntries++
		}
		return nil
	})
	entry := `^(DIR  |FILE |LINK )(/ws/[^"\s]*|"/ws/.*")( -> .*)? \(.*\)$`

	// push -m: the seed's listing, one line per host entry.
	r := mustRun(t, "push", "-m", ws, "-d", db, "--message", hostileMessage)
	listing := lines(r.stdout)
	if len(listing) < 3 {
		t.Fatalf("push -m printed %q", r.stdout)
	}
	terminalSafe(t, "push -m", r.stdout+r.stderr)
	everyLine(t, "push -m entries", strings.Join(listing[2:len(listing)-1], "\n")+"\n", entry, hostEntries)
	pushEvil := findLine(listing, `"/ws/evil\033]0;pwned\a"`)
	pushSnap := regexp.MustCompile(`snapshot ([0-9a-f]{12})`).FindStringSubmatch(listing[len(listing)-1])
	if pushSnap == nil {
		t.Fatalf("push -m summary: %s", listing[len(listing)-1])
	}

	// The agent's run: argv[0] set with exec -a, the command two lines.
	command := "exec -a $'\\e]0;pwned-by-argv\\a' sh -c \"$(cat agent.sh)\"\n: " + hostileMessage
	r = mustRun(t, "run", "-m", ws, "-d", db, "-i=false", "--trace", "--", "bash", "-c", command)
	everyLine(t, "run summary", r.stderr, `^art: exit 0 in \d+ms; \d+ paths changed; snapshot [0-9a-f]{12} on branch main$`, 1)
	runSummary := r.stderr
	runSnap := regexp.MustCompile(`snapshot ([0-9a-f]{12})`).FindStringSubmatch(runSummary)
	if runSnap == nil {
		t.Fatalf("run summary: %s", runSummary)
	}
	from, to := pushSnap[1], runSnap[1]
	mustRun(t, "snapshot", "-d", db, "-m", hostileMessage)

	// A branch named by a hostile store (no art command makes one) and a
	// remote named like one, pointing at a store file.
	mustRun(t, "branch", "-d", db, "try")
	other := filepath.Join(base, "other.db")
	mustRun(t, "push", "-d", db, other, "main")
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE branches SET name = ? WHERE name = 'try'`, hostileBranch); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO remotes (name, url) VALUES (?, ?)`, "rem\x1b]0;pwned-by-remote\a", other); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	human := map[string]string{} // verb -> its output, for the report
	check := func(what string, out, errOut string, re string, want int) {
		t.Helper()
		terminalSafe(t, what+" (stderr)", errOut)
		everyLine(t, what, out, re, want)
		human[what] = out + errOut
	}
	countJSON := func(args ...string) int {
		t.Helper()
		var v []json.RawMessage
		if err := json.Unmarshal([]byte(mustRun(t, args...).stdout), &v); err != nil {
			t.Fatalf("art %s: %v", strings.Join(args, " "), err)
		}
		return len(v)
	}

	// pull -m into a fresh directory named like the workspace.
	dest := filepath.Join(base, "pulled", "ws")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, "pull", "-m", dest, "-d", db)
	pulled := lines(r.stdout)
	stateEntries := 0
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dest {
			stateEntries++
		}
		return nil
	})
	terminalSafe(t, "pull -m", r.stdout+r.stderr)
	everyLine(t, "pull -m entries", strings.Join(pulled[2:len(pulled)-1], "\n")+"\n",
		`^(DIR  |FILE |LINK )(ws/[^"\s]*|"ws/.*")( -> .*)?( \(\d+ bytes\))?$`, stateEntries)
	human["pull -m"] = findLine(pulled, `"ws/evil\033]0;pwned\a"`)

	// log, every mode.
	var ops []journal.OpInfo
	if err := json.Unmarshal([]byte(mustRun(t, "log", "-d", db, "--json").stdout), &ops); err != nil {
		t.Fatal(err)
	}
	nops := len(ops)
	for _, o := range ops {
		nops += len(o.Snapshots)
	}
	r = mustRun(t, "log", "-d", db)
	check("log", r.stdout, r.stderr, `^(op \d+ .*|        snapshot [0-9a-f]{12}  @\d+  .*)$`, nops)
	r = mustRun(t, "log", "-d", db, "--all", "--events")
	check("log --events", r.stdout, r.stderr, `^@\d+ `, countJSON("log", "-d", db, "--all", "--events", "--json"))
	evilAgent := "ws/agent-evil\x1b]0;pwned\a"
	r = mustRun(t, "log", "-d", db, "--path", evilAgent)
	check("log --path", r.stdout, r.stderr, `^@\d+ `, countJSON("log", "-d", db, "--path", evilAgent, "--json"))
	r = mustRun(t, "log", "-d", db, "--execs")
	check("log --execs", r.stdout, r.stderr, `^(op \d+ \(.*\)|  +\d+  .*)$`, -1)
	if !strings.Contains(r.stdout, `$'\033]0;pwned-by-argv\a'`) {
		t.Errorf("log --execs does not show the agent's argv[0] escaped:\n%s", r.stdout)
	}
	r = mustRun(t, "log", "-d", db, "--syscalls")
	check("log --syscalls", r.stdout, r.stderr, `^@\d+ `, countJSON("log", "-d", db, "--syscalls", "--json"))

	// blame of the agent's file: the process that wrote it is named with
	// its hostile argv[0], escaped.
	r = mustRun(t, "blame", "-d", db, evilAgent)
	check("blame", r.stdout, r.stderr, `^@\d+ `, countJSON("blame", "-d", db, "--json", evilAgent))
	if !strings.Contains(r.stdout, `$'\033]0;pwned-by-argv\a' -c `) {
		t.Errorf("blame does not name the agent's process by its escaped argv:\n%s", r.stdout)
	}
	var blame []blameLine
	json.Unmarshal([]byte(mustRun(t, "blame", "-d", db, "--json", evilAgent).stdout), &blame)
	named := false
	for _, l := range blame {
		named = named || len(l.Argv) > 0 && l.Argv[0] == hostileArgv0
	}
	if !named {
		t.Errorf("blame --json: %+v, want argv[0] %q exactly", blame, hostileArgv0)
	}

	// diff of the run: names, --stat, --patch (headers quoted whole, as git).
	var d struct {
		Changes []struct {
			Kind string `json:"kind"`
			Path string `json:"path"`
			Type string `json:"type"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "diff", "-d", db, from, to, "--json").stdout), &d); err != nil {
		t.Fatal(err)
	}
	names, files := 0, 0
	for _, c := range d.Changes {
		if c.Type != "dir" || c.Kind != "M" {
			names++
		}
		if c.Type != "dir" {
			files++
		}
	}
	r = mustRun(t, "diff", "-d", db, from, to)
	check("diff", r.stdout, r.stderr, `^[ADMT]\t(ws/[^"\s]*|"ws/.*")$`, names)
	r = mustRun(t, "diff", "-d", db, from, to, "--stat")
	check("diff --stat", r.stdout, r.stderr, `^ ((ws/[^"\s]*|"ws/.*") +\| [ADMT] .*|\d+ paths changed: .*)$`, files+1)
	r = mustRun(t, "diff", "-d", db, from, to, "--patch")
	check("diff --patch", r.stdout, r.stderr, `^(diff --art |--- |\+\+\+ |@@ |[-+ ]|Binary |\\ No newline)`, -1)
	for _, want := range []string{`diff --art "a/ws/agent-evil\033]0;pwned\a" "b/ws/agent-evil\033]0;pwned\a"`,
		`+++ "b/ws/agent-bad\xff\xfe"`, "+a\tb\\033]0;pwned-by-content\\a\\r"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff --patch lacks %s:\n%s", want, r.stdout)
		}
	}
	for _, n := range hostileNames {
		found := false
		for _, c := range d.Changes {
			found = found || c.Path == asJSON("ws/agent-"+n) || n == "red\x1b[31mX"
		}
		if !found {
			t.Errorf("diff --json lacks ws/agent-%q exactly: %+v", n, d.Changes)
		}
	}

	// ls, status, du, verify, branch, remote, forget.
	r = mustRun(t, "ls", "-d", db, "-r", "main:ws")
	check("ls", r.stdout, r.stderr, `^\S+ +\d+ +\d+ +\d+ \S+ \S+  (ws/[^"\s]*|"ws/.*")/?( -> .*)?$`, countJSON("ls", "-d", db, "-r", "--json", "main:ws"))
	var ls []lsEntry
	json.Unmarshal([]byte(mustRun(t, "ls", "-d", db, "-r", "--json", "main:ws").stdout), &ls)
	for _, n := range hostileNames {
		found := false
		for _, e := range ls {
			found = found || e.Path == asJSON("ws/"+n)
		}
		if !found {
			t.Errorf("ls --json lacks ws/%q exactly", n)
		}
	}
	r = mustRun(t, "status", "-d", db)
	check("status", r.stdout, r.stderr, `.`, -1)
	if !strings.Contains(r.stdout, `"msg\033]0;pwned-by-message\a\033[2J\nsecond line"`) {
		t.Errorf("status does not show the snapshot message escaped on one line:\n%s", r.stdout)
	}
	r = mustRun(t, "du", "-d", db)
	check("du", r.stdout, r.stderr, `^ *(FILES|\d+) `, 1+countJSON("du", "-d", db, "--json"))
	r = mustRun(t, "verify", "-d", db)
	check("verify", r.stdout, r.stderr, `^(verified .*|ok)$`, 2)
	r = mustRun(t, "branch", "-d", db)
	check("branch", r.stdout, r.stderr, `^(\S+|"[^\t]*") +@\d+ `, countJSON("branch", "-d", db, "--json"))
	if !strings.Contains(r.stdout, `"br\033]0;pwned-by-branch\a"`) {
		t.Errorf("branch does not list the hostile branch escaped:\n%s", r.stdout)
	}
	var branches []journal.Branch
	json.Unmarshal([]byte(mustRun(t, "branch", "-d", db, "--json").stdout), &branches)
	if len(branches) != 2 || branches[0].Name != hostileBranch && branches[1].Name != hostileBranch {
		t.Errorf("branch --json: %+v, want %q exactly", branches, hostileBranch)
	}
	r = mustRun(t, "remote", "-d", db, "list")
	check("remote list", r.stdout, r.stderr, `^"rem\\033]0;pwned-by-remote\\a" +/`, 1)
	r = mustRun(t, "push", "-d", db, "rem\x1b]0;pwned-by-remote\a", "main")
	check("push REMOTE", r.stdout, r.stderr, `^(push "rem\\033]0;pwned-by-remote\\a": main .*|push: .*)$`, 2)
	r = mustRun(t, "forget", "-d", db, "--all", "--keep-last", "1", "--dry-run")
	check("forget --dry-run", r.stdout, r.stderr, `^((main|"br.*"): keep .*|  (keep|forget) +[0-9a-f]{12} .*)$`, -1)
	if !strings.Contains(r.stdout, `"msg\033]0;pwned-by-message\a\033[2J\nsecond line"`) {
		t.Errorf("forget does not show the message escaped:\n%s", r.stdout)
	}

	// Errors that echo such a name: one line, escaped.
	for _, args := range [][]string{
		{"cat", "-d", db, "main:ws/missing-evil\x1b]0;pwned\a"},
		{"ls", "-d", db, "main:ws/missing-new\nline"},
		{"blame", "-d", db, "--branch", "no\x1b]0;such\a", "ws/f"},
		{"pull", "-d", filepath.Join(base, "fresh.db"), db}, // the hostile branch name is refused
	} {
		out, errOut, code := art(t, args...)
		if code == 0 {
			t.Errorf("art %q: exit 0, want an error", args)
		}
		check("error of "+args[0], out, "", `.`, -1)
		everyLine(t, "error of "+args[0], errOut, `^art: `, 1)
		human["error of "+args[0]] = errOut
	}

	// A network decision about a host the client named (netpolicy
	// attempts reach the journal from the proxy, not the sandbox).
	a := netpolicy.Attempt{Proto: "connect", Host: "evil\x1b]0;pwned\a.example", Port: 443, Reason: "not\nallowed"}
	everyLine(t, "log --net", formatNet(&journal.Event{Seq: 1}, "main", a)+"\n", `^@1 `, 1)

	t.Logf("one line of each verb's output for evil\\e]0;pwned\\a:\npush -m: %s\nrun: %s", pushEvil, runSummary)
	for _, v := range []string{"pull -m", "log", "log --events", "log --path", "log --execs", "log --syscalls", "blame", "diff", "diff --stat",
		"diff --patch", "ls", "status", "du", "verify", "branch", "remote list", "push REMOTE", "forget --dry-run",
		"error of cat", "error of ls", "error of blame", "error of pull"} {
		l := findLine(lines(human[v]), "evil")
		if l == "" {
			l = findLine(lines(human[v]), `\033`)
		}
		if l == "" && len(lines(human[v])) > 0 {
			l = lines(human[v])[0]
		}
		t.Logf("%s: %s", v, l)
	}
	if os.Getenv("ART_QUOTING_DUMP") != "" {
		for k, v := range human {
			t.Logf("== %s\n%s", k, v)
		}
	}
}

// findLine is the first line holding s, or "".
func findLine(ls []string, s string) string {
	for _, l := range ls {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestTermtextQuotesWhole pins the form of a quoted path (issue 29: ls and
// diff printed /hws/bad\xff\xfe" with the opening quote lost).
func TestTermtextQuotesWhole(t *testing.T) {
	if got, want := termtext.QuotePath([]byte("hws/bad\xff\xfe")), `"hws/bad\xff\xfe"`; got != want {
		t.Errorf("QuotePath = %s, want %s", got, want)
	}
}
