package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/session"
)

// testNames resolves the test's host names to the host's loopback (the
// proxy resolves on the host; the sandbox never does).
func testNames(ctx context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "allowed.test", "other.test", "example.com":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return netpolicy.SystemLookup(ctx, host)
}

func loopbackServer(t *testing.T, name string, tls bool) (*httptest.Server, int) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s", name) })
	s := httptest.NewUnstartedServer(h)
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, s.Listener.Addr().(*net.TCPAddr).Port
}

// runStore opens a store with an open run operation and its Batch, as
// art run holds them.
func runStore(t *testing.T) (string, *journal.DB, *journal.Op, *journal.Batch) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := journal.Open(context.Background(), path, journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	op, err := db.BeginOp(context.Background(), journal.DefaultBranch, "run", "net test")
	if err != nil {
		t.Fatal(err)
	}
	return path, db, op, op.NewBatch(5*time.Millisecond, 1000)
}

func TestLogNetAndPolicySuggest(t *testing.T) {
	path, _, op, batch := runStore(t)
	report := func(a netpolicy.Attempt) error { return batch.Record(context.Background(), session.NetEvent(a)) }
	for _, a := range []netpolicy.Attempt{
		{Proto: "connect", Host: "api.example.com", Port: 443, Allow: true, Rule: "api.example.com:443", Reason: "allowed by rule", Addr: "93.184.216.34:443", PID: 42},
		{Proto: "http", Host: "pypi.org", Port: 80, Reason: "no rule allows pypi.org:80", PID: 42},
		{Proto: "socks5", Host: "169.254.169.254", Port: 80, Rule: "169.254.169.254", Reason: "denied by rule", PID: 42},
	} {
		a.Time = time.Unix(1700000000, 0)
		if err := report(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := op.End(context.Background(), nil); err != nil {
		t.Fatal(err)
	}

	out := mustArt(t, "log", "--net", "-d", path)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `allow  connect api.example.com:443  rule "api.example.com:443"  pid 42`) ||
		!strings.Contains(lines[1], "deny   http    pypi.org:80  no rule allows pypi.org:80") ||
		!strings.Contains(lines[2], `denied by rule "169.254.169.254"`) {
		t.Fatalf("art log --net:\n%s", out)
	}
	var js []netLogJSON
	if err := json.Unmarshal([]byte(mustArt(t, "log", "--net", "--json", "-d", path)), &js); err != nil {
		t.Fatal(err)
	}
	if len(js) != 3 || js[0].Branch != "main" || js[0].Op != op.ID || js[1].Host != "pypi.org" || js[1].Allow || js[0].PID != 42 {
		t.Fatalf("art log --net --json: %+v", js)
	}
	if ev := mustArt(t, "log", "--events", "-d", path); strings.Count(ev, " net ") != 3 {
		t.Fatalf("art log --events does not show the net events:\n%s", ev)
	}
	if out := mustArt(t, "verify", "-d", path); !strings.Contains(out, "ok") {
		t.Fatalf("verify: %s", out)
	}

	out = mustArt(t, "policy", "suggest", "-d", path, "--session", strconv.FormatInt(op.ID, 10))
	for _, want := range []string{"--allow api.example.com:443", "--allow pypi.org:80", "1 denied: no rule allows pypi.org:80",
		"#   169.254.169.254:80", `"allow": [`} {
		if !strings.Contains(out, want) {
			t.Errorf("policy suggest lacks %q:\n%s", want, out)
		}
	}
	var sj struct {
		netpolicy.Suggestion
		Config configFile `json:"config"`
	}
	if err := json.Unmarshal([]byte(mustArt(t, "policy", "suggest", "--json", "-d", path)), &sj); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sj.Config.Net.Allow, ","); got != "api.example.com:443,pypi.org:80" || len(sj.KeptDenied) != 1 {
		t.Fatalf("policy suggest --json: %+v", sj)
	}
	if out := mustArt(t, "policy", "suggest", "-d", path, "--session", "999"); !strings.Contains(out, "no network decisions") {
		t.Fatalf("unknown session: %s", out)
	}
}

func TestLoadNetPolicy(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, cfg, `{"net": {"mode": "allow", "allow": ["api.example.com:443"], "deny": ["*.evil.example.com"]}}`)
	pol, mode, err := loadNetPolicy(cfg, []string{"x.evil.example.com:443", "pypi.org:443"}, nil)
	if err != nil || mode != "allow" {
		t.Fatalf("loadNetPolicy: %v, mode %q", err, mode)
	}
	lookup := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	for host, want := range map[string]bool{"api.example.com": true, "pypi.org": true, "x.evil.example.com": false, "other.org": false} {
		if d := pol.Check(context.Background(), host, 443, lookup); d.Allow != want {
			t.Errorf("%s: %+v, want allow=%v (config deny beats flag allow)", host, d, want)
		}
	}
	if _, _, err := loadNetPolicy(cfg, []string{"bad:port"}, nil); err == nil {
		t.Fatal("bad --allow accepted")
	}
}

// TestNetAllowInBwrap runs curl in a real sandbox with its own network
// namespace, behind art's bridge and proxy.
func TestNetAllowInBwrap(t *testing.T) {
	testutil.Require(t, "bwrap")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (scripts/deps.sh installs it)")
	}
	bin := artBinary(t)
	_, portA := loopbackServer(t, "A", false)
	_, portB := loopbackServer(t, "B", false)
	tlsSrv, portTLS := loopbackServer(t, "TLS", true)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})))

	path, _, op, batch := runStore(t)
	pol, err := netpolicy.Parse([]string{"allowed.test:" + strconv.Itoa(portA), "example.com:" + strconv.Itoa(portTLS)}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := session.StartNetProxy(context.Background(), filepath.Join(t.TempDir(), "net"), session.NetAllow{Policy: pol, Lookup: testNames, Recorder: batch, UID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	a, b, tp := strconv.Itoa(portA), strconv.Itoa(portB), strconv.Itoa(portTLS)
	script := strings.Join([]string{
		`c() { name=$1; shift; out=$(curl -sS --max-time 5 "$@" 2>&1); echo "$name rc=$? $out"; }`,
		`c http http://allowed.test:` + a + `/`,
		`c http-other-port -o /dev/null -w %{http_code} http://allowed.test:` + b + `/`,
		`c http-other-host -o /dev/null -w %{http_code} http://other.test:` + a + `/`,
		`c https --cacert /tmp/ca.pem https://example.com:` + tp + `/`,
		`c https-other-port --cacert /tmp/ca.pem https://example.com:` + a + `/`,
		`c socks -x socks5h://127.0.0.1:1080 http://allowed.test:` + a + `/`,
		`c socks-other -x socks5h://127.0.0.1:1080 http://allowed.test:` + b + `/`,
		`c direct-name --noproxy '*' http://allowed.test:` + a + `/`,
		`c direct-ip --noproxy '*' http://192.0.2.1:` + a + `/`,
		`c direct-loopback --noproxy '*' http://127.0.0.1:` + a + `/`,
		`getent hosts example.org >/dev/null 2>&1; echo "dns rc=$?"`,
		`rm -f /run/art-net/http.sock 2>/dev/null; echo "rm-socket rc=$?"`,
		`exit 7`,
	}, "\n")
	cmd := exec.Command("bwrap", append([]string{"--unshare-net", "--unshare-pid", "--die-with-parent",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run", "--tmpfs", "/tmp",
		"--ro-bind", proxy.Dir(), session.NetSandboxDir, "--ro-bind", bin, "/run/art", "--ro-bind", ca, "/tmp/ca.pem",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--"},
		session.NetBridgeArgv("/run/art", []string{"sh", "-c", script})...)...)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("sandbox: %v (want exit 7, the command's own)\n%s", err, out)
	}
	results := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, rest, ok := strings.Cut(line, " rc="); ok {
			results[name] = rest
		}
	}
	for name, want := range map[string]string{
		"http":             "0 hello from A",
		"http-other-port":  "0 403",
		"http-other-host":  "0 403",
		"https":            "0 hello from TLS",
		"https-other-port": "56 curl: (56) CONNECT tunnel failed, response 403",
		"socks":            "0 hello from A",
		"socks-other":      "97 ", // curl: the SOCKS5 request was refused
		"direct-name":      "6 ",  // could not resolve: no DNS inside
		"direct-ip":        "7 ",  // network unreachable: only lo
		"direct-loopback":  "7 ",  // the sandbox's own loopback: nothing there
		"dns":              "2",
	} {
		if got, ok := results[name]; !ok || !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want prefix %q", name, got, want)
		}
	}
	if t.Failed() {
		t.Logf("sandbox output:\n%s", out)
	}

	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	op.End(context.Background(), nil)
	var log []netLogJSON
	if err := json.Unmarshal([]byte(mustArt(t, "log", "--net", "--json", "-d", path)), &log); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range log {
		got[fmt.Sprintf("%s %s %v", e.Proto, e.Target(), e.Allow)]++
		if e.PID == 0 {
			t.Errorf("%+v: no pid", e)
		}
	}
	want := map[string]int{
		"http allowed.test:" + a + " true":    1,
		"http allowed.test:" + b + " false":   1,
		"http other.test:" + a + " false":     1,
		"connect example.com:" + tp + " true": 1,
		"connect example.com:" + a + " false": 1,
		"socks5 allowed.test:" + a + " true":  1,
		"socks5 allowed.test:" + b + " false": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journaled decisions:\n%v\nwant\n%v", got, want)
	}
}

// TestNetBridgeDiesWithCommand: without a pid namespace to tear it down,
// the bridge still goes when the command exits (its parent-death signal
// survives the exec because fork and exec share one thread).
func TestNetBridgeDiesWithCommand(t *testing.T) {
	testutil.Require(t, "bwrap")
	bin := artBinary(t)
	dir := t.TempDir()
	sandboxDir := "/run/art-net-" + filepath.Base(dir)
	script := `ps -o pid=,args= --ppid $$ | grep 'net-bridge --serve' | grep -v grep | awk '{print "bridge", $1}'`
	argv := []string{"--unshare-net", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/run", "--bind", dir, sandboxDir, "--ro-bind", bin, "/run/art", "--", "/run/art", "net-bridge",
		"--dir", sandboxDir, "--", "sh", "-c", script}
	out, err := exec.Command("bwrap", argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap: %v\n%s", err, out)
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "bridge %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("no bridge seen under the command: %q", out)
	}
	deadline := time.Now().Add(time.Second)
	for {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), sandboxDir) {
			return // gone (or the pid reused by something else)
		}
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(st), ") Z ") {
			return // dead, awaiting its reaper
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge %d still running 1 s after its command exited", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunNetAllow drives art run --net allow as a user would: defaults
// from the host user's config file, rules from flags, curl inside, the
// decisions in art log --net.
func TestRunNetAllow(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.Require(t, "fuse")
	bin := artBinary(t)
	_, portA := loopbackServer(t, "A", false)
	_, portB := loopbackServer(t, "B", false)
	a, b := strconv.Itoa(portA), strconv.Itoa(portB)
	ws, db := newWorkspace(t)
	cfgHome := t.TempDir()
	writeFile(t, filepath.Join(cfgHome, "art", "config.json"), `{"net": {"deny": ["localhost:`+b+`"]}}`)

	// localhost is in NO_PROXY (the sandbox's own loopback): --noproxy ""
	// sends it to the proxy, which resolves it on the host.
	script := `curl -sS --max-time 5 --noproxy "" http://localhost:` + a + `/; echo
curl -sS --max-time 5 --noproxy "" -o /dev/null -w "b=%{http_code}\n" http://localhost:` + b + `/
exit 5`
	cmd := exec.Command(bin, "run", "-i=false", "-q", "-m", ws, "-d", db, "--net", "allow",
		"--allow", "localhost:"+a, "--allow", "localhost:"+b, "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cfgHome)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 5 || !strings.Contains(string(out), "hello from A") ||
		!strings.Contains(string(out), "b=403") {
		t.Fatalf("art run --net allow: exit %d (want 5)\n%s", code, out)
	}
	var log []netLogJSON
	if err := json.Unmarshal([]byte(mustArt(t, "log", "--net", "--json", "-d", db)), &log); err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || !log[0].Allow || log[0].Port != portA || log[1].Allow || log[1].Rule != "localhost:"+b {
		t.Fatalf("art log --net: %+v (want A allowed, B denied by the config's rule)", log)
	}

	for _, args := range [][]string{
		{"run", "-m", ws, "--net", "allow", "--", "true"},                             // no store: nothing would be journaled
		{"run", "-m", ws, "-d", db, "--allow", "example.com", "--", "true"},           // --allow without --net allow
		{"run", "-m", ws, "-d", db, "--net", "allow", "--allow", "a:b", "--", "true"}, // bad rule
	} {
		if _, errs, code := art(t, args...); code != exitUsage {
			t.Errorf("art %s: exit %d, want %d\n%s", strings.Join(args, " "), code, exitUsage, errs)
		}
	}
}
