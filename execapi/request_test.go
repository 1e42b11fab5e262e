package execapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeValid(t *testing.T) {
	req, e := Decode([]byte(`{"api_version":1,"command":["sh","-c","echo hi"],"environment":{"A_1":"x"},
		"working_directory":"/tmp","stdin":"in\u0000put","timeout_ms":5000,
		"resources":{"memory_bytes":1048576,"max_pids":10,"cpu_ms":100,"disk_bytes":1,"max_output_bytes":10},
		"isolation":{"network":true,"bind_mounts":[{"source":"/srv","destination":"/mnt/srv","readonly":true}]},
		"branch":"try-a","at":"main~1","snapshot":false}`))
	if e != nil {
		t.Fatal(e)
	}
	if got, want := strings.Join(req.Command, " "), "sh -c echo hi"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	if req.WantSnapshot() || req.Stdin != "in\x00put" || !req.Isolation.BindMounts[0].ReadOnly || req.Resources.MaxOutputBytes != 10 {
		t.Errorf("decoded %+v", req)
	}
	if e := (&Policy{}).Validate(req); e != nil {
		t.Errorf("valid request refused: %v", e)
	}
	req, e = Decode([]byte(` {"command":["true"]} ` + "\n"))
	if e != nil {
		t.Fatal(e)
	}
	if !req.WantSnapshot() || req.Timeout() != DefaultTimeoutMS || req.OutputLimit() != DefaultMaxOutputBytes {
		t.Errorf("defaults: snapshot %v timeout %d output %d", req.WantSnapshot(), req.Timeout(), req.OutputLimit())
	}
}

// TestInvalidRequests pins the code and the exact message of every
// request-level rejection (docs/exec-api.md quotes them).
func TestInvalidRequests(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "ws.db")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	pol := &Policy{
		Protected:     append(StorePaths(store), "/var/lib/art"),
		ResolveSource: filepath.EvalSymlinks,
	}
	bind := func(src, dst string) string {
		return `{"command":["true"],"isolation":{"bind_mounts":[{"source":"` + src + `","destination":"` + dst + `"}]}}`
	}
	long := `{"command":[` + strings.Repeat(`"a",`, MaxArgs) + `"a"]}`
	big := `{"command":["` + strings.Repeat("a", MaxArgvBytes) + `"]}`
	for _, c := range []struct {
		name, req string
		code      Code
		msg       string
	}{
		{"not json", `{"command":`, CodeMalformed, "invalid JSON: unexpected EOF"},
		{"empty", ``, CodeMalformed, "empty request"},
		{"array", `["true"]`, CodeMalformed, "the request must be a JSON object"},
		{"wrong type", `{"command":"true"}`, CodeMalformed, "command: expected an array, got JSON string"},
		{"fraction", `{"command":["x"],"timeout_ms":1.5}`, CodeMalformed, "timeout_ms: expected an integer, got JSON number 1.5"},
		{"unknown", `{"command":["true"],"comand":1}`, CodeUnknownField, `unknown field "comand"`},
		{"case", `{"Command":["true"]}`, CodeUnknownField, `unknown field "Command"`},
		{"unknown nested", `{"command":["true"],"resources":{"memory":1}}`, CodeUnknownField, `unknown field "resources.memory"`},
		{"unknown in bind", `{"command":["true"],"isolation":{"bind_mounts":[{"source":"/a","destination":"/b","rw":true}]}}`,
			CodeUnknownField, `unknown field "isolation.bind_mounts[0].rw"`},
		{"trailing", `{"command":["true"]} {}`, CodeTrailingData, "unexpected data after the request at byte 22"},
		{"version", `{"api_version":2,"command":["true"]}`, CodeAPIVersion, "api_version 2 is not supported (this art speaks 1)"},
		{"too large", `{"command":["` + strings.Repeat("a", MaxRequestBytes) + `"]}`, CodeTooLarge,
			"request is longer than 16777216 bytes"},
		{"no command", `{}`, CodeEmptyCommand, "command: must have at least one element"},
		{"empty command", `{"command":[]}`, CodeEmptyCommand, "command: must have at least one element"},
		{"empty argv0", `{"command":[""]}`, CodeEmptyCommand, "command[0]: must not be empty"},
		{"many args", long, CodeCommandLength, "command: 4097 arguments, at most 4096"},
		{"many bytes", big, CodeCommandLength, "command: 262145 bytes, at most 262144"},
		{"nul argv", `{"command":["true","a\u0000b"]}`, CodeNULByte, "command[1]: contains a NUL byte"},
		{"nul env value", `{"command":["true"],"environment":{"A":"\u0000"}}`, CodeNULByte, "environment.A: contains a NUL byte"},
		{"nul env key", `{"command":["true"],"environment":{"A\u0000":"x"}}`, CodeNULByte, "environment key: contains a NUL byte"},
		{"nul cwd", `{"command":["true"],"working_directory":"/a\u0000"}`, CodeNULByte, "working_directory: contains a NUL byte"},
		{"nul branch", `{"command":["true"],"branch":"a\u0000"}`, CodeNULByte, "branch: contains a NUL byte"},
		{"nul bind", bind(`/a\u0000`, "/b"), CodeNULByte, "isolation.bind_mounts[0].source: contains a NUL byte"},
		{"env digit", `{"command":["true"],"environment":{"1A":"x"}}`, CodeEnvKey, `environment: key "1A" must match [A-Za-z_][A-Za-z0-9_]*`},
		{"env eq", `{"command":["true"],"environment":{"A=B":"x"}}`, CodeEnvKey, `environment: key "A=B" must match [A-Za-z_][A-Za-z0-9_]*`},
		{"env empty", `{"command":["true"],"environment":{"":"x"}}`, CodeEnvKey, `environment: key "" must match [A-Za-z_][A-Za-z0-9_]*`},
		{"relative cwd", `{"command":["true"],"working_directory":"src"}`, CodeRelativePath, `working_directory: "src" is not an absolute path`},
		{"unclean cwd", `{"command":["true"],"working_directory":"/a/../etc"}`, CodeRelativePath, `working_directory: "/a/../etc" is not clean (write "/etc")`},
		{"relative source", bind("data", "/mnt"), CodeRelativePath, `isolation.bind_mounts[0].source: "data" is not an absolute path`},
		{"relative dest", bind("/data", "mnt"), CodeRelativePath, `isolation.bind_mounts[0].destination: "mnt" is not an absolute path`},
		{"negative timeout", `{"command":["true"],"timeout_ms":-1}`, CodeLimitRange,
			"timeout_ms: -1 is out of range [1, 86400000] (0 or absent: default)"},
		{"huge timeout", `{"command":["true"],"timeout_ms":86400001}`, CodeLimitRange,
			"timeout_ms: 86400001 is out of range [1, 86400000] (0 or absent: default)"},
		{"tiny memory", `{"command":["true"],"resources":{"memory_bytes":4096}}`, CodeLimitRange,
			"resources.memory_bytes: 4096 is out of range [1048576, 1099511627776] (0 or absent: default)"},
		{"pids", `{"command":["true"],"resources":{"max_pids":-5}}`, CodeLimitRange,
			"resources.max_pids: -5 is out of range [1, 1048576] (0 or absent: default)"},
		{"cpu", `{"command":["true"],"resources":{"cpu_ms":86400001}}`, CodeLimitRange,
			"resources.cpu_ms: 86400001 is out of range [1, 86400000] (0 or absent: default)"},
		{"disk", `{"command":["true"],"resources":{"disk_bytes":-1}}`, CodeLimitRange,
			"resources.disk_bytes: -1 is out of range [1, 1125899906842624] (0 or absent: default)"},
		{"output", `{"command":["true"],"resources":{"max_output_bytes":67108865}}`, CodeLimitRange,
			"resources.max_output_bytes: 67108865 is out of range [1, 67108864] (0 or absent: default)"},
		{"many binds", `{"command":["true"],"isolation":{"bind_mounts":[` +
			strings.Repeat(`{"source":"/a","destination":"/b"},`, MaxBindMounts) + `{"source":"/a","destination":"/b"}]}}`,
			CodeLimitRange, "isolation.bind_mounts: 65 mounts, at most 64"},
		{"no source", `{"command":["true"],"isolation":{"bind_mounts":[{"destination":"/b"}]}}`, CodeEmptyPath,
			"isolation.bind_mounts[0]: source and destination are required"},
		{"proc", bind("/srv", "/proc"), CodeForbiddenDest, "isolation.bind_mounts[0].destination: /proc is forbidden (/proc and below are reserved)"},
		{"proc below", bind("/srv", "/proc/sys/kernel"), CodeForbiddenDest,
			"isolation.bind_mounts[0].destination: /proc/sys/kernel is forbidden (/proc and below are reserved)"},
		{"sys", bind("/srv", "/sys/fs/cgroup"), CodeForbiddenDest, "isolation.bind_mounts[0].destination: /sys/fs/cgroup is forbidden (/sys and below are reserved)"},
		{"dev", bind("/srv", "/dev/shm"), CodeForbiddenDest, "isolation.bind_mounts[0].destination: /dev/shm is forbidden (/dev and below are reserved)"},
		{"root", bind("/srv", "/"), CodeForbiddenDest, "isolation.bind_mounts[0].destination: / is forbidden (/ and below are reserved)"},
		{"store dest", bind("/srv", store+"-wal"), CodeForbiddenDest,
			"isolation.bind_mounts[0].destination: " + store + "-wal is forbidden (" + store + "-wal and below are reserved)"},
		{"state dest", bind("/srv", "/var/lib/art/x"), CodeForbiddenDest,
			"isolation.bind_mounts[0].destination: /var/lib/art/x is forbidden (/var/lib/art and below are reserved)"},
		{"store source", bind(store, "/mnt/db"), CodeForbiddenSource,
			"isolation.bind_mounts[0].source: " + store + " would expose " + store},
		{"store shm", bind(store+"-shm", "/mnt/db"), CodeForbiddenSource,
			"isolation.bind_mounts[0].source: " + store + "-shm would expose " + store + "-shm"},
		{"store parent", bind(dir, "/mnt/dir"), CodeForbiddenSource,
			"isolation.bind_mounts[0].source: " + dir + " would expose " + store},
		{"host root", bind("/", "/mnt/host"), CodeForbiddenSource, "isolation.bind_mounts[0].source: / would expose " + store},
		{"state below", bind("/var/lib/art/cache", "/mnt/c"), CodeForbiddenSource,
			"isolation.bind_mounts[0].source: /var/lib/art/cache would expose /var/lib/art"},
		{"symlink to store dir", bind(link, "/mnt/l"), CodeForbiddenSource,
			"isolation.bind_mounts[0].source: " + dir + " would expose " + store},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, e := Decode([]byte(c.req))
			if e == nil {
				e = pol.Validate(req)
			}
			if e == nil {
				t.Fatalf("accepted %s", c.req)
			}
			if e.Code != c.code || e.Message != c.msg {
				t.Errorf("got %s %q\nwant %s %q", e.Code, e.Message, c.code, c.msg)
			}
			if e.Code.Title() == "" {
				t.Errorf("code %s has no documented title", e.Code)
			}
		})
	}
}

func TestBindsAllowed(t *testing.T) {
	pol := &Policy{Protected: StorePaths("/data/ws.db")}
	req := &Request{Command: []string{"true"}, Isolation: Isolation{BindMounts: []BindMount{
		{Source: "/data/other", Destination: "/mnt/other"}, // sibling of the store
		{Source: "/srv/cache", Destination: "/home/agent/cache", ReadOnly: true},
		{Source: "/usr/share", Destination: "/devices"}, // /dev is a prefix of the name, not a parent
	}}}
	if e := pol.Validate(req); e != nil {
		t.Fatal(e)
	}
}

func FuzzDecodeValidate(f *testing.F) {
	f.Add([]byte(`{"command":["true"],"environment":{"A":"b"}}`))
	f.Add([]byte(`{"command":["x"],"isolation":{"bind_mounts":[{"source":"/a","destination":"/proc"}]}}`))
	pol := &Policy{Protected: StorePaths("/s/ws.db")}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, e := Decode(data)
		if e != nil {
			if e.Code.Title() == "" || e.Code[:2] != "E1" {
				t.Fatalf("decode error with code %s: %v", e.Code, e)
			}
			return
		}
		if e := pol.Validate(req); e != nil {
			if e.Code.Title() == "" {
				t.Fatalf("undocumented code %s", e.Code)
			}
			return
		}
		// An accepted request has what the executor relies on.
		if len(req.Command) == 0 || req.Command[0] == "" || req.Timeout() <= 0 || req.OutputLimit() <= 0 {
			t.Fatalf("accepted %+v", req)
		}
	})
}
