package tracer

import "github.com/artrt/art/internal/errclass"

// ErrUnsupported: tracing needs linux on amd64 or arm64.
var ErrUnsupported = errclass.New(errclass.Unavailable, "tracing unsupported here")
