package execapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// APIVersion is the version of the request and response documents this
// package speaks. A change that is not purely additive bumps it.
const APIVersion = 1

// Request is one ExecutionRequest (docs/schema/exec-request.v1.json).
// Zero values mean "default": see each field. Decode it with Decode and
// check it with Policy.Validate before running it.
type Request struct {
	// APIVersion must be 1 when present.
	APIVersion int `json:"api_version,omitempty"`
	// Command is the argv; Command[0] is looked up in the sandbox's PATH.
	Command []string `json:"command"`
	// Environment is the whole environment apart from the sandbox's own
	// HOME, PATH and PWD (which it may override); nothing comes from the host.
	Environment map[string]string `json:"environment,omitempty"`
	// WorkingDirectory is an absolute path in the sandbox; "" is the
	// workspace directory.
	WorkingDirectory string `json:"working_directory,omitempty"`
	// Stdin is written to the command's standard input, then closed; ""
	// gives it /dev/null. It may hold any bytes, NUL included.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutMS bounds the wall time; 0 is DefaultTimeoutMS.
	TimeoutMS int64     `json:"timeout_ms,omitempty"`
	Resources Resources `json:"resources,omitzero"`
	Isolation Isolation `json:"isolation,omitzero"`
	// Branch runs on this branch of the store ("" the session's branch).
	Branch string `json:"branch,omitempty"`
	// At starts the branch from this revision (REV syntax of art).
	At string `json:"at,omitempty"`
	// Snapshot takes snapshots before and after; absent means true.
	Snapshot *bool `json:"snapshot,omitempty"`

	// ExecutionID is assigned by the Server before the executor sees the
	// request; it is not part of the JSON document.
	ExecutionID string `json:"-"`
}

// WantSnapshot reports whether snapshots are requested (the default).
func (r *Request) WantSnapshot() bool { return r.Snapshot == nil || *r.Snapshot }

// Timeout returns the effective timeout in milliseconds.
func (r *Request) Timeout() int64 {
	if r.TimeoutMS == 0 {
		return DefaultTimeoutMS
	}
	return r.TimeoutMS
}

// OutputLimit returns the effective per-stream output limit in bytes.
func (r *Request) OutputLimit() int {
	if r.Resources.MaxOutputBytes == 0 {
		return DefaultMaxOutputBytes
	}
	return int(r.Resources.MaxOutputBytes)
}

// Resources are the limits of one execution; 0 means no limit beyond the
// sandbox's own (max_output_bytes: 0 means DefaultMaxOutputBytes).
type Resources struct {
	MemoryBytes    int64 `json:"memory_bytes,omitempty"`
	MaxPids        int64 `json:"max_pids,omitempty"`
	CPUMS          int64 `json:"cpu_ms,omitempty"`
	DiskBytes      int64 `json:"disk_bytes,omitempty"`
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
}

// Isolation says what the sandbox shares with the host.
type Isolation struct {
	// Network false (the default) gives the command its own network
	// namespace with only lo; true shares the host's network.
	Network    bool        `json:"network,omitempty"`
	BindMounts []BindMount `json:"bind_mounts,omitempty"`
}

// BindMount makes host path Source visible at Destination in the sandbox.
type BindMount struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"readonly,omitempty"`
}

// Decode reads exactly one request from data, strictly: field names must
// match the schema exactly (encoding/json alone would accept "Command"),
// unknown fields and anything after the value are rejected. The error is
// always an *Error with an E1xxx code.
func Decode(data []byte) (*Request, *Error) {
	if len(data) > MaxRequestBytes {
		return nil, Errorf(CodeTooLarge, "request is longer than %d bytes", MaxRequestBytes).
			with("limit", MaxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errorf(CodeMalformed, "empty request")
		}
		return nil, Errorf(CodeMalformed, "invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Errorf(CodeTrailingData, "unexpected data after the request at byte %d", dec.InputOffset())
	}
	if _, ok := generic.(map[string]any); !ok {
		return nil, Errorf(CodeMalformed, "the request must be a JSON object")
	}
	if e := checkFields(generic, reflect.TypeFor[Request](), ""); e != nil {
		return nil, e
	}
	var req Request
	if err := json.Unmarshal(data, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, Errorf(CodeMalformed, "%s: expected %s, got JSON %s", te.Field, jsonKind(te.Type), te.Value).
				with("field", te.Field)
		}
		return nil, Errorf(CodeMalformed, "invalid request: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if req.APIVersion != 0 && req.APIVersion != APIVersion {
		return nil, Errorf(CodeAPIVersion, "api_version %d is not supported (this art speaks %d)", req.APIVersion, APIVersion).
			with("field", "api_version")
	}
	return &req, nil
}

// checkFields walks a decoded JSON value against the Go type t and
// rejects object keys that are not exactly a field's JSON name.
func checkFields(v any, t reflect.Type, path string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				f, ok := fields[k]
				if !ok {
					return Errorf(CodeUnknownField, "unknown field %q", join(path, k)).with("field", join(path, k))
				}
				if e := checkFields(sub, f.Type, join(path, k)); e != nil {
					return e
				}
			}
		case reflect.Map:
			for k, sub := range val {
				if e := checkFields(sub, t.Elem(), join(path, k)); e != nil {
					return e
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice {
			for i, sub := range val {
				if e := checkFields(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); e != nil {
					return e
				}
			}
		}
	}
	return nil // type mismatches are reported by json.Unmarshal
}

// jsonFields maps the JSON names of t's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
