package netproxy

import "errors"

// ErrClosed reports an attempt cut short because the Proxy was closed.
var ErrClosed = errors.New("proxy closed")
