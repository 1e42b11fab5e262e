package execapi

import (
	"errors"
	"fmt"
	"sort"

	"github.com/artrt/art/internal/errclass"
)

// Code is a stable error code carried in Response.Error.Code. The first
// digit names the layer that failed; clients branch on the code, never on
// the message. Codes are never renumbered or reused (api_version 1).
type Code string

// Error codes. The table in codeInfo is the one place each is described;
// docs/exec-api.md lists the same table and a test keeps the two equal.
const (
	// E1xxx: the request itself. Nothing was started.
	CodeMalformed     Code = "E1001" // not valid JSON, or a field of the wrong type
	CodeUnknownField  Code = "E1002" // a field the schema does not define
	CodeTrailingData  Code = "E1003" // more than one JSON value where one was expected
	CodeAPIVersion    Code = "E1004" // api_version other than 1
	CodeTooLarge      Code = "E1005" // request larger than MaxRequestBytes
	CodeEmptyCommand  Code = "E1010" // command is missing or []
	CodeCommandLength Code = "E1011" // too many arguments or too many bytes
	CodeNULByte       Code = "E1012" // a NUL byte in a string that becomes a C string
	CodeEnvKey        Code = "E1013" // environment key not [A-Za-z_][A-Za-z0-9_]*
	CodeRelativePath  Code = "E1014" // a path that must be absolute and clean is not
	CodeLimitRange    Code = "E1015" // timeout_ms or a resources value out of range
	CodeEmptyPath     Code = "E1016" // a bind mount without source or destination

	// E2xxx: preparing the sandbox. Nothing of the command ran.
	CodeSetup       Code = "E2001" // the sandbox could not be prepared
	CodeUnsupported Code = "E2002" // this executor cannot honour a requested feature

	// E3xxx: running the command.
	CodeNotFound   Code = "E3001" // the command was not found
	CodeNoExec     Code = "E3002" // the command could not be executed (permission, format)
	CodeTimeout    Code = "E3003" // timeout_ms passed; the process tree was killed
	CodeSignaled   Code = "E3004" // the command was killed by a signal
	CodeExecFailed Code = "E3005" // the process could not be started or waited for

	// E4xxx: a resource limit ended the command.
	CodeMemoryLimit Code = "E4001" // resources.memory_bytes exceeded (OOM kill)
	CodeCPULimit    Code = "E4002" // resources.cpu_ms exceeded
	CodePidsLimit   Code = "E4003" // resources.max_pids reached
	CodeDiskLimit   Code = "E4004" // resources.disk_bytes exceeded

	// E5xxx: the request asked for something policy forbids.
	CodeForbiddenDest   Code = "E5001" // bind destination in /proc, /sys, /dev or a protected path
	CodeForbiddenSource Code = "E5002" // bind source exposes the store or art's state

	// E6xxx: the store or I/O around the command.
	CodeStore       Code = "E6001" // the store could not be read or written
	CodeRevNotFound Code = "E6002" // branch or at names no state
	CodeSnapshot    Code = "E6003" // the snapshot before or after could not be taken
	CodeIO          Code = "E6004" // reading the request or the command's output failed
)

// codeInfo describes every code: its title, as documented.
var codeInfo = map[Code]string{
	CodeMalformed:       "malformed request: not valid JSON, or a field of the wrong type",
	CodeUnknownField:    "unknown field: the request names a field the schema does not define",
	CodeTrailingData:    "trailing data: more than one JSON value where one was expected",
	CodeAPIVersion:      "unsupported api_version (only 1 is defined)",
	CodeTooLarge:        "request larger than the maximum request size",
	CodeEmptyCommand:    "command is missing or empty",
	CodeCommandLength:   "command has too many arguments or bytes",
	CodeNULByte:         "a NUL byte in command, environment, a path, branch or at",
	CodeEnvKey:          "environment key not of the form [A-Za-z_][A-Za-z0-9_]*",
	CodeRelativePath:    "a path is not absolute or not clean",
	CodeLimitRange:      "timeout_ms or a resources value is out of range",
	CodeEmptyPath:       "a bind mount lacks its source or destination",
	CodeSetup:           "the sandbox could not be prepared",
	CodeUnsupported:     "this executor cannot honour a requested feature",
	CodeNotFound:        "the command was not found",
	CodeNoExec:          "the command could not be executed",
	CodeTimeout:         "timed out: the whole process tree was killed",
	CodeSignaled:        "the command was killed by a signal",
	CodeExecFailed:      "the process could not be started or waited for",
	CodeMemoryLimit:     "memory limit exceeded",
	CodeCPULimit:        "CPU time limit exceeded",
	CodePidsLimit:       "process limit reached",
	CodeDiskLimit:       "disk quota exceeded",
	CodeForbiddenDest:   "bind destination is forbidden",
	CodeForbiddenSource: "bind source would expose the store or art's state",
	CodeStore:           "store error",
	CodeRevNotFound:     "branch or revision not found",
	CodeSnapshot:        "snapshot failed",
	CodeIO:              "I/O error reading the request or the command's output",
}

// classCodes is the exec API's table over the error classes (package
// internal/errclass, where every sentinel says its class): the code of an
// error from the store or the session around a request. MCP's tool errors
// carry the same codes (docs/mcp.md), so this is MCP's table too. A
// failure in a named step keeps that step's code instead (E2001 setup,
// E3005 start or wait, E6003 snapshot).
var classCodes = map[errclass.Class]Code{
	errclass.Failure:         CodeStore,
	errclass.CommandNotFound: CodeNotFound,
	errclass.Usage:           CodeMalformed,
	errclass.Conflict:        CodeStore,
	errclass.Corrupt:         CodeStore,
	errclass.Unavailable:     CodeStore,
	errclass.Permission:      CodeStore,
	errclass.NotFound:        CodeRevNotFound,
	errclass.Invalid:         CodeStore,
}

// CodeOf is err's code: the code of an *Error in its chain, else its
// class's (classCodes).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return classCodes[errclass.Of(err)]
}

// Codes returns every defined code in order.
func Codes() []Code {
	out := make([]Code, 0, len(codeInfo))
	for c := range codeInfo {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Title is the documented one-line meaning of c ("" for an unknown code).
func (c Code) Title() string { return codeInfo[c] }

// Error is an error with its exec API code. It is also the response's
// "error" object. Message is exact and documented for validation errors;
// Details carries machine-readable context (field, value, limit).
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf makes an *Error with code c.
func Errorf(c Code, format string, a ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, a...)}
}

func (e *Error) with(k string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
	return e
}

// AsError returns err as an *Error: itself if it is one (or wraps one),
// else an *Error with code c and err's text.
func AsError(err error, c Code) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: c, Message: err.Error()}
}
