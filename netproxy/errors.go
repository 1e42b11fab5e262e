package netproxy

import "github.com/artrt/art/internal/errclass"

// ErrClosed reports an attempt cut short because the Proxy was closed.
var ErrClosed = errclass.New(errclass.Unavailable, "proxy closed")
