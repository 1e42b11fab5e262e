package execapi

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/artrt/art/internal/envkey"
)

// Limits of a request. Out-of-range values are refused with CodeLimitRange
// rather than clamped: a caller asking for 10 TiB of memory has a bug.
const (
	MaxRequestBytes       = 16 << 20 // one request document (one jsonl line)
	MaxArgs               = 4096     // len(command)
	MaxArgvBytes          = 256 << 10
	MaxEnvVars            = 4096
	DefaultTimeoutMS      = 60_000
	MaxTimeoutMS          = 24 * 3600 * 1000
	DefaultMaxOutputBytes = 1 << 20
	MaxOutputBytes        = 64 << 20 // per stream; the response holds both in memory
	MinMemoryBytes        = 1 << 20
	MaxMemoryBytes        = 1 << 40
	MaxPids               = 1 << 20
	MaxCPUMS              = 24 * 3600 * 1000
	MaxDiskBytes          = 1 << 50
	MaxBindMounts         = 64
)

// DefaultForbidden are the sandbox paths no bind may cover: the kernel's
// interfaces, which the sandbox sets up itself.
var DefaultForbidden = []string{"/proc", "/sys", "/dev"}

// Policy is what validation needs from the caller: the host paths that
// must never be reachable from the sandbox. It comes from art's own
// configuration, never from the request.
type Policy struct {
	// Protected are host paths that must stay invisible inside: the store
	// file and its -wal and -shm, art's state directories. A bind whose
	// source is one of them, inside one, or contains one is refused
	// (CodeForbiddenSource); so is a bind whose destination is one of them
	// or inside one (CodeForbiddenDest).
	Protected []string
	// ForbiddenDest are sandbox paths no bind may be mounted on or under
	// (CodeForbiddenDest); nil means DefaultForbidden.
	ForbiddenDest []string
	// ResolveSource, when set, resolves a bind source's symlinks (the
	// result is checked too). The CLI uses filepath.EvalSymlinks; a
	// missing source is left to the sandbox to report.
	ResolveSource func(string) (string, error)
}

// StorePaths returns the store file, its SQLite companions and its pack
// directory (STORE.packs, see package cas), the usual start of
// Policy.Protected.
func StorePaths(db string) []string {
	abs, err := filepath.Abs(db)
	if err != nil {
		abs = db
	}
	out := []string{abs, abs + "-wal", abs + "-shm", abs + "-journal", abs + ".packs"}
	// Opened through a symbolic link, the store's files (WAL, packs) sit
	// beside the link's target: protect those names too.
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		out = append(out, real, real+"-wal", real+"-shm", real+"-journal", real+".packs")
	}
	return out
}

// Validate checks a decoded request against the documented rules and the
// policy. It returns the first problem in document order, so a request
// with several gets a stable answer. Messages are exact (docs/exec-api.md).
func (p *Policy) Validate(r *Request) *Error {
	if len(r.Command) == 0 {
		return Errorf(CodeEmptyCommand, "command: must have at least one element").with("field", "command")
	}
	if len(r.Command) > MaxArgs {
		return Errorf(CodeCommandLength, "command: %d arguments, at most %d", len(r.Command), MaxArgs).
			with("field", "command").with("limit", MaxArgs)
	}
	n := 0
	for i, a := range r.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return nulError(fmt.Sprintf("command[%d]", i))
		}
		n += len(a) + 1
	}
	if r.Command[0] == "" {
		return Errorf(CodeEmptyCommand, "command[0]: must not be empty").with("field", "command[0]")
	}
	if n > MaxArgvBytes {
		return Errorf(CodeCommandLength, "command: %d bytes, at most %d", n, MaxArgvBytes).
			with("field", "command").with("limit", MaxArgvBytes)
	}
	if len(r.Environment) > MaxEnvVars {
		return Errorf(CodeCommandLength, "environment: %d variables, at most %d", len(r.Environment), MaxEnvVars).
			with("field", "environment").with("limit", MaxEnvVars)
	}
	for _, k := range sortedKeys(r.Environment) {
		if strings.IndexByte(k, 0) >= 0 {
			return nulError("environment key")
		}
		if !envkey.Valid(k) {
			return Errorf(CodeEnvKey, "environment: key %q must match [A-Za-z_][A-Za-z0-9_]*", k).
				with("field", "environment").with("key", k)
		}
		if strings.IndexByte(r.Environment[k], 0) >= 0 {
			return nulError("environment." + k)
		}
	}
	if r.WorkingDirectory != "" {
		if e := checkPath("working_directory", r.WorkingDirectory); e != nil {
			return e
		}
	}
	for _, f := range []struct{ name, v string }{{"branch", r.Branch}, {"at", r.At}} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return nulError(f.name)
		}
	}
	if e := checkLimits(r); e != nil {
		return e
	}
	return p.checkBinds(r.Isolation.BindMounts)
}

func checkLimits(r *Request) *Error {
	res := r.Resources
	for _, l := range []struct {
		field    string
		v        int64
		min, max int64
	}{
		{"timeout_ms", r.TimeoutMS, 1, MaxTimeoutMS},
		{"resources.memory_bytes", res.MemoryBytes, MinMemoryBytes, MaxMemoryBytes},
		{"resources.max_pids", res.MaxPids, 1, MaxPids},
		{"resources.cpu_ms", res.CPUMS, 1, MaxCPUMS},
		{"resources.disk_bytes", res.DiskBytes, 1, MaxDiskBytes},
		{"resources.max_output_bytes", res.MaxOutputBytes, 1, MaxOutputBytes},
	} {
		if l.v == 0 { // absent: the default
			continue
		}
		if l.v < l.min || l.v > l.max {
			return Errorf(CodeLimitRange, "%s: %d is out of range [%d, %d] (0 or absent: default)", l.field, l.v, l.min, l.max).
				with("field", l.field).with("min", l.min).with("max", l.max)
		}
	}
	return nil
}

func (p *Policy) checkBinds(binds []BindMount) *Error {
	if len(binds) > MaxBindMounts {
		return Errorf(CodeLimitRange, "isolation.bind_mounts: %d mounts, at most %d", len(binds), MaxBindMounts).
			with("field", "isolation.bind_mounts").with("max", MaxBindMounts)
	}
	forbidden := p.ForbiddenDest
	if forbidden == nil {
		forbidden = DefaultForbidden
	}
	for i, b := range binds {
		field := fmt.Sprintf("isolation.bind_mounts[%d]", i)
		if b.Source == "" || b.Destination == "" {
			return Errorf(CodeEmptyPath, "%s: source and destination are required", field).with("field", field)
		}
		if e := checkPath(field+".source", b.Source); e != nil {
			return e
		}
		if e := checkPath(field+".destination", b.Destination); e != nil {
			return e
		}
		dst := b.Destination
		if dst == "/" {
			return forbiddenDest(field, dst, "/")
		}
		for _, f := range forbidden {
			if within(dst, f) {
				return forbiddenDest(field, dst, f)
			}
		}
		for _, f := range p.Protected {
			if f = filepath.Clean(f); within(dst, f) {
				return forbiddenDest(field, dst, f)
			}
		}
		srcs := []string{b.Source}
		if p.ResolveSource != nil {
			if r, err := p.ResolveSource(b.Source); err == nil && r != b.Source {
				srcs = append(srcs, r)
			}
		}
		for _, src := range srcs {
			for _, f := range p.Protected {
				if f = filepath.Clean(f); within(src, f) || within(f, src) {
					return Errorf(CodeForbiddenSource, "%s.source: %s would expose %s", field, src, f).
						with("field", field+".source").with("protected", f)
				}
			}
		}
	}
	return nil
}

func forbiddenDest(field, dst, f string) *Error {
	return Errorf(CodeForbiddenDest, "%s.destination: %s is forbidden (%s and below are reserved)", field, dst, f).
		with("field", field+".destination").with("forbidden", f)
}

// checkPath requires an absolute, clean path without NUL bytes.
func checkPath(field, p string) *Error {
	if strings.IndexByte(p, 0) >= 0 {
		return nulError(field)
	}
	if !filepath.IsAbs(p) {
		return Errorf(CodeRelativePath, "%s: %q is not an absolute path", field, p).with("field", field)
	}
	if filepath.Clean(p) != p {
		return Errorf(CodeRelativePath, "%s: %q is not clean (write %q)", field, p, filepath.Clean(p)).with("field", field)
	}
	return nil
}

func nulError(field string) *Error {
	return Errorf(CodeNULByte, "%s: contains a NUL byte", field).with("field", field)
}

// within reports whether p is dir or below it (both absolute and clean).
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
