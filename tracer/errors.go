package tracer

import "errors"

// ErrUnsupported: tracing needs linux on amd64 or arm64.
var ErrUnsupported = errors.New("tracing unsupported here")
