package main

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/artrt/art/internal/testutil"
)

// A host service on loopback (a local model server, a database) named by
// an allow rule is reachable inside at the same address, each connection
// journaled; every other loopback port is still the sandbox's own.
func TestRunNetAllowHostLoopback(t *testing.T) {
	testutil.Require(t, "bwrap")
	testutil.Require(t, "fuse")
	bin := artBinary(t)
	_, portA := loopbackServer(t, "model", false)
	_, portB := loopbackServer(t, "other", false)
	a, b := strconv.Itoa(portA), strconv.Itoa(portB)
	ws, db := newWorkspace(t)
	script := `curl -sS --max-time 5 http://127.0.0.1:` + a + `/v1; echo
curl -sS --max-time 5 http://127.0.0.1:` + b + `/ >/dev/null 2>&1; echo "b rc=$?"`
	cmd := exec.Command(bin, "run", "-i=false", "-q", "-m", ws, "-d", db, "--net", "allow",
		"--allow", "127.0.0.1:"+a, "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello from model") || !strings.Contains(string(out), "b rc=7") {
		t.Fatalf("art run --net allow --allow 127.0.0.1:%s: %v\n%s", a, err, out)
	}
	var log []netLogJSON
	if err := json.Unmarshal([]byte(mustArt(t, "log", "--net", "--json", "-d", db)), &log); err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || !log[0].Allow || log[0].Port != portA || log[0].Proto != "forward" {
		t.Fatalf("art log --net: %+v (want one forwarded connection to port %d)", log, portA)
	}
}
